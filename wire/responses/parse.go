package responses

import (
	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// Span is a [Start, End) range of bytes in a request body.
type Span = wire.Span

// Item kinds, from an input item's "type" (a message without one, as
// clients may send user and developer messages, is a message).
const (
	KindMessage    = "message"
	KindCall       = "function_call"
	KindCallOutput = "function_call_output"
	KindCustomCall = "custom_tool_call"
	KindCustomOut  = "custom_tool_call_output"
	KindShellCall  = "local_shell_call"
	KindShellOut   = "local_shell_call_output"
	KindReasoning  = "reasoning"
	KindCompaction = "compaction"
	// KindCompactionSummary is an older name of a compaction item.
	KindCompactionSummary = "compaction_summary"
	// KindCompactionTrigger asks the provider to compact the conversation
	// (codex's remote compaction).
	KindCompactionTrigger = "compaction_trigger"
)

// Item is one element of "input", as ctxpress reads it: what it is and the
// byte spans of the values a step may look at. Everything else in it is
// never touched.
type Item struct {
	Span   Span   // the whole item
	Kind   string // its "type" (KindMessage for a typeless message); "" when not an object
	Role   string // a message's role: user, assistant, system, developer
	CallID string // a call's or an output's call_id
	Name   string // a call's tool name
	// Args is a function call's "arguments" (a JSON string) or a custom
	// call's "input"; Content is a message's "content" or an output's
	// "output" (a string, or an array of input_text/input_image parts).
	Args, Content Span
}

// IsCall reports whether the item asks for a tool's output.
func (it Item) IsCall() bool {
	return it.Kind == KindCall || it.Kind == KindCustomCall || it.Kind == KindShellCall
}

// IsOutput reports whether the item is a tool's output.
func (it Item) IsOutput() bool {
	return it.Kind == KindCallOutput || it.Kind == KindCustomOut || it.Kind == KindShellOut
}

// Request is a Responses request body as ctxpress reads it.
type Request struct {
	Body   []byte
	Model  string
	Stream bool
	// Store is the body's "store"; Stored is false when it is absent
	// (OpenAI then stores the response).
	Store, Stored bool
	// PreviousResponseID names history kept on the provider: ctxpress
	// cannot see it, so it never compacts such a request.
	PreviousResponseID string
	// Conversation reports a "conversation" the provider keeps the
	// history of (like PreviousResponseID, history ctxpress cannot see).
	Conversation       bool
	PromptCacheKey     string
	PromptCacheKeySpan Span
	Instructions       Span // top-level "instructions"
	Tools              Span // "tools": counted, never changed
	// Input is the "input" value; InputIsText reports a plain string (one
	// user message, nothing to edit). Items are its elements in order.
	Input       Span
	InputIsText bool
	Items       []Item
	// top is the top-level members read when the (last) input array
	// opened: where Format.Resume continues from.
	top top
}

// Parse reads a Responses request body. ok is false when body is not a
// JSON object: the shell then forwards it unchanged.
func Parse(body []byte) (req *Request, ok bool) {
	if !jsonvalid.Valid(body) {
		return nil, false
	}
	return parseValid(body)
}

// parseValid is Parse of a body already known to be valid JSON. It walks
// the body without decoding it (wire's scanner): only the short strings
// it names are decoded, as gjson reads them, and copied, so nothing read
// holds the body. A member sent twice counts as its last value (input
// items of every input array are read, as before).
func parseValid(body []byte) (req *Request, ok bool) {
	i := wire.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, false
	}
	req = &Request{Body: body}
	wire.WalkObject(body, i, req.member)
	return req, true
}

// top is what the top-level walk has read when the input array opens:
// where Format.Resume continues from.
type top struct {
	model, previousResponseID, promptCacheKey string
	stream, store, stored, conversation       bool
	promptCacheKeySpan, instructions, tools   Span
	array                                     int // where the input array opens
}

// member reads one top-level member of req's body (WalkObject's fn).
func (req *Request) member(k wire.Span, vs int) int {
	body := req.Body
	name := wire.KeyName(body, k)
	if name == "input" && body[vs] == '[' {
		// Read once: the walk's end is the array's.
		req.top = top{model: req.Model, previousResponseID: req.PreviousResponseID, promptCacheKey: req.PromptCacheKey,
			stream: req.Stream, store: req.Store, stored: req.Stored, conversation: req.Conversation,
			promptCacheKeySpan: req.PromptCacheKeySpan, instructions: req.Instructions, tools: req.Tools, array: vs}
		ve := wire.WalkArray(body, vs, req.item)
		req.Input, req.InputIsText = Span{Start: vs, End: ve}, false
		return ve
	}
	ve := wire.ValueEnd(body, vs)
	v := Span{Start: vs, End: ve}
	switch name {
	case "model":
		req.Model = stringOf(body, v)
	case "stream":
		req.Stream = string(v.Of(body)) == "true"
	case "store":
		req.Stored, req.Store = true, string(v.Of(body)) == "true"
	case "previous_response_id":
		req.PreviousResponseID = stringOf(body, v)
	case "conversation":
		req.Conversation = string(v.Of(body)) != "null"
	case "prompt_cache_key":
		req.PromptCacheKey, req.PromptCacheKeySpan = stringOf(body, v), v
	case "instructions":
		req.Instructions = v
	case "tools":
		req.Tools = v
	case "input":
		req.Input, req.InputIsText = v, body[vs] == '"'
	}
	return ve
}

// item reads one element of req's input (WalkArray's fn).
func (req *Request) item(es int) int {
	it := readItem(req.Body, es)
	req.Items = append(req.Items, it)
	return it.Span.End
}

// readItem reads the input element that starts at body[i].
func readItem(body []byte, i int) Item {
	it := Item{Span: Span{Start: i}}
	if body[i] != '{' {
		it.Span.End = wire.ValueEnd(body, i)
		return it
	}
	it.Kind = KindMessage
	it.Span.End = wire.WalkObject(body, i, func(k wire.Span, vs int) int {
		ve := wire.ValueEnd(body, vs)
		f := Span{Start: vs, End: ve}
		switch wire.KeyName(body, k) {
		case "type":
			it.Kind = stringOf(body, f)
		case "role":
			it.Role = stringOf(body, f)
		case "call_id":
			it.CallID = stringOf(body, f)
		case "name":
			it.Name = stringOf(body, f)
		case "arguments", "input":
			it.Args = f
		case "content", "output":
			it.Content = f
		}
		return ve
	})
	if it.Kind == KindShellCall && it.Name == "" {
		it.Name = "local_shell"
	}
	return it
}

// stringOf is gjson's Result.String of the value at s, a copy: a string
// decoded, null "", anything else as gjson renders it.
func stringOf(body []byte, s Span) string {
	if v, ok := wire.StringValue(body, s); ok {
		return v
	}
	return gjson.ParseBytes(s.Of(body)).String()
}

// spanOf is where v's raw bytes sit in the body (gjson's Index is the
// offset of Raw in the parsed bytes).
func spanOf(v gjson.Result) Span {
	if !v.Exists() {
		return Span{}
	}
	return Span{Start: v.Index, End: v.Index + len(v.Raw)}
}
