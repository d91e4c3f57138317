//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// The Anthropic Messages API (/v1/messages) through ctxpress to the real
// llama-server, spoken as Claude Code speaks it: x-api-key, anthropic-beta,
// X-Claude-Code-Session-Id, ?beta=true, system as text blocks with markers,
// assistant turns [text, tool_use], user turns [tool_result].

// messagesConvo is a scripted Messages tool conversation.
type messagesConvo struct {
	msgs []map[string]any
	turn int
}

func newMessagesConvo() *messagesConvo {
	return &messagesConvo{msgs: []map[string]any{{"role": "user", "content": []any{map[string]any{"type": "text",
		"text": "The test TestParseDate fails on leap years. Find the bug in dateparse/parse.go and fix it."}}}}}
}

// messagesConversation is a conversation after turns tool rounds, each
// with toolOutput's ~200-byte result (the answers' text is the reply).
func messagesConversation(turns int) *messagesConvo {
	c := newMessagesConvo()
	for i := 0; i < turns; i++ {
		c.advance("Let me look at the next part.")
	}
	return c
}

// advance appends the assistant's reply as a Bash tool call and its result.
func (c *messagesConvo) advance(reply string) {
	c.turn++
	id := fmt.Sprintf("toolu_e2e%03d", c.turn)
	if reply == "" {
		reply = "Checking."
	}
	c.msgs = append(c.msgs,
		map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "text", "text": reply},
			map[string]any{"type": "tool_use", "id": id, "name": "Bash",
				"input": map[string]any{"command": fmt.Sprintf("sed -n %d,%dp dateparse/parse.go", c.turn*10, c.turn*10+8)}}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id,
			"content": toolOutput(c.turn), "is_error": false}}})
}

// body is the request, the last marker on the newest block as Claude
// Code places it.
func (c *messagesConvo) body(stream bool) []byte {
	msgs := make([]any, len(c.msgs))
	for i, m := range c.msgs {
		copied := map[string]any{"role": m["role"]}
		blocks := append([]any(nil), m["content"].([]any)...)
		if i == len(c.msgs)-1 {
			last := map[string]any{}
			for k, v := range blocks[len(blocks)-1].(map[string]any) {
				last[k] = v
			}
			last["cache_control"] = map[string]any{"type": "ephemeral"}
			blocks[len(blocks)-1] = last
		}
		copied["content"] = blocks
		msgs[i] = copied
	}
	b, _ := json.Marshal(map[string]any{
		"model": modelName, "max_tokens": 16, "temperature": 0, "stream": stream,
		"system": []any{map[string]any{"type": "text", "text": "You are a coding agent."},
			map[string]any{"type": "text", "text": "Use the Bash tool to inspect the repository, then fix the failing test.",
				"cache_control": map[string]any{"type": "ephemeral"}}},
		"tools": []any{map[string]any{"name": "Bash", "description": "Run a shell command.",
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}, "required": []string{"command"}}}},
		"messages": msgs,
		"metadata": map[string]any{"user_id": `{"device_id":"e2e","account_uuid":"","session_id":"e2e-messages"}`},
	})
	return b
}

// messagesAnswer is a Messages answer, whole or read from its events.
type messagesAnswer struct {
	status                        int
	body                          string
	text                          string
	stop                          string
	input, cacheRead, output      int
	sawStart, sawDelta, sawFinish bool // streamed: message_start, message_delta, message_stop
}

// postMessages sends body to base's /v1/messages?beta=true with Claude
// Code's headers.
func postMessages(t *testing.T, base string, body []byte, session string) messagesAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages?beta=true", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", "sk-ant-e2e")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("anthropic-beta", "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27")
	req.Header.Set("X-Claude-Code-Session-Id", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	a := messagesAnswer{status: resp.StatusCode, body: readAll(resp.Body)}
	if a.status != 200 {
		return a
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		a.text = gjson.Get(a.body, "content.0.text").String()
		a.stop = gjson.Get(a.body, "stop_reason").String()
		a.input = int(gjson.Get(a.body, "usage.input_tokens").Int())
		a.cacheRead = int(gjson.Get(a.body, "usage.cache_read_input_tokens").Int())
		a.output = int(gjson.Get(a.body, "usage.output_tokens").Int())
		return a
	}
	sc := bufio.NewScanner(strings.NewReader(a.body))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		ev := gjson.Parse(data)
		switch ev.Get("type").String() {
		case "message_start":
			a.sawStart = true
			a.input = int(ev.Get("message.usage.input_tokens").Int())
			a.cacheRead = int(ev.Get("message.usage.cache_read_input_tokens").Int())
		case "content_block_delta":
			a.text += ev.Get("delta.text").String()
		case "message_delta":
			a.sawDelta = true
			a.stop = ev.Get("delta.stop_reason").String()
			a.output = int(ev.Get("usage.output_tokens").Int())
		case "message_stop":
			a.sawFinish = true
		}
	}
	return a
}

// A Messages tool conversation through ctxpress, streamed and not: every
// turn answered, the usage (input + cache read, output) comes back, the
// streamed events complete. Today ctxpress passes /v1/messages through.
func TestMessagesThroughCtxpress(t *testing.T) {
	srv := startLlama(t)
	cp := startCtxpress(t, srv.URL(), filepath.Join(t.TempDir(), "ctxpress.db"), "")
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
			c := newMessagesConvo()
			prevPrompt := 0
			for turn := 1; turn <= 6; turn++ {
				a := postMessages(t, cp.URL, c.body(stream), fmt.Sprintf("e2e-messages-%v", stream))
				if a.status != 200 {
					t.Fatalf("turn %d: %d %s", turn, a.status, a.body)
				}
				prompt := a.input + a.cacheRead
				if a.text == "" || a.output == 0 || prompt <= prevPrompt || a.stop == "" {
					t.Fatalf("turn %d: text %q, stop %q, usage input %d + cache read %d, output %d (previous prompt %d)",
						turn, a.text, a.stop, a.input, a.cacheRead, a.output, prevPrompt)
				}
				if stream && !(a.sawStart && a.sawDelta && a.sawFinish) {
					t.Fatalf("turn %d: events incomplete:\n%s", turn, a.body)
				}
				if turn > 1 && a.cacheRead == 0 {
					t.Errorf("turn %d: no cache_read_input_tokens from the server's prefix cache", turn)
				}
				prevPrompt = prompt
				c.advance(a.text)
			}
		})
	}
}

// A conversation too long for the 2048-token window is refused when sent
// directly (llama-server's 400 exceed_context_size_error, in OpenAI's error
// shape even on /v1/messages) and answered on every turn through ctxpress,
// streamed and not, which compacts it with summary calls in Messages form
// to the server itself; the usage ctxpress records for each turn is the
// server's (input + cache read + cache write).
func TestMessagesOverflowAnsweredThroughCtxpress(t *testing.T) {
	srv := startLlama(t)
	const turns = 9 // ~2,400 prompt tokens for this model's tokenizer
	for _, stream := range []bool{false, true} {
		direct := postMessages(t, strings.TrimSuffix(srv.URL(), "/v1"), messagesConversation(turns).body(stream), "e2e-overflow")
		if direct.status != 400 || gjson.Get(direct.body, "error.type").String() != "exceed_context_size_error" ||
			gjson.Get(direct.body, "error.n_ctx").Int() != 2048 {
			t.Fatalf("direct (stream %v): %d %s, want 400 exceed_context_size_error", stream, direct.status, direct.body)
		}
		t.Logf("direct (stream %v): %d prompt tokens refused", stream, gjson.Get(direct.body, "error.n_prompt_tokens").Int())
	}
	cp := startCtxpress(t, srv.URL(), filepath.Join(t.TempDir(), "ctxpress.db"),
		"models: {"+modelName+": {context_window: 2048}}\n")
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
			session := fmt.Sprintf("e2e-overflow-%v", stream)
			c := newMessagesConvo()
			largest := 0
			for turn := 1; turn <= 2*turns; turn++ {
				a := postMessages(t, cp.URL, c.body(stream), session)
				prompt := a.input + a.cacheRead
				if a.status != 200 || a.text == "" || prompt >= 2048 || stream && !a.sawFinish {
					t.Fatalf("turn %d through ctxpress: %d %s", turn, a.status, a.body)
				}
				cp.waitLog("request", func(l map[string]any) bool {
					return l["conversation"] == session && num(l["input_tokens"]) == prompt && num(l["cached_tokens"]) == a.cacheRead && l["error"] == nil
				})
				largest = max(largest, prompt)
				c.advance(a.text)
			}
			t.Logf("through ctxpress: %d/%d turns answered, largest prompt %d tokens; every turn's recorded usage is the server's", 2*turns, 2*turns, largest)
		})
	}
	ok := 0
	for _, e := range events(cp) {
		switch e["result"] {
		case "ok":
			ok++
		case "failed":
			t.Errorf("a compaction failed: %v", e) // the summary call in Messages form, to the server itself
		}
	}
	if ok == 0 {
		t.Fatal("no compaction through ctxpress")
	}
	t.Logf("%d compactions", ok)
}
