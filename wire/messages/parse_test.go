package messages

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tidwall/gjson"
)

func TestParseClaudeCodeRequest(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("..", "..", "internal", "messagestest", "testdata", "claude-code-2.1.332-turn6.json"))
	if err != nil {
		t.Fatal(err)
	}
	req, ok := Parse(body)
	if !ok {
		t.Fatal("not parsed")
	}
	if req.Model == "" || !req.Stream || !req.System.Exists() || !req.Tools.Exists() || req.SessionID == "" {
		t.Fatalf("request: model %q stream %v session %q", req.Model, req.Stream, req.SessionID)
	}
	if req.Markers != 3 {
		t.Errorf("markers %d, want Claude Code's 3", req.Markers)
	}
	msgs := gjson.GetBytes(body, "messages").Array()
	if len(req.Messages) != len(msgs) {
		t.Fatalf("%d messages, want %d", len(req.Messages), len(msgs))
	}
	uses, results, thinking := map[string]bool{}, 0, 0
	for i, m := range req.Messages {
		if string(body[m.Span.Start:m.Span.End]) != msgs[i].Raw {
			t.Fatalf("message %d: span does not hold it", i)
		}
		for _, b := range m.Blocks {
			if !b.String && gjson.Parse(string(body[b.Span.Start:b.Span.End])).Get("type").String() != b.Type {
				t.Fatalf("message %d: block span does not hold a %s", i, b.Type)
			}
			switch b.Type {
			case BlockToolUse:
				uses[b.ID] = true
				if b.Name == "" || !b.Input.Exists() {
					t.Errorf("tool_use %+v", b)
				}
			case BlockToolResult:
				results++
				if !uses[b.ID] || !b.Content.Exists() {
					t.Errorf("tool_result %+v without its tool_use", b)
				}
			case BlockThinking:
				thinking++
			}
		}
	}
	if len(uses) == 0 || results != len(uses) || thinking == 0 {
		t.Errorf("tool_use %d, tool_result %d, thinking %d", len(uses), results, thinking)
	}
	if req.Messages[1].Role != "system" {
		t.Errorf("messages[1] role %q, want Claude Code's system message", req.Messages[1].Role)
	}
}

func TestParseShapes(t *testing.T) {
	body := []byte(`{"model":"m","system":"be brief","messages":[{"role":"user","content":"hi"},` +
		`{"role":"assistant","content":[{"type":"redacted_thinking","data":"x"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a.go"}],"is_error":true,"cache_control":{"type":"ephemeral"}},{"type":"image","source":{}}]}],` +
		`"metadata":{"user_id":"plain-user"}}`)
	req, ok := Parse(body)
	if !ok || req.SessionID != "" || req.Markers != 1 || len(req.Messages) != 3 {
		t.Fatalf("%+v", req)
	}
	if b := req.Messages[0].Blocks[0]; !b.String || b.Type != BlockText || string(body[b.Content.Start:b.Content.End]) != `"hi"` {
		t.Errorf("string content: %+v", b)
	}
	if b := req.Messages[2].Blocks[0]; b.Type != BlockToolResult || b.ID != "t1" || !b.IsError || !b.CacheControl {
		t.Errorf("tool_result: %+v", b)
	}
	if b := req.Messages[2].Blocks[1]; b.Type != "image" {
		t.Errorf("opaque block: %+v", b)
	}
	for _, bad := range []string{`[]`, `x`} {
		if _, ok := Parse([]byte(bad)); ok {
			t.Errorf("Parse(%s) ok", bad)
		}
	}
}
