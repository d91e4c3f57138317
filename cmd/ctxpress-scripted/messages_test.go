package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/messagestest"
)

// claudeTools are Claude Code's Bash and Read, as it declares them.
const claudeTools = `[{"name":"Bash","description":"Run a command.","input_schema":{"type":"object","properties":{"command":{"type":"string"},"description":{"type":"string"}},"required":["command"]}},` +
	`{"name":"Read","description":"Read a file.","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}}]`

// claudeConvo builds requests the way Claude Code does: system blocks with
// markers, thinking adaptive with display omitted, the last marker on the
// newest block, the history re-sent as received.
type claudeConvo struct {
	msgs []json.RawMessage
}

func (c *claudeConvo) body(stream bool) []byte {
	msgs := make([]any, len(c.msgs))
	for i, m := range c.msgs {
		var v map[string]any
		_ = json.Unmarshal(m, &v)
		if i == len(c.msgs)-1 { // the marker moves to the newest block
			if blocks, ok := v["content"].([]any); ok {
				last := blocks[len(blocks)-1].(map[string]any)
				last["cache_control"] = map[string]any{"type": "ephemeral"}
			}
		}
		msgs[i] = v
	}
	b, _ := json.Marshal(map[string]any{
		"model": "claude-opus-5-5", "max_tokens": 32000, "stream": stream,
		"system": []any{map[string]any{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332"},
			map[string]any{"type": "text", "text": "You are Claude Code.", "cache_control": map[string]any{"type": "ephemeral"}}},
		"tools": json.RawMessage(claudeTools), "messages": msgs,
		"thinking": map[string]any{"type": "adaptive", "display": "omitted"},
		"metadata": map[string]any{"user_id": `{"session_id":"ses-1"}`},
	})
	return b
}

func postMessages(t *testing.T, url string, body []byte, key string) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("X-Claude-Code-Session-Id", "ses-1")
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// message is an answer read back, whole or from its events.
type message struct {
	Content    []map[string]any `json:"content"`
	StopReason string           `json:"stop_reason"`
	Usage      anthropicUsage   `json:"usage"`
}

// readEvents rebuilds a message from SSE events, checking their order:
// message_start first, every block started, deltas of its own kind, and
// stopped, message_delta then message_stop last.
func readEvents(t *testing.T, b []byte) message {
	t.Helper()
	var m message
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	var name string
	partial := map[int]string{}
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			name = v
			names = append(names, v)
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type    string          `json:"type"`
			Index   int             `json:"index"`
			Message message         `json:"message"`
			Block   map[string]any  `json:"content_block"`
			Delta   map[string]any  `json:"delta"`
			Usage   *anthropicUsage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Type != name {
			t.Fatalf("event %s: %s", name, data)
		}
		switch ev.Type {
		case "message_start":
			m.Usage = ev.Message.Usage
		case "content_block_start":
			if ev.Index != len(m.Content) {
				t.Fatalf("block %d started at %d", ev.Index, len(m.Content))
			}
			m.Content = append(m.Content, ev.Block)
		case "content_block_delta":
			blk := m.Content[ev.Index]
			switch ev.Delta["type"] {
			case "thinking_delta":
				blk["thinking"] = blk["thinking"].(string) + ev.Delta["thinking"].(string)
			case "signature_delta":
				blk["signature"] = ev.Delta["signature"]
			case "text_delta":
				blk["text"] = blk["text"].(string) + ev.Delta["text"].(string)
			case "input_json_delta":
				partial[ev.Index] += ev.Delta["partial_json"].(string)
			}
		case "content_block_stop":
			if s, ok := partial[ev.Index]; ok {
				var in map[string]any
				if err := json.Unmarshal([]byte(s), &in); err != nil {
					t.Fatalf("tool input %q: %v", s, err)
				}
				m.Content[ev.Index]["input"] = in
			}
		case "message_delta":
			m.StopReason = ev.Delta["stop_reason"].(string)
			if ev.Usage.Output == 0 || ev.Usage.Input != m.Usage.Input {
				t.Fatalf("message_delta usage %+v after %+v", ev.Usage, m.Usage)
			}
			m.Usage = *ev.Usage
		}
	}
	if len(names) < 4 || names[0] != "message_start" || names[1] != "ping" || names[len(names)-2] != "message_delta" || names[len(names)-1] != "message_stop" {
		t.Fatalf("events %v", names)
	}
	return m
}

func readMessage(t *testing.T, stream bool, b []byte) message {
	t.Helper()
	if stream {
		return readEvents(t, b)
	}
	var m message
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return m
}

// A Claude Code shaped tool loop, streamed and not: a signed thinking
// block and a tool call per turn, accepted back on every later turn, then
// the text; the moving marker reads back what the previous turn wrote.
func TestMessagesToolLoopWithThinkingAndPromptCaching(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
			s, ts := start(t, config{workdir: "/repo", toolTurns: 3, steps: []parStep{parseSteps("ls -la"), parseSteps("read:a.py"), parseSteps("grep -n def *.py")}})
			s.cfg.sessionHeaders = []string{"x-claude-code-session-id"}
			c := &claudeConvo{msgs: []json.RawMessage{json.RawMessage(`{"role":"user","content":[{"type":"text","text":"List the functions."}]}`)}}
			var calls []string
			var usages []anthropicUsage
			for turn := 0; turn < 4; turn++ {
				status, b, _ := postMessages(t, ts.URL+"/v1/messages?beta=true", c.body(stream), "sk-ant-test")
				if status != 200 {
					t.Fatalf("turn %d: %d %s", turn+1, status, b)
				}
				m := readMessage(t, stream, b)
				usages = append(usages, m.Usage)
				if m.Content[0]["type"] != "thinking" || m.Content[0]["thinking"] != "" || m.Content[0]["signature"] == "" {
					t.Fatalf("turn %d: first block %v", turn+1, m.Content[0])
				}
				last := m.Content[len(m.Content)-1]
				if m.StopReason == "end_turn" {
					if last["text"] != "All done." || turn != 3 {
						t.Fatalf("turn %d: text %v", turn+1, last)
					}
					break
				}
				in, _ := json.Marshal(last["input"])
				calls = append(calls, fmt.Sprint(last["name"], " ", string(in)))
				assistant, _ := json.Marshal(map[string]any{"role": "assistant", "content": m.Content})
				result, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]any{
					"type": "tool_result", "tool_use_id": last["id"], "content": fmt.Sprintf("output %d", turn+1)}}})
				c.msgs = append(c.msgs, assistant, result)
			}
			want := []string{`Bash {"command":"ls -la"}`, `Read {"file_path":"/repo/a.py"}`, `Bash {"command":"grep -n def *.py"}`}
			if fmt.Sprint(calls) != fmt.Sprint(want) {
				t.Fatalf("calls %q, want %q", calls, want)
			}
			if usages[0].CacheRead != 0 || usages[0].CacheCreation == 0 {
				t.Fatalf("turn 1 usage %+v", usages[0])
			}
			for i := 1; i < len(usages); i++ {
				prev := usages[i-1]
				if usages[i].CacheRead != prev.CacheRead+prev.CacheCreation || usages[i].CacheCreation == 0 || usages[i].Input != 0 {
					t.Fatalf("turn %d usage %+v after %+v", i+1, usages[i], prev)
				}
			}
			if got := s.anthropic().ledger.Verified(); got != 0+1+2+3 {
				t.Fatalf("%d thinking blocks verified, want 6", got)
			}
		})
	}
}

// The refusals a client sees, in Anthropic's shape and status.
func TestMessagesRefusals(t *testing.T) {
	_, ts := start(t, config{context: 100})
	ask := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	long := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"` + strings.Repeat("word ", 100) + `"}]}`
	forged := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"Zm9yZ2Vk"},{"type":"text","text":"x"}]},{"role":"user","content":"again"}]}`
	for _, tc := range []struct {
		name, body, key string
		status          int
		want            string
	}{
		{"no x-api-key", ask, "", 401, `{"type":"error","error":{"type":"authentication_error","message":"x-api-key header is required"}}`},
		{"a tool call without its result", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}]}]}`, "k", 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"messages.1: ` + "`tool_use`" + ` ids were found without`},
		{"a thinking block it never issued", forged, "k", 400, "messages.1.content.0: Invalid `signature` in `thinking` block"},
		{"a prompt over the window", long, "k", 400, `"message":"prompt is too long: 133 tokens > 100 maximum"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, b, h := postMessages(t, ts.URL+"/v1/messages", []byte(tc.body), tc.key)
			if status != tc.status || !strings.Contains(string(b), tc.want) || h.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %s %s, want %d with %s", status, h.Get("Content-Type"), b, tc.status, tc.want)
			}
		})
	}
}

// count_tokens answers the prompt's size, the same as the input a
// Messages answer of the same prompt reports, and refuses max_tokens.
func TestCountTokensMatchesTheMessagesInput(t *testing.T) {
	_, ts := start(t, config{})
	msgs := `"messages":[{"role":"user","content":"` + strings.Repeat("word ", 40) + `"}]`
	status, b, _ := postMessages(t, ts.URL+"/v1/messages/count_tokens?beta=true", []byte(`{"model":"m",`+msgs+`}`), "k")
	var count struct {
		InputTokens int `json:"input_tokens"`
	}
	if status != 200 || json.Unmarshal(b, &count) != nil || count.InputTokens == 0 {
		t.Fatalf("%d %s", status, b)
	}
	status, b, _ = postMessages(t, ts.URL+"/v1/messages", []byte(`{"model":"m","max_tokens":10,`+msgs+`}`), "k")
	if m := readMessage(t, false, b); status != 200 || m.Usage.Input != count.InputTokens {
		t.Fatalf("messages input %d, count_tokens %d", m.Usage.Input, count.InputTokens)
	}
	status, b, _ = postMessages(t, ts.URL+"/v1/messages/count_tokens", []byte(`{"model":"m","max_tokens":10,`+msgs+`}`), "k")
	if status != 400 || !strings.Contains(string(b), "max_tokens: Extra inputs are not permitted") {
		t.Fatalf("%d %s", status, b)
	}
}

// Claude Code's own first request (captured, byte-exact) is accepted and
// gets a Bash call its schema accepts.
func TestClaudeCodeFirstRequestGetsABashCall(t *testing.T) {
	body, err := os.ReadFile("../../internal/messagestest/testdata/claude-code-2.1.332-turn1.json")
	if err != nil {
		t.Fatal(err)
	}
	_, ts := start(t, config{steps: []parStep{parseSteps("ls -la")}})
	status, b, _ := postMessages(t, ts.URL+"/v1/messages?beta=true", body, "sk-ant-local")
	if status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	m := readEvents(t, b)
	last := m.Content[len(m.Content)-1]
	if m.StopReason != "tool_use" || last["name"] != "Bash" || last["input"].(map[string]any)["command"] != "ls -la" {
		t.Fatalf("%s %v", m.StopReason, last)
	}
	if _, cerr := messagestest.Check(body, messagestest.Options{}); cerr != nil {
		t.Fatal(cerr)
	}
}
