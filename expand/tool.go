package expand

import (
	"encoding/json"
	"strconv"
	"strings"
)

// ToolDescription is what the model reads of ToolName: one sentence that
// says the text comes back whole, so that a marker is never read as
// content that is lost or corrupt.
const ToolDescription = "Returns the original, intact text that ctxpress shortened in this conversation " +
	"(a tool output it squashed, pruned or deduplicated, or messages a summary replaced), " +
	"given the ref its marker names and, optionally, the lines to return."

// ToolParameters is the JSON schema of ToolName's arguments, as compact
// JSON: fixed bytes, so that the tools of every request are the same and
// the provider's cached prefix holds.
const ToolParameters = `{"type":"object","properties":{` +
	`"ref":{"type":"string","description":"The reference the marker gives, e.g. 3f9a2c1b4d5e."},` +
	`"lines":{"type":"string","description":"Optional 1-based, inclusive line range A-B of the original, as the marker gives it; omit it for the whole text."}},` +
	`"required":["ref"],"additionalProperties":false}`

// MaxToolResult bounds the text one call of the tool returns: a range
// larger than this comes back cut at a line end, with a note saying how
// to ask for the rest, rather than overflowing the model's window.
const MaxToolResult = 128 << 10

// Getter looks up the original kept under ref, in the namespace of the
// conversation that asks (state.Originals.GetOriginal, bound to it).
type Getter func(ref string) (o Original, ok bool, err error)

// toolArgs are the arguments of a call of ToolName.
type toolArgs struct {
	Ref   string `json:"ref"`
	Lines string `json:"lines"`
}

// Retrieve answers a call of ToolName with arguments args (JSON text as
// the model wrote it): the lines asked for of the original, byte for
// byte, or, with isError, a sentence the model can act on (arguments it
// cannot read, a reference that is none or is no longer kept, the store
// failing). It never fails otherwise.
func Retrieve(args string, get Getter) (text string, isError bool) {
	var a toolArgs
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		return ToolName + `: the arguments must be a JSON object such as {"ref":"3f9a2c1b4d5e","lines":"11-390"}, as the marker gives them`, true
	}
	a.Ref = strings.ToLower(strings.TrimSpace(a.Ref))
	if !ValidRef(a.Ref) {
		return ToolName + `: "` + a.Ref + `" is not a reference; give the ` + strconv.Itoa(RefLen) + ` hex digits a marker names`, true
	}
	l, err := ParseLines(a.Lines)
	if err != nil {
		return ToolName + ": " + err.Error(), true
	}
	o, ok, err := get(a.Ref)
	switch {
	case err != nil:
		return ToolName + ": the original " + a.Ref + " cannot be read right now (the store failed); try again later", true
	case !ok:
		return ToolName + ": no original is kept under " + a.Ref + " (never kept here, or expired)", true
	}
	text = Slice(o.Text, l)
	if text == "" && o.Text != "" {
		return ToolName + ": the original " + a.Ref + " has " + strconv.Itoa(CountLines(o.Text)) + " lines; ask for lines within them", true
	}
	return cut(text, l, CountLines(o.Text)), false
}

// cut returns text (lines l of an original of total lines) whole when it
// fits MaxToolResult, else its first lines that fit and a note naming the
// lines that follow.
func cut(text string, l Lines, total int) string {
	if len(text) <= MaxToolResult {
		return text
	}
	from := max(l.From, 1)
	i := strings.LastIndexByte(text[:MaxToolResult], '\n')
	if i < 0 {
		return text[:MaxToolResult] + "\n[" + ToolName + ": cut here to fit; line " + strconv.Itoa(from) + " is longer than one call returns]"
	}
	kept := text[:i+1]
	next := from + strings.Count(kept, "\n")
	to := l.To
	if to == 0 {
		to = total
	}
	return kept + "\n[" + ToolName + ": cut here to fit; lines " + strconv.Itoa(from) + "-" + strconv.Itoa(next-1) +
		" above, ask for lines " + strconv.Itoa(next) + "-" + strconv.Itoa(to) + " for the rest]"
}
