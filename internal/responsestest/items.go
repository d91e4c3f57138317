package responsestest

import (
	"fmt"
	"net/http"

	"github.com/tidwall/gjson"
)

// kind is what the API requires of an item type.
type kind struct {
	call     bool     // the model asks the client to run something: needs an output
	optional bool     // a call whose answer may never come (an approval the user left open)
	output   bool     // the client's answer to a call: needs the call before it
	required []string // fields that must be present
	words    string   // how OpenAI's messages name it
}

// kinds are the item types the checks know; other types pass through.
var kinds = map[string]kind{
	"message":                 {required: []string{"role", "content"}},
	"reasoning":               {required: []string{"summary"}},
	"item_reference":          {required: []string{"id"}},
	"function_call":           {call: true, required: []string{"call_id", "name", "arguments"}, words: "function call"},
	"function_call_output":    {output: true, required: []string{"call_id", "output"}, words: "function call output"},
	"custom_tool_call":        {call: true, required: []string{"call_id", "name", "input"}, words: "custom tool call"},
	"custom_tool_call_output": {output: true, required: []string{"call_id", "output"}, words: "custom tool call output"},
	"local_shell_call":        {call: true, required: []string{"call_id", "action"}, words: "local shell call"},
	"local_shell_call_output": {output: true, required: []string{"output"}, words: "local shell call output"},
	"computer_call":           {call: true, required: []string{"call_id", "action"}, words: "computer call"},
	"computer_call_output":    {output: true, required: []string{"call_id", "output"}, words: "computer call output"},
	"shell_call":              {call: true, required: []string{"call_id", "action"}, words: "shell call"},
	"shell_call_output":       {output: true, required: []string{"call_id", "output"}, words: "shell call output"},
	"apply_patch_call":        {call: true, required: []string{"call_id", "operation"}, words: "apply patch call"},
	"apply_patch_call_output": {output: true, required: []string{"call_id", "status"}, words: "apply patch call output"},
	// An approval request and its response pair by the request's id.
	"mcp_approval_request":  {call: true, optional: true, required: []string{"id", "name", "arguments", "server_label"}, words: "mcp approval request"},
	"mcp_approval_response": {output: true, required: []string{"approval_request_id", "approve"}, words: "mcp approval response"},
	// The provider's compaction of everything before it, and the client's
	// request for one.
	"compaction":         {required: []string{"encrypted_content"}},
	"compaction_summary": {required: []string{"encrypted_content"}},
	"compaction_trigger": {},
}

// Content part types per message role.
var (
	inputParts     = map[string]bool{"input_text": true, "input_image": true, "input_file": true, "input_audio": true}
	assistantParts = map[string]bool{"output_text": true, "refusal": true}
	outputParts    = map[string]bool{"input_text": true, "input_image": true, "input_file": true}
	roles          = map[string]bool{"user": true, "assistant": true, "system": true, "developer": true}
)

// checkShapes checks each known item's required fields and types.
func checkShapes(items []Item) *Error {
	for i, it := range items {
		k, known := kinds[it.Type]
		if !known {
			continue
		}
		v := gjson.Parse(it.Raw)
		for _, f := range k.required {
			if !v.Get(f).Exists() {
				p := fmt.Sprintf("input[%d].%s", i, f)
				return invalid(p, "missing_required_parameter", "Missing required parameter: '%s'.", p)
			}
		}
		var err *Error
		switch {
		case it.Type == "message":
			err = checkMessage(i, v)
		case it.Type == "reasoning":
			err = checkReasoning(i, v)
		case k.call:
			err = checkCall(i, it, v)
		case k.output:
			err = checkOutput(i, it, v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func checkMessage(i int, v gjson.Result) *Error {
	role := v.Get("role").String()
	if !roles[role] {
		return invalid(fmt.Sprintf("input[%d].role", i), "invalid_value",
			"Invalid value: '%s'. Supported values are: 'assistant', 'system', 'developer', and 'user'.", role)
	}
	c := v.Get("content")
	if c.Type == gjson.String {
		return nil
	}
	p := fmt.Sprintf("input[%d].content", i)
	if !c.IsArray() {
		return invalid(p, "invalid_type", "Invalid type for '%s': expected one of a string or array of input content items, but got %s instead.", p, typeName(c))
	}
	allowed, names := inputParts, "'input_text', 'input_image', 'input_file', and 'input_audio'"
	if role == "assistant" {
		allowed, names = assistantParts, "'output_text' and 'refusal'"
	}
	for j, part := range c.Array() {
		if t := part.Get("type").String(); !allowed[t] {
			return invalid(fmt.Sprintf("%s[%d].type", p, j), "invalid_value", "Invalid value: '%s'. Supported values are: %s.", t, names)
		}
	}
	return nil
}

func checkReasoning(i int, v gjson.Result) *Error {
	if s := v.Get("summary"); !s.IsArray() {
		p := fmt.Sprintf("input[%d].summary", i)
		return invalid(p, "invalid_type", "Invalid type for '%s': expected an array of summary parts, but got %s instead.", p, typeName(s))
	}
	if e := v.Get("encrypted_content"); e.Exists() && e.Type != gjson.Null && e.Type != gjson.String {
		p := fmt.Sprintf("input[%d].encrypted_content", i)
		return invalid(p, "invalid_type", "Invalid type for '%s': expected a string, but got %s instead.", p, typeName(e))
	}
	return nil
}

// checkCall wants string call_id, name and arguments (function) or input
// (custom tool).
func checkCall(i int, it Item, v gjson.Result) *Error {
	for _, f := range []string{"call_id", "name", "arguments", "input"} {
		if x := v.Get(f); x.Exists() && x.Type != gjson.String && (f != "input" || it.Type == "custom_tool_call") {
			p := fmt.Sprintf("input[%d].%s", i, f)
			return invalid(p, "invalid_type", "Invalid type for '%s': expected a string, but got %s instead.", p, typeName(x))
		}
	}
	return nil
}

// checkOutput wants an output that is a string or an array of parts;
// local shell output is a string.
func checkOutput(i int, it Item, v gjson.Result) *Error {
	if it.CallID == "" {
		p := fmt.Sprintf("input[%d].call_id", i)
		return invalid(p, "missing_required_parameter", "Missing required parameter: '%s'.", p)
	}
	out := v.Get("output")
	if !out.Exists() || out.Type == gjson.String || it.Type == "computer_call_output" || it.Type == "apply_patch_call_output" || it.Type == "mcp_approval_response" {
		return nil
	}
	p := fmt.Sprintf("input[%d].output", i)
	if it.Type == "shell_call_output" {
		// A list of each command's stdout, stderr and outcome.
		for j, o := range out.Array() {
			if !o.Get("outcome").IsObject() {
				q := fmt.Sprintf("%s[%d].outcome", p, j)
				return invalid(q, "missing_required_parameter", "Missing required parameter: '%s'.", q)
			}
		}
		if out.IsArray() {
			return nil
		}
	}
	if !out.IsArray() || it.Type == "local_shell_call_output" {
		return invalid(p, "invalid_type", "Invalid type for '%s': expected one of a string or array of objects, but got %s instead.", p, typeName(out))
	}
	for j, part := range out.Array() {
		if t := part.Get("type").String(); !outputParts[t] {
			return invalid(fmt.Sprintf("%s[%d].type", p, j), "invalid_value", "Invalid value: '%s'. Supported values are: 'input_text', 'input_image', and 'input_file'.", t)
		}
	}
	return nil
}

// checkDuplicates refuses two items with one id.
func checkDuplicates(items []Item) *Error {
	seen := map[string]bool{}
	for _, it := range items {
		if it.ID == "" || it.Type == "item_reference" || it.Type == "local_shell_call_output" {
			continue
		}
		if seen[it.ID] {
			return invalid("input", "", "Duplicate item found with id %s. Remove duplicate items from your input and try again.", it.ID)
		}
		seen[it.ID] = true
	}
	return nil
}

// checkPairing wants every output after a call with its call_id, and every
// call answered (before the next message unless late outputs are allowed).
func checkPairing(items []Item, late bool) *Error {
	pending := map[string]string{} // call_id → the call's words, not yet answered
	var order []string
	unanswered := func() *Error {
		for _, id := range order {
			if w, ok := pending[id]; ok {
				return invalid("input", "", "No tool output found for %s %s.", w, id)
			}
		}
		return nil
	}
	called := map[string]bool{}
	for _, it := range items {
		k := kinds[it.Type]
		switch {
		case k.call && k.optional:
			called[it.CallID] = true
		case k.call:
			pending[it.CallID], called[it.CallID] = k.words, true
			order = append(order, it.CallID)
		case k.output:
			if !called[it.CallID] {
				return invalid("input", "", "No tool call found for %s with call_id %s.", k.words, it.CallID)
			}
			delete(pending, it.CallID)
		case it.Type == "message" && !late:
			if err := unanswered(); err != nil {
				return err
			}
		}
	}
	return unanswered()
}

// checkTrigger wants at most one compaction_trigger, as the last item: the
// provider compacts everything before it and answers with the compaction
// alone.
func checkTrigger(items []Item) *Error {
	for i, it := range items {
		if it.Type == "compaction_trigger" && i != len(items)-1 {
			return invalid(fmt.Sprintf("input[%d]", i), "invalid_value",
				"Invalid 'input[%d]': an item of type 'compaction_trigger' must be the last input item.", i)
		}
	}
	return nil
}

// followsReasoning is whether an item can be the one a reasoning item was
// produced with: model output, not the client's (a message from another
// role, a tool output) nor another reasoning item.
func followsReasoning(it Item) bool {
	switch {
	case it.Type == "reasoning", kinds[it.Type].output:
		return false
	case it.Type == "message":
		return it.Role == "assistant"
	}
	return true
}

// checkReasoningFollowed wants every reasoning item followed by an item it
// can belong to.
func checkReasoningFollowed(items []Item) *Error {
	for i, it := range items {
		if it.Type != "reasoning" {
			continue
		}
		if i+1 == len(items) || !followsReasoning(items[i+1]) {
			return invalid("input", "", "Item '%s' of type 'reasoning' was provided without its required following item.", it.ID)
		}
	}
	return nil
}

// checkPersisted refuses, under store:false, items that only name a stored
// item: an item_reference, a reasoning item without its encrypted content.
// With store on, the ledger knows what was stored.
func checkPersisted(items []Item, store bool, l *Ledger) *Error {
	for _, it := range items {
		named := it.Type == "item_reference" ||
			it.Type == "reasoning" && gjson.Get(it.Raw, "encrypted_content").String() == ""
		if !named || store && (l == nil || l.stored(it.ID)) {
			continue
		}
		msg := fmt.Sprintf("Item with id '%s' not found.", it.ID)
		if !store {
			msg += " Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input."
		}
		return &Error{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "input", Message: msg}
	}
	return nil
}

// checkUnchanged compares a forwarded body with the client's: store and
// previous_response_id exactly as sent, and no item id the client did not
// send. These are a proxy's rules (DESIGN.md, Per-format rules), not
// OpenAI's messages, so their codes say so.
func checkUnchanged(client, body []byte, items []Item) *Error {
	if client == nil {
		return nil
	}
	for _, f := range []string{"store", "previous_response_id"} {
		if a, b := gjson.GetBytes(client, f).Raw, gjson.GetBytes(body, f).Raw; a != b {
			return invalid(f, "proxy_changed_"+f, "The proxy changed '%s' from %q to %q.", f, a, b)
		}
	}
	sent := map[string]bool{}
	for _, v := range gjson.GetBytes(client, "input").Array() {
		sent[v.Get("id").String()] = true
	}
	for i, it := range items {
		if it.ID != "" && !sent[it.ID] {
			return invalid(fmt.Sprintf("input[%d].id", i), "proxy_invented_item_id", "The proxy sent item id '%s', which the client never sent.", it.ID)
		}
	}
	return nil
}
