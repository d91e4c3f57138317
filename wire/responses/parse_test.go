package responses

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "internal", "responsestest", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseCodexRequestSpansEveryItem(t *testing.T) {
	body := fixture(t, "codex171-exec-loop.json")
	req, ok := Parse(body)
	if !ok {
		t.Fatal("not parsed")
	}
	if req.Model != "m" || !req.Stream || !req.Stored || req.Store || req.PromptCacheKey == "" || req.PreviousResponseID != "" {
		t.Fatalf("request: %+v", req)
	}
	items := gjson.GetBytes(body, "input").Array()
	if len(req.Items) != len(items) {
		t.Fatalf("%d items, want %d", len(req.Items), len(items))
	}
	kinds := map[string]int{}
	for i, it := range req.Items {
		if got := string(body[it.Span.Start:it.Span.End]); got != items[i].Raw {
			t.Fatalf("item %d: span %q, want %q", i, got, items[i].Raw)
		}
		kinds[it.Kind]++
		switch it.Kind {
		case KindCall:
			if it.CallID == "" || it.Name != "exec_command" || !gjson.Valid(string(body[it.Args.Start:it.Args.End])) {
				t.Errorf("call %d: %+v", i, it)
			}
		case KindCallOutput:
			out := gjson.Parse(string(body[it.Content.Start:it.Content.End])).String()
			if it.CallID == "" || !strings.HasPrefix(out, "Chunk ID: ") {
				t.Errorf("output %d: %+v %q", i, it, out)
			}
		}
	}
	if kinds[KindMessage] != 4 || kinds[KindReasoning] != 5 || kinds[KindCall] != 5 || kinds[KindCallOutput] != 5 {
		t.Errorf("kinds %v", kinds)
	}
}

func TestParseKinds(t *testing.T) {
	body := []byte(`{"model":"gpt-5","input":[{"role":"user","content":"hi"},` +
		`{"type":"custom_tool_call","call_id":"c1","name":"apply_patch","input":"*** Begin Patch"},` +
		`{"type":"custom_tool_call_output","call_id":"c1","output":[{"type":"input_text","text":"ok"}]},` +
		`{"type":"local_shell_call","call_id":"c2","action":{"type":"exec","command":["ls"]}},` +
		`{"type":"future_item","x":1}, 7],"previous_response_id":"resp_1","instructions":"be brief"}`)
	req, ok := Parse(body)
	if !ok || req.PreviousResponseID != "resp_1" || !req.Instructions.Exists() || req.Stored {
		t.Fatalf("%+v", req)
	}
	want := []struct{ kind, role, name string }{
		{KindMessage, "user", ""}, {KindCustomCall, "", "apply_patch"}, {KindCustomOut, "", ""},
		{KindShellCall, "", "local_shell"}, {"future_item", "", ""}, {"", "", ""},
	}
	for i, w := range want {
		it := req.Items[i]
		if it.Kind != w.kind || it.Role != w.role || it.Name != w.name {
			t.Errorf("item %d: %+v, want %+v", i, it, w)
		}
	}
	if !req.Items[1].IsCall() || !req.Items[2].IsOutput() || string(body[req.Items[1].Args.Start:req.Items[1].Args.End]) != `"*** Begin Patch"` {
		t.Errorf("custom call: %+v", req.Items[1])
	}
	if text, _ := Parse([]byte(`{"model":"m","input":"hello"}`)); !text.InputIsText || len(text.Items) != 0 {
		t.Errorf("text input: %+v", text)
	}
	for _, bad := range []string{`[1,2]`, `not json`, `"s"`} {
		if _, ok := Parse([]byte(bad)); ok {
			t.Errorf("Parse(%s) ok", bad)
		}
	}
}
