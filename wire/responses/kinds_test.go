package responses

import (
	"testing"

	"github.com/ctxpress/ctxpress/wire"
)

// Every call kind the Responses API pairs with an output is a call, and
// its output a result naming it; a call the provider ran itself (no
// call_id) waits for nothing; only text outputs may be edited.
func TestEveryCallKindPairs(t *testing.T) {
	cases := []struct {
		item     string
		kind     wire.Kind
		id, tool string
		editable bool
	}{
		{`{"type":"function_call","call_id":"c1","name":"exec","arguments":"{}"}`, wire.KindToolCall, "c1", "exec", false},
		{`{"type":"function_call_output","call_id":"c1","output":"ok"}`, wire.KindToolResult, "c1", "", true},
		{`{"type":"custom_tool_call","call_id":"c2","name":"apply_patch","input":"x"}`, wire.KindToolCall, "c2", "apply_patch", false},
		{`{"type":"custom_tool_call_output","call_id":"c2","output":[{"type":"input_text","text":"ok"}]}`, wire.KindToolResult, "c2", "", true},
		{`{"type":"local_shell_call","call_id":"c3","action":{"command":["ls"]}}`, wire.KindToolCall, "c3", "local_shell", false},
		{`{"type":"local_shell_call_output","id":"c3","output":"a.go"}`, wire.KindToolResult, "c3", "", true},
		{`{"type":"shell_call","call_id":"c4","action":{"commands":["ls"]}}`, wire.KindToolCall, "c4", "shell", false},
		{`{"type":"shell_call_output","call_id":"c4","output":[{"stdout":"a","stderr":"","outcome":{"type":"exit","exit_code":0}}]}`, wire.KindToolResult, "c4", "", false},
		{`{"type":"apply_patch_call","call_id":"c5","operation":{"type":"delete_file","path":"a"}}`, wire.KindToolCall, "c5", "apply_patch", false},
		{`{"type":"apply_patch_call_output","call_id":"c5","status":"completed","output":"done"}`, wire.KindToolResult, "c5", "", true},
		{`{"type":"computer_call","call_id":"c6","action":{"type":"click"}}`, wire.KindToolCall, "c6", "computer", false},
		{`{"type":"computer_call_output","call_id":"c6","output":{"type":"computer_screenshot","image_url":"u"}}`, wire.KindToolResult, "c6", "", false},
		{`{"type":"mcp_approval_request","id":"a1","name":"deploy","arguments":"{}","server_label":"ops"}`, wire.KindToolCall, "a1", "deploy", false},
		{`{"type":"mcp_approval_response","approval_request_id":"a1","approve":true}`, wire.KindToolResult, "a1", "", false},
		{`{"type":"tool_search_call","call_id":"c7","arguments":{}}`, wire.KindToolCall, "c7", "tool_search", false},
		{`{"type":"tool_search_output","call_id":"c7","tools":[]}`, wire.KindToolResult, "c7", "", false},
		{`{"type":"future_thing_call","call_id":"c8","payload":{}}`, wire.KindToolCall, "c8", "future_thing", false},
		{`{"type":"future_thing_call_output","call_id":"c8","output":{"x":1}}`, wire.KindToolResult, "c8", "", false},
		{`{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search"}}`, wire.KindOpaque, "", "", false},
		{`{"type":"mcp_call","id":"mc_1","name":"n","arguments":"{}","server_label":"s","output":"o"}`, wire.KindOpaque, "", "", false},
		{`{"type":"compaction","encrypted_content":"gAAA"}`, wire.KindOpaque, "", "", false},
		{`{"type":"compaction_trigger"}`, wire.KindOpaque, "", "", false},
	}
	for _, c := range cases {
		body := []byte(`{"model":"m","input":[` + c.item + `]}`)
		conv, ok := Format{}.Parse(body)
		if !ok || len(conv.Items) != 1 {
			t.Fatalf("%s: not parsed", c.item)
		}
		it := conv.Items[0]
		if it.Kind != c.kind || it.CallID != c.id || it.Tool != c.tool || it.Content.Exists() != c.editable {
			t.Errorf("%s: kind %d id %q tool %q content %v", c.item, it.Kind, it.CallID, it.Tool, it.Content.Exists())
		}
	}
}

// The latest compaction item is where the provider's context starts; a
// compaction_trigger asks the provider to compact; both are found in a
// body read whole and in one continued from an earlier parse.
func TestCompactionBoundaryAndTrigger(t *testing.T) {
	const (
		user   = `{"role":"user","content":"a"}`
		cmp    = `{"type":"compaction","encrypted_content":"gAAA"}`
		alias  = `{"type":"compaction_summary","encrypted_content":"gBBB"}`
		rs     = `{"type":"reasoning","summary":[],"encrypted_content":"r"}`
		call   = `{"type":"function_call","call_id":"c","name":"x","arguments":"{}"}`
		output = `{"type":"function_call_output","call_id":"c","output":"o"}`
		trig   = `{"type":"compaction_trigger"}`
	)
	cases := []struct {
		name     string
		items    string
		after    int
		compacts bool
	}{
		{"none", user + "," + call + "," + output, 0, false},
		{"first item", cmp + "," + user, 1, false},
		{"latest of two", user + "," + cmp + "," + user + "," + alias + "," + user, 4, false},
		{"before a reasoning item and its call", user + "," + cmp + "," + rs + "," + call + "," + output, 2, false},
		{"trigger", user + "," + cmp + "," + user + "," + trig, 2, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := []byte(`{"model":"m","input":[` + c.items + `]}`)
			conv, _ := Format{}.Parse(body)
			if conv.AfterCompaction != c.after || conv.ProviderCompacts != c.compacts {
				t.Fatalf("after %d compacts %v", conv.AfterCompaction, conv.ProviderCompacts)
			}
			// The same body continued from a parse of its first message.
			first, _ := Format{}.Parse([]byte(`{"model":"m","input":[` + c.items[:len(user)] + `]}`))
			if c.items[:len(user)] != user {
				return
			}
			resumed, _, taken := Format{}.Resume(body, first, first.Messages[0].End)
			if taken != 1 || resumed.AfterCompaction != c.after || resumed.ProviderCompacts != c.compacts {
				t.Fatalf("resumed (%d taken): after %d compacts %v", taken, resumed.AfterCompaction, resumed.ProviderCompacts)
			}
		})
	}
}
