package messages

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/sse"
)

// anthropicStream is a stream as api.anthropic.com sends it: message_delta
// repeats every usage field, cumulative.
const anthropicStream = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":12,"cache_creation_input_tokens":300,"cache_read_input_tokens":9000,"output_tokens":1}}}` + "\n\n" +
	"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}` + "\n\n" +
	"event: message_delta\n" +
	`data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":12,"cache_creation_input_tokens":300,"cache_read_input_tokens":9000,"output_tokens":42}}` + "\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// llamaStream is llama-server's: message_delta names output_tokens only,
// and there is no cache_creation_input_tokens.
const llamaStream = "event: message_start\n" +
	`data: {"type":"message_start","message":{"usage":{"cache_read_input_tokens":45,"input_tokens":1,"output_tokens":0}}}` + "\n\n" +
	"event: message_delta\n" +
	`data: {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":4}}` + "\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

func TestStreamWatchReadsUsageWhereverReadsSplit(t *testing.T) {
	for _, tc := range []struct {
		stream string
		want   Usage
	}{
		{anthropicStream, Usage{InputTokens: 9312, CachedTokens: 9000, CacheWriteTokens: 300, OutputTokens: 42, Found: true}},
		{llamaStream, Usage{InputTokens: 46, CachedTokens: 45, OutputTokens: 4, Found: true}},
	} {
		for _, stream := range []string{tc.stream, strings.ReplaceAll(tc.stream, "\n", "\r\n")} {
			for cut := 0; cut <= len(stream); cut += 5 {
				var w StreamWatch
				w.Observe([]byte(stream[:cut]))
				w.Observe([]byte(stream[cut:]))
				if w.Usage() != tc.want || !w.Completed() {
					t.Fatalf("cut at %d: usage %+v completed %v, want %+v", cut, w.Usage(), w.Completed(), tc.want)
				}
			}
		}
	}
}

func TestStreamWatchSeesAStreamCutShort(t *testing.T) {
	var w StreamWatch
	w.Observe([]byte(anthropicStream[:strings.Index(anthropicStream, "event: message_stop")]))
	if w.Ended() || w.Completed() {
		t.Fatal("a stream without message_stop ended")
	}
	var e StreamWatch
	e.Observe([]byte("event: error\n" + `data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` + "\n\n"))
	if !e.Ended() || e.Completed() {
		t.Fatal("an error event: not ended, or completed")
	}
}

func TestUsageFromJSON(t *testing.T) {
	for body, want := range map[string]Usage{
		`{"type":"message","usage":{"input_tokens":10,"cache_read_input_tokens":80,"cache_creation_input_tokens":5,"output_tokens":3}}`: {InputTokens: 95, CachedTokens: 80, CacheWriteTokens: 5, OutputTokens: 3, Found: true},
		`{"type":"message","usage":{"cache_read_input_tokens":0,"input_tokens":46,"output_tokens":12}}`:                                 {InputTokens: 46, OutputTokens: 12, Found: true},
		`{"type":"message"}`: {},
		`nope`:               {},
	} {
		if got := UsageFromJSON([]byte(body)); got != want {
			t.Errorf("UsageFromJSON(%s) = %+v, want %+v", body, got, want)
		}
	}
}

func TestAssistantReply(t *testing.T) {
	now := time.Unix(1764547200, 0)
	text := "[ctxpress] compacted 40 messages <into> a summary & kept 6"
	var msg struct {
		Type, Role, Model string
		StopReason        string `json:"stop_reason"`
		Content           []struct{ Type, Text string }
	}
	if err := json.Unmarshal(AssistantReply("claude-opus-5-5", text, false, now).Body, &msg); err != nil {
		t.Fatal(err)
	}
	if msg.Type != "message" || msg.Role != "assistant" || msg.StopReason != "end_turn" || len(msg.Content) != 1 || msg.Content[0].Text != text {
		t.Fatalf("%+v", msg)
	}
	r := AssistantReply("claude-opus-5-5", text, true, now)
	var w StreamWatch
	w.Observe(r.Body)
	deltas := ""
	var lines sse.LineReader
	lines.Feed(r.Body, func(l []byte) {
		if d, ok := sse.Data(l); ok {
			var ev struct {
				Type  string
				Delta struct{ Text string }
			}
			if json.Unmarshal(d, &ev) == nil && ev.Type == "content_block_delta" {
				deltas += ev.Delta.Text
			}
		}
	})
	if r.ContentType != "text/event-stream" || !w.Completed() || deltas != text {
		t.Fatalf("stream: completed %v, text %q", w.Completed(), deltas)
	}
}

func TestErrorBodyIsAnthropicsShape(t *testing.T) {
	for status, typ := range map[int]string{400: "invalid_request_error", 413: "request_too_large", 502: "api_error", 504: "api_error", 529: "overloaded_error"} {
		var e struct {
			Type  string
			Error struct{ Type, Message string }
		}
		if err := json.Unmarshal(ErrorBody(status, "upstream unreachable"), &e); err != nil {
			t.Fatal(err)
		}
		if e.Type != "error" || e.Error.Type != typ || e.Error.Message != "ctxpress: upstream unreachable" {
			t.Errorf("%d: %+v", status, e)
		}
	}
}

func TestSummaryCall(t *testing.T) {
	b, err := SummaryBody(wire.SummaryCall{Model: "claude-sonnet-4-5", Prompt: "Summarise <this>", MaxTokens: 3000}, wire.RulesFor("claude-sonnet-4-5", nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"model":"claude-sonnet-4-5","max_tokens":3000,"messages":[{"role":"user","content":"Summarise <this>"}],"temperature":0.3,"stream":false}` + "\n"; string(b) != want {
		t.Fatalf("body %s, want %s", b, want)
	}
	ok := `{"type":"message","content":[{"type":"thinking","thinking":"","signature":"x"},{"type":"text","text":"## Active Task\nship it"}],"stop_reason":"end_turn","usage":{"input_tokens":900,"cache_read_input_tokens":100,"output_tokens":40}}`
	s, err := ReadSummary(200, []byte(ok), "")
	if err != nil || s.Text != "## Active Task\nship it" || s.PromptTokens != 1000 || s.CompletionTokens != 40 || s.Truncated {
		t.Fatalf("%+v %v", s, err)
	}
	if s, err := ReadSummary(200, []byte(`{"type":"message","content":[{"type":"text","text":"## Act"}],"stop_reason":"max_tokens"}`), ""); err != nil || !s.Truncated {
		t.Fatalf("max_tokens: %+v %v", s, err)
	}
	if _, err := ReadSummary(200, []byte(`{"type":"message","content":[{"type":"thinking","thinking":"hmm","signature":"x"}]}`), ""); !errors.Is(err, wire.ErrEmptySummary) {
		t.Fatalf("only thinking: %v", err)
	}
	tooLong := `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`
	if _, err := ReadSummary(400, []byte(tooLong), "sk-ant-secret-key"); !errors.Is(err, wire.ErrContextOverflow) || strings.Contains(err.Error(), "sk-ant-secret-key") {
		t.Fatalf("prompt too long: %v", err)
	}
	if _, err := ReadSummary(529, []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), ""); !errors.Is(err, wire.ErrUpstream) {
		t.Fatalf("overloaded: %v", err)
	}
}
