package gemini

import (
	"crypto/sha256"
	"strconv"
	"strings"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// Token accounting. Google publishes no framing and no offline tokenizer
// for Gemini; these follow the other adapters', and the calibration learnt
// from usageMetadata corrects what they miss.
const (
	tokensPerMessage = 3
	tokensPerPart    = 3 // a functionCall or functionResponse part's framing
	replyPriming     = 3
	// mediaTokens is what an inlineData or fileData part is counted as:
	// Gemini 3's cost of one image at its default (high) media
	// resolution. The real cost depends on the medium and its size, which
	// ctxpress does not decode.
	mediaTokens = 1120
)

// Format is the Gemini adapter of wire.Format. Every element of contents
// is a message and every part one item: text parts are user or model
// text; a functionCall is a call (its args the arguments), a
// functionResponse a result (a user content that carries one is a tool
// message); inlineData, fileData, executableCode, codeExecutionResult,
// thought parts and unknown parts are opaque, never edited. The top-level
// systemInstruction is the instructions' slot (SystemSlot, Lead 0).
//
// A call pairs with its response by id when the call has one. Without, the
// API pairs them by order and name: the k-th response named N in a user
// content answers the k-th call named N in the model content before it, so
// such a call's CallID is "N#k" and its response takes the CallID of the
// call it answers (parallel calls of one tool, which a pairing by name
// alone would mix up, stay apart). A response whose id no call before it
// has (Gemini CLI answers a call the API sent without an id with an id of
// its own making) pairs by order and name too.
//
// Parts with a thoughtSignature, and thought parts, of model contents are
// bound (Item.Bound), and a history with any signature, or a request that
// configures thinking, is Bound (signature.go). A parse continues from the
// last request's (wire.Resumer): Google's SDKs send contents first.
//
// The model and whether the request streams are in the path, not in the
// body: the shell gives them as Model and Stream.
type Format struct {
	// Model is the model the request's path names; it becomes the
	// conversation's Model. "" takes the body's own "model" member, if
	// any (the REST API needs none).
	Model string
	// Stream is whether the path's method streams (StreamAsks); it becomes
	// the conversation's Stream.
	Stream bool
}

var (
	_ wire.Resumer = Format{}
	_ wire.Binder  = Format{}
)

// Name names the format.
func (Format) Name() string { return "gemini" }

// Parse reads a generateContent body; false when it is not an object with
// a contents array.
func (f Format) Parse(body []byte) (*wire.Conversation, bool) {
	req, ok := parseValid(body)
	if !ok || !req.ContentsArray.Exists() || body[req.ContentsArray.Start] != '[' {
		return &wire.Conversation{Body: body}, false
	}
	c := f.conversation(req)
	c.Messages = make([]wire.Message, 0, len(req.Contents))
	return finish(c, req, nil), true
}

// Resume is Parse continued from prev at the end of one of its contents
// (see wire.Resumer): the top-level members before contents and the
// contents up to at are prev's; the rest is read from body.
func (f Format) Resume(body []byte, prev *wire.Conversation, at int) (*wire.Conversation, bool, int) {
	t, ok := prev.Resume.(*top)
	k := prev.MessagesEndingAt(at)
	if !ok || k == 0 {
		c, chat := f.Parse(body)
		return c, chat, 0
	}
	req := &Request{Body: body, Model: t.model, SystemInstruction: t.system, Tools: t.tools,
		ToolConfig: t.toolConfig, GenerationConfig: t.generation, top: *t}
	end := wire.WalkArrayAfter(body, at, req.content)
	req.ContentsArray = Span{Start: t.array, End: end}
	wire.WalkObjectAfter(body, end, req.member)
	if req.ContentsArray.Start != t.array {
		c, chat := f.Parse(body) // a later contents replaces this one
		return c, chat, 0
	}
	c := f.conversation(req)
	c.TakeMessages(prev, k, len(req.Contents))
	return finish(c, req, callsOf(prev, k-1)), true, k
}

// conversation is the conversation of req, a request with a contents
// array, before its contents are added.
func (f Format) conversation(req *Request) *wire.Conversation {
	model := f.Model
	if model == "" {
		model = req.Model
	}
	resume := req.top // not &req.top: a remembered parse keeps it, and never the body
	c := &wire.Conversation{Body: req.Body, Model: model, Stream: f.Stream, Priming: replyPriming, SystemSlot: true, Resume: &resume}
	for _, s := range []Span{req.SystemInstruction, req.Tools, req.ToolConfig} {
		if s.Exists() {
			c.Counted = append(c.Counted, s)
		}
	}
	return c
}

// finish adds req's contents to c, prev being the calls of the model
// content before them (callsOf), and returns c bound when the request
// configures thinking or any of its parts is bound.
func finish(c *wire.Conversation, req *Request, prev map[string][]string) *wire.Conversation {
	for i := range req.Contents {
		prev = addContent(c, &req.Contents[i], prev)
	}
	c.Bound = thinkingOn(c.Body, req.GenerationConfig)
	for _, it := range c.Items {
		c.Bound = c.Bound || it.Bound
	}
	return c
}

// callsOf is the CallIDs of message m's calls by name when it is the
// model's (addContent's prev); nil otherwise.
func callsOf(c *wire.Conversation, m int) map[string][]string {
	if m < 0 || c.Messages[m].Role != wire.RoleAssistant {
		return nil
	}
	var calls map[string][]string
	for _, it := range c.ItemsOf(m) {
		if it.Kind == wire.KindToolCall {
			if calls == nil {
				calls = map[string][]string{}
			}
			calls[it.Tool] = append(calls[it.Tool], it.CallID)
		}
	}
	return calls
}

// addContent adds content m and its parts to c. prev are the CallIDs of
// the calls of the model content before it, by name; it returns those of
// m when m is the model's.
func addContent(c *wire.Conversation, m *Content, prev map[string][]string) map[string][]string {
	msg := wire.Message{Span: m.Span, Object: c.Body[m.Span.Start] == '{', WireRole: m.Role}
	msg.Items.Start = len(c.Items)
	model := m.Role == "model"
	kind := wire.KindUser
	switch m.Role {
	case "model":
		msg.Role, kind = wire.RoleAssistant, wire.KindAssistant
	case "user", "":
		msg.Role = wire.RoleUser
	default:
		msg.Role, kind = wire.RoleOther, wire.KindOpaque
	}
	var calls map[string][]string
	seen := map[string]int{} // responses or calls per name so far
	for _, p := range m.List {
		it := wire.Item{Kind: wire.KindOpaque, Message: len(c.Messages), Span: p.Span}
		switch {
		case p.Thought:
			// Thoughts are the model's: never edited, whatever they hold.
		case p.Kind == PartText && kind != wire.KindOpaque:
			it.Kind, it.Content = kind, p.Text
		case p.Kind == PartFunctionCall && model:
			seen[p.Name]++
			id := p.ID
			if id == "" {
				id = p.Name + "#" + strconv.Itoa(seen[p.Name])
			}
			it.Kind, it.CallID, it.Tool, it.Args = wire.KindToolCall, id, p.Name, p.Args
			if calls == nil {
				calls = map[string][]string{}
			}
			calls[p.Name] = append(calls[p.Name], id)
		case p.Kind == PartFunctionResponse && msg.Role == wire.RoleUser || p.Kind == PartFunctionResponse && msg.Role == wire.RoleTool:
			// A user content that answers calls is a tool message (the
			// compactor keeps it with its calls).
			msg.Role = wire.RoleTool
			k := seen[p.Name]
			seen[p.Name]++
			id := p.ID
			switch {
			case id != "" && answers(prev, p.Name, id):
			case k < len(prev[p.Name]):
				id = prev[p.Name][k]
			case id == "":
				id = p.Name + "#" + strconv.Itoa(k+1)
			}
			it.Kind, it.CallID, it.Tool, it.Content = wire.KindToolResult, id, p.Name, p.Response
		}
		it.Bound = model && (p.Thought || p.Signature.Exists())
		c.Items = append(c.Items, it)
	}
	msg.Items.End = len(c.Items)
	c.Messages = append(c.Messages, msg)
	return calls
}

// answers reports whether the calls named name of the model content before
// (prev) include one whose CallID is id.
func answers(prev map[string][]string, name, id string) bool {
	for _, c := range prev[name] {
		if c == id {
			return true
		}
	}
	return false
}

// thinkingOn reports whether generationConfig configures thinking other
// than off (a thinkingConfig whose thinkingBudget is not 0): the answers
// then come with signatures, so the history is bound from the first turn.
func thinkingOn(body []byte, gc Span) bool {
	if !gc.Exists() || body[gc.Start] != '{' {
		return false
	}
	tc := member(body, gc.Start, "thinkingConfig")
	if !tc.Exists() || body[tc.Start] != '{' {
		return false
	}
	b := member(body, tc.Start, "thinkingBudget")
	if !b.Exists() {
		b = member(body, tc.Start, "thinking_budget")
	}
	return !b.Exists() || string(b.Of(body)) != "0"
}

// member returns the span of the (last) member of the object that opens
// at b[i] whose name is name in either spelling (canon); zero when absent.
func member(b []byte, i int, name string) Span {
	var s Span
	wire.WalkObject(b, i, func(k Span, vs int) int {
		ve := wire.ValueEnd(b, vs)
		if canon(wire.KeyName(b, k)) == name {
			s = Span{Start: vs, End: ve}
		}
		return ve
	})
	return s
}

// value is the JSON value at s, its Index the offset of s in the body.
func value(body []byte, s Span) gjson.Result {
	if !s.Exists() {
		return gjson.Result{}
	}
	r := gjson.ParseBytes(body[s.Start:s.End])
	r.Index = s.Start
	return r
}

// Overhead is message m's tokens besides its text and result contents:
// framing and role, a call's name and args, a response's framing and name,
// and each opaque part (a thought's text, media at mediaTokens, anything
// else as its raw JSON). Signatures are not counted: they are the model's
// own state, and their size says nothing the calibration cannot.
func (Format) Overhead(c *wire.Conversation, m int, count wire.Count) int {
	msg := c.Messages[m]
	if !msg.Object {
		return tokensPerMessage + count(string(c.Bytes(m)))
	}
	n := tokensPerMessage + count(msg.WireRole)
	for i := msg.Items.Start; i < msg.Items.End; i++ {
		it := c.Items[i]
		switch it.Kind {
		case wire.KindToolCall:
			n += tokensPerPart + count(it.Tool) + count(string(it.Args.Of(c.Body)))
		case wire.KindToolResult:
			n += tokensPerPart + count(it.Tool)
		case wire.KindOpaque:
			n += opaqueTokens(c.Body, readPart(c.Body, it.Span.Start), count)
		}
	}
	return n
}

// opaqueTokens counts a part the core does not look into.
func opaqueTokens(body []byte, p Part, count wire.Count) int {
	switch {
	case p.Kind == PartText:
		s, _ := wire.StringValue(body, p.Text)
		return count(s)
	case p.Kind == PartInlineData, p.Kind == PartFileData:
		return mediaTokens
	}
	raw := p.Span.Of(body)
	if p.Signature.Exists() {
		// The part without its signature.
		return count(string(raw)) - count(string(p.Signature.Of(body)))
	}
	return count(string(raw))
}

// Parts returns item it's content part by part: a text part's text; a
// functionResponse's main strings (mainStrings), or its whole response as
// one text that cannot be edited in place when it has none.
func (Format) Parts(c *wire.Conversation, it int, count wire.Count) []wire.Part {
	item := c.Items[it]
	s := item.Content
	if !s.Exists() {
		return nil
	}
	if item.Kind != wire.KindToolResult {
		t, _ := wire.StringValue(c.Body, s)
		return []wire.Part{{IsText: true, Text: t, Span: s}}
	}
	if main := mainString(c.Body, s); main.Exists() {
		t, _ := wire.StringValue(c.Body, main)
		return []wire.Part{{IsText: true, Text: t, Span: main}}
	}
	return []wire.Part{{IsText: true, Text: string(s.Of(c.Body))}}
}

// mainKeys are the members of a functionResponse's response that hold
// its text, in order: Gemini CLI sends {"output": …} (or {"error": …}),
// Google's samples {"result": …}, MCP bridges {"content": …}.
var mainKeys = []string{"output", "result", "content", "error"}

// mainString is the span of the JSON string that is the text of a
// functionResponse's response: the first of mainKeys that is a string,
// else the value of its only member when that is a string; zero when it
// has none (a structured response).
func mainString(body []byte, resp Span) Span {
	if body[resp.Start] != '{' {
		return Span{}
	}
	found := make([]Span, len(mainKeys))
	var only Span
	n := 0
	wire.WalkObject(body, resp.Start, func(k Span, vs int) int {
		ve := wire.ValueEnd(body, vs)
		n++
		if body[vs] != '"' {
			return ve
		}
		only = Span{Start: vs, End: ve}
		name := wire.KeyName(body, k)
		for i, key := range mainKeys {
			if name == key && !found[i].Exists() {
				found[i] = only
			}
		}
		return ve
	})
	for _, s := range found {
		if s.Exists() {
			return s
		}
	}
	if n == 1 {
		return only
	}
	return Span{}
}

// Text is item it's content as plain text.
func (f Format) Text(c *wire.Conversation, it int) string {
	var texts []string
	for _, p := range f.Parts(c, it, nil) {
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n")
}

// Arguments is call item it's args as the model wrote them.
func (Format) Arguments(c *wire.Conversation, it int) string {
	return string(c.Items[it].Args.Of(c.Body))
}

// CanonicalArguments is call item it's args in canonical form; nil when
// it has none.
func (Format) CanonicalArguments(c *wire.Conversation, it int) []byte {
	a := c.Items[it].Args
	if !a.Exists() {
		return nil
	}
	return wire.AppendCanonical(nil, value(c.Body, a))
}

// Digest is the sha256 of content m's canonical form, its signatures
// included: a part sent with another signature is another part.
func (Format) Digest(c *wire.Conversation, m int) [sha256.Size]byte {
	return sha256.Sum256(wire.AppendCanonical(nil, value(c.Body, c.Messages[m].Span)))
}
