package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestDetectKindTellsAFileByItsContent(t *testing.T) {
	for _, tc := range []struct {
		rule string
		data string
		want Kind
	}{
		{"a codex rollout line: a type codex writes, with a payload",
			`{"timestamp":"t","type":"session_meta","payload":{"id":"s"}}`, KindCodex},
		{"a codex rollout starting with an event", "\n" + `{"timestamp":"t","type":"event_msg","payload":{"type":"task_started"}}`, KindCodex},
		{"a Claude Code line names its session",
			`{"type":"queue-operation","operation":"enqueue","sessionId":"s"}`, KindClaudeCode},
		{"a Claude Code transcript of summaries only",
			`{"type":"summary","summary":"Fix the build","leafUuid":"u"}`, KindClaudeCode},
		{"request bodies, one a line", `{"model":"m","messages":[]}` + "\n" + `{"model":"m","messages":[]}`, KindBodies},
		{"one body over several lines", "{\n  \"model\": \"m\",\n  \"input\": \"hi\"\n}\n", KindBodies},
		{"a Claude Code sub-agent's meta file: nothing", `{"agentType":"Explore","toolUseId":"t"}`, KindUnknown},
		{"a type without a payload is no codex line", `{"type":"response_item"}`, KindUnknown},
		{"not JSON", "hello\nworld", KindUnknown},
		{"empty", "", KindUnknown},
	} {
		if got := detectKind([]byte(tc.data)); got != tc.want {
			t.Errorf("%s: %q", tc.rule, got)
		}
	}
}

func TestNormaliseMessagesAsClaudeCodeSendsThem(t *testing.T) {
	use := func(id string) string { return `{"type":"tool_use","id":"` + id + `","name":"Bash","input":{}}` }
	result := func(id string) string { return `{"type":"tool_result","tool_use_id":"` + id + `","content":"ok"}` }
	missing := func(id string) string {
		return `{"type":"tool_result","content":"[Tool result missing due to internal error]","is_error":true,"tool_use_id":"` + id + `"}`
	}
	text := textBlock
	for _, tc := range []struct {
		rule      string
		in        []claudeMessage
		elsewhere map[string]string
		want      []claudeMessage
	}{
		{"consecutive user messages are one, its tool results first",
			[]claudeMessage{{"user", []string{text("go")}}, {"assistant", []string{use("a")}}, {"user", []string{text("note")}}, {"user", []string{result("a")}}},
			nil,
			[]claudeMessage{{"user", []string{text("go")}}, {"assistant", []string{use("a")}}, {"user", []string{result("a"), text("note")}}}},
		{"a call whose result is nowhere gets Claude Code's stand-in",
			[]claudeMessage{{"user", []string{text("go")}}, {"assistant", []string{use("a"), use("b")}}, {"user", []string{result("b")}}},
			nil,
			[]claudeMessage{{"user", []string{text("go")}}, {"assistant", []string{use("a"), use("b")}}, {"user", []string{missing("a"), result("b")}}}},
		{"a result on another branch of the transcript answers its call",
			[]claudeMessage{{"user", []string{text("go")}}, {"assistant", []string{use("a"), use("b")}}, {"user", []string{result("a")}}},
			map[string]string{"b": result("b")},
			[]claudeMessage{{"user", []string{text("go")}}, {"assistant", []string{use("a"), use("b")}}, {"user", []string{result("a"), result("b")}}}},
		{"a result that answers no call goes, and an emptied message with it",
			[]claudeMessage{{"user", []string{text("go")}}, {"assistant", []string{text("hi")}}, {"user", []string{result("z")}}, {"assistant", []string{text("more")}}},
			nil,
			[]claudeMessage{{"user", []string{text("go")}}, {"assistant", []string{text("hi"), text("more")}}}},
		{"the last answer's calls are answered too",
			[]claudeMessage{{"user", []string{text("go")}}, {"assistant", []string{use("a")}}},
			nil,
			[]claudeMessage{{"user", []string{text("go")}}, {"assistant", []string{use("a")}}, {"user", []string{missing("a")}}}},
		{"a conversation starts with the user",
			[]claudeMessage{{"assistant", []string{text("hello")}}, {"user", nil}, {"user", []string{text("go")}}},
			nil,
			[]claudeMessage{{"user", []string{text("go")}}}},
	} {
		got := normaliseMessages(tc.in, tc.elsewhere)
		if rawMessages(got) != rawMessages(tc.want) {
			t.Errorf("%s:\n got %s\nwant %s", tc.rule, rawMessages(got), rawMessages(tc.want))
		}
	}
}

func rawMessages(msgs []claudeMessage) string {
	var parts []string
	for _, m := range msgs {
		parts = append(parts, m.raw())
	}
	return strings.Join(parts, " ")
}

func TestPairCodexCallsAsCodexSendsThem(t *testing.T) {
	item := func(raw string) codexItem {
		r := gjson.Parse(raw)
		return codexItem{raw: raw, typ: r.Get("type").String(), role: r.Get("role").String(), callID: r.Get("call_id").String(), sampled: -1}
	}
	user := `{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}`
	call := func(typ, id string) string {
		return `{"type":"` + typ + `","name":"f","arguments":"{}","call_id":"` + id + `"}`
	}
	output := func(typ, id string) string { return `{"type":"` + typ + `","call_id":"` + id + `","output":"ok"}` }
	aborted := func(typ, id string) string { return `{"type":"` + typ + `","call_id":"` + id + `","output":"aborted"}` }
	for _, tc := range []struct {
		rule string
		in   []string
		want []string
	}{
		{"answered calls stay as they are", []string{user, call("function_call", "a"), output("function_call_output", "a")},
			[]string{user, call("function_call", "a"), output("function_call_output", "a")}},
		{"a call left unanswered by an interrupted turn is answered \"aborted\" before the next user message",
			[]string{user, call("function_call", "a"), user},
			[]string{user, call("function_call", "a"), aborted("function_call_output", "a"), user}},
		{"a custom tool call's answer is of its kind", []string{user, call("custom_tool_call", "c")},
			[]string{user, call("custom_tool_call", "c"), aborted("custom_tool_call_output", "c")}},
		{"an output that answers no call goes", []string{user, output("function_call_output", "z"), user},
			[]string{user, user}},
	} {
		var in []codexItem
		for _, raw := range tc.in {
			in = append(in, item(raw))
		}
		var got []string
		for _, it := range pairCodexCalls(in) {
			got = append(got, it.raw)
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s:\n got %s\nwant %s", tc.rule, strings.Join(got, "\n     "), strings.Join(tc.want, "\n     "))
		}
	}
}

// Codex's own compaction calls are replayed as codex sent them (no tools,
// its prompt last), and the calls after one send the history codex kept.
func TestCodexCompactionCallsAndTheHistoryAfterThem(t *testing.T) {
	path := filepath.Join(fixtureHome, fixtures[5].path)
	sessions, err := ReadFile(path, "rollout", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := sessions[0]
	var compactions []int
	for k, body := range s.Requests {
		input := gjson.GetBytes(body, "input").Array()
		last := input[len(input)-1].Get("content.0.text").String()
		if strings.HasPrefix(last, "You are performing a CONTEXT CHECKPOINT COMPACTION") {
			compactions = append(compactions, k)
			if tools := gjson.GetBytes(body, "tools"); !tools.IsArray() || len(tools.Array()) != 0 {
				t.Errorf("compaction call %d offers tools: %.100s", k+1, tools.Raw)
			}
			next := gjson.GetBytes(s.Requests[k+1], "input").Array()
			if len(next) >= len(input) || !strings.HasPrefix(next[len(next)-1].Get("content.0.text").String(), "Another language model started") {
				t.Errorf("the call after compaction %d sends %d items ending %.80s: want the shorter history codex kept, its summary last",
					k+1, len(next), next[len(next)-1].Raw)
			}
		}
	}
	if len(compactions) != 3 || !strings.Contains(s.Approximated, "compaction calls") {
		t.Errorf("compaction calls at %v (want 3), approximated %q", compactions, s.Approximated)
	}
}

// A Claude Code transcript as versions before 2.1 write one for a
// sub-agent (its lines in the main file, isSidechain): the sidechain is a
// session of its own, and the main conversation does not hold its lines.
func TestClaudeCodeSidechainsAreSessionsOfTheirOwn(t *testing.T) {
	lines := []string{
		`{"type":"user","uuid":"u1","parentUuid":null,"isSidechain":false,"sessionId":"s","message":{"role":"user","content":"Find the parser"}}`,
		`{"type":"assistant","uuid":"a1","parentUuid":"u1","isSidechain":false,"sessionId":"s","message":{"id":"m1","model":"claude-sonnet-4-5","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Task","input":{"prompt":"look"}}]}}`,
		`{"type":"user","uuid":"s1","parentUuid":null,"isSidechain":true,"sessionId":"s","message":{"role":"user","content":"look"}}`,
		`{"type":"assistant","uuid":"s2","parentUuid":"s1","isSidechain":true,"sessionId":"s","message":{"id":"m2","model":"claude-haiku-4-5","role":"assistant","content":[{"type":"text","text":"It is in a.py"}]}}`,
		`{"type":"user","uuid":"u2","parentUuid":"a1","isSidechain":false,"sessionId":"s","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"It is in a.py"}]}}`,
		`{"type":"assistant","uuid":"a2","parentUuid":"u2","isSidechain":false,"sessionId":"s","message":{"id":"m3","model":"claude-sonnet-4-5","role":"assistant","content":[{"type":"text","text":"a.py"}]}}`,
		`{"type":"assistant","uuid":"a3","parentUuid":"a2","isSidechain":false,"sessionId":"s","message":{"id":"m4","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"API Error"}]}}`,
		`{"type":"summary","summary":"Find the parser","leafUuid":"a2"}`,
	}
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sessions, err := ReadFile(path, "s.jsonl", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != 2 {
		t.Fatalf("%d sessions, want the main one and the sidechain", len(sessions))
	}
	main, side := sessions[0], sessions[1]
	if main.Name != "s.jsonl" || len(main.Requests) != 2 || main.Model != "claude-sonnet-4-5" {
		t.Errorf("main: %s, %d requests, %s; want 2 (the synthetic answer is no model call)", main.Name, len(main.Requests), main.Model)
	}
	if !strings.HasPrefix(side.Name, "s.jsonl#sidechain-") || len(side.Requests) != 1 || side.Model != "claude-haiku-4-5" {
		t.Errorf("sidechain: %s, %d requests, %s", side.Name, len(side.Requests), side.Model)
	}
	if first := gjson.GetBytes(main.Requests[0], "messages").Array(); len(first) != 1 || first[0].Get("content.0.text").String() != "Find the parser" {
		t.Errorf("the first call's messages: %s", gjson.GetBytes(main.Requests[0], "messages").Raw)
	}
	last := gjson.GetBytes(main.Requests[1], "messages").Array()
	if len(last) != 3 || last[2].Get("content.0.tool_use_id").String() != "t1" {
		t.Errorf("the second call's messages: %s", gjson.GetBytes(main.Requests[1], "messages").Raw)
	}
}
