package geminitest

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The contents' rules. Wording is Google's where it was seen in reports
// (google-gemini/gemini-cli issues #4217, #11814, #17208, #26486, #26956;
// langchain-ai/langchain #27799; the thought-signature texts in
// ai.google.dev/gemini-api/docs/thought-signatures and the issues quoting
// them). The text for a response that answers no call by id or name is
// ours: Google's for it was not seen.

// content is one entry of contents.
type content struct {
	Index int
	Role  string
	Raw   json.RawMessage
	Parts []part
}

// part is one part of a content.
type part struct {
	Path      string // contents[i].parts[j]
	Kind      string // the data field: text, functionCall, functionResponse, ...
	Text      string
	Thought   bool
	Name, ID  string
	Args      string // functionCall args, compacted
	Signature string
	Signed    bool // thoughtSignature present
}

// partKeys are Part's fields; dataKeys the oneof among them.
var (
	partKeys = map[string]bool{"text": true, "inlineData": true, "fileData": true, "functionCall": true,
		"functionResponse": true, "executableCode": true, "codeExecutionResult": true, "thought": true,
		"thoughtSignature": true, "videoMetadata": true, "partMetadata": true, "mediaResolution": true}
	dataKeys = []string{"text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode", "codeExecutionResult"}
)

func readContents(raw json.RawMessage) ([]content, *Error) {
	var raws []json.RawMessage
	if len(raw) > 0 && json.Unmarshal(raw, &raws) != nil {
		return nil, invalid("Invalid JSON payload received. Unknown name \"contents\": Proto field is not repeating, cannot start list.")
	}
	if len(raws) == 0 {
		return nil, invalid("* GenerateContentRequest.contents: contents is not specified\n")
	}
	out := make([]content, len(raws))
	for i, r := range raws {
		c, err := readContent(i, r)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

func readContent(i int, raw json.RawMessage) (content, *Error) {
	m, err := object(raw)
	if err != nil {
		return content{}, invalid("Invalid JSON payload received. Invalid value at 'contents[%d]': %v", i, err)
	}
	for _, k := range sortedKeys(m) {
		if k != "role" && k != "parts" {
			return content{}, invalid("Invalid JSON payload received. Unknown name %q at 'contents[%d]': Cannot find field.", k, i)
		}
	}
	c := content{Index: i, Raw: raw}
	_ = json.Unmarshal(m["role"], &c.Role)
	if c.Role != "user" && c.Role != "model" {
		return c, invalid("Please use a valid role: user, model.")
	}
	var parts []json.RawMessage
	_ = json.Unmarshal(m["parts"], &parts)
	if len(parts) == 0 {
		return c, invalid("* GenerateContentRequest.contents[%d].parts: contents.parts must not be empty.\n", i)
	}
	for j, p := range parts {
		pt, err := readPart(fmt.Sprintf("contents[%d].parts[%d]", i, j), p)
		if err != nil {
			return c, err
		}
		if c.Role == "user" && pt.Kind == "functionCall" || c.Role == "model" && pt.Kind == "functionResponse" {
			// The API reads the turn by its parts; a call in a user
			// content is a turn out of place.
			return c, invalid("Please ensure that function call turn comes immediately after a user turn or after a function response turn.")
		}
		c.Parts = append(c.Parts, pt)
	}
	return c, nil
}

func readPart(path string, raw json.RawMessage) (part, *Error) {
	m, err := object(raw)
	if err != nil {
		return part{}, invalid("Invalid JSON payload received. Invalid value at '%s': %v", path, err)
	}
	p := part{Path: path}
	for _, k := range sortedKeys(m) {
		if !partKeys[k] {
			return p, invalid("Invalid JSON payload received. Unknown name %q at '%s': Cannot find field.", k, path)
		}
	}
	for _, k := range dataKeys {
		if _, ok := m[k]; !ok {
			continue
		}
		if p.Kind != "" {
			return p, invalid("Invalid JSON payload received. Oneof field 'data' is already set. Cannot set '%s'", k)
		}
		p.Kind = k
	}
	if _, signed := m["thoughtSignature"]; p.Kind == "" && signed {
		// A streamed text's last part is {"text":"", "thoughtSignature":…};
		// Google's SDKs send it back without the empty text, and the API
		// takes it.
		p.Kind = "signature"
	}
	if p.Kind == "" {
		return p, invalid("* GenerateContentRequest.%s.data: required oneof field 'data' must have one initialized field\n", path)
	}
	_ = json.Unmarshal(m["text"], &p.Text)
	_ = json.Unmarshal(m["thought"], &p.Thought)
	if s, ok := m["thoughtSignature"]; ok {
		p.Signed = json.Unmarshal(s, &p.Signature) == nil
	}
	switch p.Kind {
	case "functionCall", "functionResponse":
		f, err := object(m[p.Kind])
		if err != nil {
			return p, invalid("Invalid JSON payload received. Invalid value at '%s.%s'", path, p.Kind)
		}
		field, keys, value := "function_call", callKeys, "args"
		if p.Kind == "functionResponse" {
			field, keys, value = "function_response", responseKeys, "response"
		}
		for _, k := range sortedKeys(f) {
			if !keys[k] {
				return p, invalid("Invalid JSON payload received. Unknown name %q at '%s.%s': Cannot find field.", k, path, field)
			}
		}
		if v, ok := f[value]; ok && string(v) != "null" && (len(v) == 0 || v[0] != '{') {
			// A google.protobuf.Struct: a tool output rewritten to a
			// string or a list is refused.
			return p, invalid("Invalid value at '%s.%s.%s' (type.googleapis.com/google.protobuf.Struct), %s", path, field, value, clip(v))
		}
		_ = json.Unmarshal(f["name"], &p.Name)
		_ = json.Unmarshal(f["id"], &p.ID)
		if p.Name == "" {
			return p, invalid("* GenerateContentRequest.%s.%s.name: Name cannot be empty.\n", path, snake(p.Kind))
		}
		p.Args = compact(f["args"])
	}
	return p, nil
}

// callKeys and responseKeys are FunctionCall's and FunctionResponse's
// fields.
var (
	callKeys     = map[string]bool{"id": true, "name": true, "args": true, "partialArgs": true, "willContinue": true}
	responseKeys = map[string]bool{"id": true, "name": true, "response": true, "parts": true, "willContinue": true, "scheduling": true}
)

// clip is a value as an error quotes it, cut short.
func clip(v json.RawMessage) string {
	if len(v) > 40 {
		return string(v[:40]) + "…"
	}
	return string(v)
}

func snake(k string) string {
	var b bytes.Buffer
	for _, c := range k {
		if c >= 'A' && c <= 'Z' {
			b.WriteByte('_')
			c += 'a' - 'A'
		}
		b.WriteRune(c)
	}
	return b.String()
}

// compact is raw without insignificant space, so args re-serialised by a
// client compare equal.
func compact(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v) // map keys sorted
	return string(b)
}

func (c content) calls() []part   { return c.partsOf("functionCall") }
func (c content) answers() []part { return c.partsOf("functionResponse") }

func (c content) partsOf(kind string) []part {
	var out []part
	for _, p := range c.Parts {
		if p.Kind == kind {
			out = append(out, p)
		}
	}
	return out
}

// currentTurn is the index of the last user content that is no function
// response: the turn the signatures are checked in opens there.
func currentTurn(cs []content) int {
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].Role == "user" && len(cs[i].answers()) == 0 {
			return i
		}
	}
	return 0
}

func lastUserText(cs []content) string {
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].Role != "user" {
			continue
		}
		var b bytes.Buffer
		for _, p := range cs[i].Parts {
			if p.Kind == "text" && !p.Thought {
				b.WriteString(p.Text)
			}
		}
		if b.Len() > 0 {
			return b.String()
		}
	}
	return ""
}

// pairing checks every function call turn against its neighbours.
func pairing(cs []content) *Error {
	for i, c := range cs {
		if calls := c.calls(); len(calls) > 0 {
			if i == 0 || cs[i-1].Role != "user" {
				return invalid("Please ensure that function call turn comes immediately after a user turn or after a function response turn.")
			}
			if i+1 < len(cs) {
				if err := answered(calls, cs[i+1]); err != nil {
					return err
				}
			}
		}
		if len(c.answers()) > 0 && (i == 0 || len(cs[i-1].calls()) == 0) {
			return invalid("Please ensure that function response turn comes immediately after a function call turn.")
		}
	}
	return nil
}

// answered checks that next answers each of calls once: by id when the
// call has one, else the next unanswered call of the same name.
func answered(calls []part, next content) *Error {
	rs := next.answers()
	if len(rs) != len(calls) {
		return invalid("Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.")
	}
	used := make([]bool, len(calls))
	for _, r := range rs {
		k := -1
		for j, c := range calls {
			if used[j] {
				continue
			}
			if r.ID != "" && c.ID != "" {
				if r.ID == c.ID {
					k = j
					break
				}
				continue
			}
			if r.Name == c.Name {
				k = j
				break
			}
		}
		if k < 0 {
			return invalid("%s: function response `%s` (id %q) answers no function call of the function call turn before it.", r.Path, r.Name, r.ID)
		}
		if calls[k].Name != r.Name {
			return invalid("%s: function response name `%s` does not match the function call `%s` it answers.", r.Path, r.Name, calls[k].Name)
		}
		used[k] = true
	}
	return nil
}

// missingSignatures: in the current turn, the first functionCall part of
// each model step must carry a thought signature. The position is the
// content's, counted from 1.
func missingSignatures(cs []content, from int) *Error {
	for i := from; i < len(cs); i++ {
		calls := cs[i].calls()
		if cs[i].Role != "model" || len(calls) == 0 || calls[0].Signed {
			continue
		}
		return invalid("Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:%s` , position %d. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", calls[0].Name, i+1)
	}
	return nil
}
