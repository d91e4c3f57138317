package responses

import (
	"strings"

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
	// KindCompaction is the provider's compaction of everything before it
	// (encrypted_content); codex also sends it as KindCompactionSummary.
	KindCompaction        = "compaction"
	KindCompactionSummary = "compaction_summary"
	// KindCompactionTrigger asks the provider to compact the request's
	// input and answer with one compaction item (codex's remote compaction).
	KindCompactionTrigger = "compaction_trigger"
	// An MCP approval request and its response pair by the request's id
	// (approval_request_id), not by call_id.
	KindApprovalRequest  = "mcp_approval_request"
	KindApprovalResponse = "mcp_approval_response"
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

// IsCall reports whether the item waits for an output item that answers
// it: any item with a call_id that is not itself an output (function,
// custom, local shell, shell, apply_patch, computer, tool search calls and
// whatever kinds come next), and an MCP approval request. A call the
// provider ran itself (web_search_call, mcp_call, …) carries no call_id and
// waits for nothing.
func (it Item) IsCall() bool {
	return it.CallID != "" && !it.IsOutput()
}

// IsOutput reports whether the item answers a call (CallID names it): any
// *_output item with a call_id, local_shell_call_output (by its id), and an
// MCP approval response.
func (it Item) IsOutput() bool {
	switch it.Kind {
	case KindApprovalResponse, KindShellOut:
		return it.CallID != ""
	case KindApprovalRequest:
		return false
	}
	return it.CallID != "" && strings.HasSuffix(it.Kind, "_output")
}

// IsCompaction reports whether the item is the provider's compaction of
// the context before it.
func (it Item) IsCompaction() bool {
	return it.Kind == KindCompaction || it.Kind == KindCompactionSummary
}

// editableOutput reports whether an output kind's "output" is a string or
// an array of input_text/input_image parts, which squash, dedup and prune
// may replace by text. The others (a shell_call_output's list of stdout
// and stderr, a computer call's screenshot, …) are counted and sent as
// they are.
func editableOutput(kind string) bool {
	switch kind {
	case KindCallOutput, KindCustomOut, KindShellOut, "apply_patch_call_output":
		return true
	}
	return false
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
	// ContextManagement is the top-level "context_management": the
	// provider compacts on its own past a threshold.
	ContextManagement Span
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
	contextManagement                         Span
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
			promptCacheKeySpan: req.PromptCacheKeySpan, instructions: req.Instructions, tools: req.Tools,
			contextManagement: req.ContextManagement, array: vs}
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
	case "context_management":
		req.ContextManagement = v
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
	// Kept as spans: only the kinds that pair by them decode them.
	var id, approvalRequestID, output Span
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
		case "id":
			id = f
		case "approval_request_id":
			approvalRequestID = f
		case "name":
			it.Name = stringOf(body, f)
		case "arguments", "input":
			it.Args = f
		case "content":
			it.Content = f
		case "output":
			output = f
		}
		return ve
	})
	it.settle(body, id, approvalRequestID, output)
	return it
}

// settle completes an item read member by member: the id a call or an
// output is paired by (CallID), the output's Content when squash may edit
// it, and a call's tool name when the kind implies it.
func (it *Item) settle(body []byte, id, approvalRequestID, output Span) {
	switch it.Kind {
	case KindApprovalRequest:
		it.CallID = stringOf(body, id)
	case KindApprovalResponse:
		it.CallID = stringOf(body, approvalRequestID)
	case KindShellOut:
		if it.CallID == "" {
			it.CallID = stringOf(body, id) // the SDK names the call by id here
		}
	}
	if editableOutput(it.Kind) {
		it.Content = output
	} else if it.IsOutput() {
		it.Content = Span{} // counted whole, never edited
	}
	if it.Name == "" && strings.HasSuffix(it.Kind, "_call") {
		it.Name = strings.TrimSuffix(it.Kind, "_call") // local_shell, shell, apply_patch, computer
	}
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
