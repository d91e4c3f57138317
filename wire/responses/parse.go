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
}

// Parse reads a Responses request body. ok is false when body is not a
// JSON object: the shell then forwards it unchanged.
func Parse(body []byte) (req *Request, ok bool) {
	if !jsonvalid.Valid(body) {
		return nil, false
	}
	return parseValid(body)
}

// parseValid is Parse of a body already known to be valid JSON.
func parseValid(body []byte) (req *Request, ok bool) {
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return nil, false
	}
	req = &Request{Body: body}
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "model":
			req.Model = v.String()
		case "stream":
			req.Stream = v.Type == gjson.True
		case "store":
			req.Stored, req.Store = true, v.Type == gjson.True
		case "previous_response_id":
			req.PreviousResponseID = v.String()
		case "conversation":
			req.Conversation = v.Exists() && v.Type != gjson.Null
		case "prompt_cache_key":
			req.PromptCacheKey, req.PromptCacheKeySpan = v.String(), spanOf(v)
		case "instructions":
			req.Instructions = spanOf(v)
		case "tools":
			req.Tools = spanOf(v)
		case "input":
			req.Input = spanOf(v)
			req.InputIsText = v.Type == gjson.String
			if v.IsArray() {
				v.ForEach(func(_, it gjson.Result) bool {
					req.Items = append(req.Items, readItem(it))
					return true
				})
			}
		}
		return true
	})
	return req, true
}

// readItem reads one input element.
func readItem(v gjson.Result) Item {
	it := Item{Span: spanOf(v)}
	if !v.IsObject() {
		return it
	}
	it.Kind = KindMessage
	v.ForEach(func(k, f gjson.Result) bool {
		switch k.Str {
		case "type":
			it.Kind = f.String()
		case "role":
			it.Role = f.String()
		case "call_id":
			it.CallID = f.String()
		case "name":
			it.Name = f.String()
		case "arguments", "input":
			it.Args = spanOf(f)
		case "content", "output":
			it.Content = spanOf(f)
		}
		return true
	})
	if it.Kind == KindShellCall && it.Name == "" {
		it.Name = "local_shell"
	}
	return it
}

// spanOf is where v's raw bytes sit in the body (gjson's Index is the
// offset of Raw in the parsed bytes).
func spanOf(v gjson.Result) Span {
	if !v.Exists() {
		return Span{}
	}
	return Span{Start: v.Index, End: v.Index + len(v.Raw)}
}
