// Package responsestest checks an OpenAI Responses API request body the way
// api.openai.com does, for tests: a body OpenAI refuses is refused here with
// the status and error body OpenAI sends, so a test whose proxy breaks a
// conversation fails as the user's would.
//
// Check enforces what needs only the body (item shapes, call and output
// pairing, reasoning followed by its item, duplicate ids, items referenced
// under store:false). With a Ledger of what the upstream issued it also
// verifies encrypted reasoning and compaction content, the item each
// reasoning item preceded, and previous_response_id. With the client's own
// body it checks that the proxy changed nothing it must never change
// (store, previous_response_id, item ids). Unknown item types and fields
// pass.
//
// The messages are OpenAI's own, as users reported them:
//   - "No tool call found for function call output with call_id …" and
//     "Duplicate item found with id …": continuedev/continue#10092, #10723;
//   - "Item 'rs_…' of type 'reasoning' was provided without its required
//     following item.": continuedev/continue#8933;
//   - "Item 'fc_…' of type 'function_call' was provided without its required
//     'reasoning' item: 'rs_…'.": continuedev/continue#10018;
//   - "The encrypted content for item rs_… could not be verified. Reason:
//     Encrypted content could not be decrypted or parsed.", code
//     invalid_encrypted_content, param null: openai/codex#8145,
//     smallmain/vscode-unify-chat-provider#178;
//   - "Previous response with id '…' not found.", code
//     previous_response_not_found: maximhq/bifrost#2441;
//   - 404 "Item with id '…' not found. Items are not persisted when `store`
//     is set to false. …": can1357/oh-my-pi#41;
//   - "No tool output found for function call …": tjardoo/openai-client#124.
//
// One rule is ctxpress's, not OpenAI's: a ctxpress summary call (its last
// input item a user message whose text is compactor.IsSummaryPrompt)
// carrying context_management, previous_response_id, conversation or a
// compaction_trigger item is refused, as the invalid_request_error of the
// member: the API would compact it instead of answering (a compaction
// item, no summary), which a test would otherwise not see.
//
// The missing-field and wrong-type messages follow OpenAI's general forms
// ("Missing required parameter: 'x'.", "Invalid type for 'x': …").
package responsestest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/tidwall/gjson"
)

// Error is a refusal: the status and the error object OpenAI answers with.
type Error struct {
	Status  int
	Type    string
	Param   string // "" is sent as null
	Code    string // "" is sent as null
	Message string
}

func (e *Error) Error() string { return e.Message }

// Body is the error as OpenAI sends it: {"error":{message,type,param,code}}.
func (e *Error) Body() []byte {
	obj := map[string]any{"message": e.Message, "type": e.Type, "param": nil, "code": nil}
	if e.Param != "" {
		obj["param"] = e.Param
	}
	if e.Code != "" {
		obj["code"] = e.Code
	}
	b, _ := json.Marshal(map[string]any{"error": obj})
	return b
}

func invalid(param, code, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Code: code,
		Message: fmt.Sprintf(format, args...)}
}

// Request is what Check read from a body it accepted.
type Request struct {
	Model              string
	Stream             bool
	Store              bool // OpenAI's default is true; only "store": false turns it off
	PreviousResponseID string
	Items              []Item // input; a string input is one user message item
	Tools              []Tool
}

// Compaction is the index of the latest compaction item of r's input, -1
// when none: the model reads the input from there on.
func (r *Request) Compaction() int {
	for i := len(r.Items) - 1; i >= 0; i-- {
		if t := r.Items[i].Type; t == "compaction" || t == "compaction_summary" {
			return i
		}
	}
	return -1
}

// Trigger reports whether r asks the provider to compact its input.
func (r *Request) Trigger() bool {
	return len(r.Items) > 0 && r.Items[len(r.Items)-1].Type == "compaction_trigger"
}

// Item is one input item.
type Item struct {
	Type   string // "message" for an item with a role and no type
	Role   string
	ID     string
	CallID string
	Raw    string // the item's bytes as sent
}

// Text is a message item's text: its string content, or its text parts
// joined.
func (it Item) Text() string {
	c := gjson.Get(it.Raw, "content")
	if c.Type == gjson.String {
		return c.String()
	}
	var b strings.Builder
	for _, p := range c.Array() {
		b.WriteString(p.Get("text").String())
	}
	return b.String()
}

// Tool is one entry of tools: a function, custom or hosted tool, or a
// namespace of them (codex 0.171 sends all four).
type Tool struct {
	Type, Name, Raw string
}

// Options are what Check needs beyond the body for its stricter checks.
type Options struct {
	// Ledger is what the upstream issued; nil skips the checks that need it.
	Ledger *Ledger
	// Client is the body the client sent, when the checked body is what a
	// proxy forwarded; nil skips the checks that compare with it.
	Client []byte
	// LateOutputs accepts a tool output after the next message. OpenAI
	// pairs calls and outputs by call_id wherever they are
	// (deepseek-ai/awesome-deepseek-integration#740); by default this
	// validator also wants every output before the next message, as every
	// client sends it, so a proxy that moves one is caught.
	LateOutputs bool
}

// Check reads and validates a Responses request body.
func Check(body []byte, o Options) (*Request, *Error) {
	if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
		return nil, invalid("", "", "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)")
	}
	top := gjson.ParseBytes(body)
	r := &Request{Store: true}
	if err := readTop(top, r); err != nil {
		return nil, err
	}
	items, err := readItems(top.Get("input"))
	if err != nil {
		return nil, err
	}
	r.Items = items
	checks := []func() *Error{
		func() *Error { return checkPlainSummary(top, items) },
		func() *Error { return checkShapes(items) },
		func() *Error { return checkDuplicates(items) },
		func() *Error { return checkPairing(items, o.LateOutputs) },
		func() *Error { return checkTrigger(items) },
		func() *Error { return checkReasoningFollowed(items) },
		func() *Error { return checkPersisted(items, r.Store, o.Ledger) },
		func() *Error { return o.Ledger.verify(items, r.PreviousResponseID) },
		func() *Error { return checkUnchanged(o.Client, body, items) },
	}
	for _, c := range checks {
		if err := c(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// checkPlainSummary refuses a ctxpress summary call that asks the
// provider to compact or to continue a history it keeps.
func checkPlainSummary(top gjson.Result, items []Item) *Error {
	if len(items) == 0 || items[len(items)-1].Role != "user" || !compactor.IsSummaryPrompt(lastText(items[len(items)-1])) {
		return nil
	}
	for _, k := range []string{"context_management", "previous_response_id", "conversation"} {
		if top.Get(k).Exists() {
			return invalid(k, "", "A ctxpress summary call must not carry '%s': it would be compacted instead of answered.", k)
		}
	}
	for i, it := range items {
		if it.Type == "compaction_trigger" {
			return invalid(fmt.Sprintf("input[%d]", i), "", "A ctxpress summary call must not carry a compaction_trigger item: it would be compacted instead of answered.")
		}
	}
	return nil
}

// lastText is a message item's last text: its string content, or its last
// text part (where a summary instruction joins the user's own).
func lastText(it Item) string {
	c := gjson.Get(it.Raw, "content")
	if c.Type == gjson.String {
		return c.Str
	}
	text := ""
	for _, p := range c.Array() {
		if t := p.Get("text"); t.Type == gjson.String {
			text = t.Str
		}
	}
	return text
}

func readTop(top gjson.Result, r *Request) *Error {
	m := top.Get("model")
	if !m.Exists() || m.Type == gjson.Null {
		return invalid("model", "missing_required_parameter", "Missing required parameter: 'model'.")
	}
	if m.Type != gjson.String {
		return invalid("model", "invalid_type", "Invalid type for 'model': expected a string, but got %s instead.", typeName(m))
	}
	r.Model = m.String()
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"stream", &r.Stream}, {"store", &r.Store}} {
		v := top.Get(b.name)
		switch {
		case !v.Exists() || v.Type == gjson.Null:
		case v.IsBool():
			*b.dst = v.Bool()
		default:
			return invalid(b.name, "invalid_type", "Invalid type for '%s': expected a boolean, but got %s instead.", b.name, typeName(v))
		}
	}
	if p := top.Get("previous_response_id"); p.Exists() && p.Type != gjson.Null {
		if p.Type != gjson.String {
			return invalid("previous_response_id", "invalid_type", "Invalid type for 'previous_response_id': expected a string, but got %s instead.", typeName(p))
		}
		r.PreviousResponseID = p.String()
	}
	tools := top.Get("tools")
	if tools.Exists() && tools.Type != gjson.Null && !tools.IsArray() {
		return invalid("tools", "invalid_type", "Invalid type for 'tools': expected an array of tools, but got %s instead.", typeName(tools))
	}
	for _, t := range tools.Array() {
		r.Tools = append(r.Tools, Tool{Type: t.Get("type").String(), Name: t.Get("name").String(), Raw: t.Raw})
	}
	return nil
}

// readItems reads input: absent (a previous_response_id continuation), a
// string (one user message), or an array of items.
func readItems(in gjson.Result) ([]Item, *Error) {
	switch {
	case !in.Exists() || in.Type == gjson.Null:
		return nil, nil
	case in.Type == gjson.String:
		raw, _ := json.Marshal(map[string]string{"role": "user", "content": in.String()})
		return []Item{{Type: "message", Role: "user", Raw: string(raw)}}, nil
	case !in.IsArray():
		return nil, invalid("input", "invalid_type", "Invalid type for 'input': expected one of a string or array of input items, but got %s instead.", typeName(in))
	}
	var items []Item
	for i, v := range in.Array() {
		if !v.IsObject() {
			return nil, invalid(fmt.Sprintf("input[%d]", i), "invalid_type", "Invalid type for 'input[%d]': expected an input item object, but got %s instead.", i, typeName(v))
		}
		it := Item{Type: v.Get("type").String(), Role: v.Get("role").String(), ID: v.Get("id").String(),
			CallID: v.Get("call_id").String(), Raw: v.Raw}
		if it.Type == "" && v.Get("role").Exists() {
			it.Type = "message" // an "easy" input message: {role, content}
		}
		switch {
		case it.Type == "local_shell_call_output" && it.CallID == "":
			it.CallID = it.ID // the API names the call by id here
		case it.Type == "mcp_approval_request":
			it.CallID = it.ID
		case it.Type == "mcp_approval_response":
			it.CallID = v.Get("approval_request_id").String()
		}
		items = append(items, it)
	}
	return items, nil
}

func typeName(v gjson.Result) string {
	switch {
	case v.Type == gjson.String:
		return "a string"
	case v.Type == gjson.Number:
		return "a number"
	case v.IsBool():
		return "a boolean"
	case v.IsArray():
		return "an array"
	case v.IsObject():
		return "an object"
	}
	return "null"
}
