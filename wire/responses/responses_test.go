package responses

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// completedStream is a Responses stream as OpenAI sends it, shortened.
const completedStream = "event: response.created\n" +
	`data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}` + "\n\n" +
	"event: response.output_text.delta\n" +
	`data: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"}` + "\n\n" +
	"event: response.completed\n" +
	`data: {"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","object":"response","status":"completed","output":[],` +
	`"usage":{"input_tokens":1234,"input_tokens_details":{"cached_tokens":1024},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":1239}}}` + "\n\n"

func TestStreamWatchReadsUsageFromCompletedWhereverReadsSplit(t *testing.T) {
	for _, stream := range []string{completedStream, strings.ReplaceAll(completedStream, "\n", "\r\n"), strings.ReplaceAll(completedStream, "\n", "\r")} {
		for cut := 0; cut <= len(stream); cut += 7 {
			var w StreamWatch
			w.Observe([]byte(stream[:cut]))
			w.Observe([]byte(stream[cut:]))
			u := w.Usage()
			if !w.Completed() || !w.Ended() || !u.Found || u.InputTokens != 1234 || u.CachedTokens != 1024 || u.OutputTokens != 5 {
				t.Fatalf("cut at %d: completed %v, usage %+v", cut, w.Completed(), u)
			}
		}
	}
}

// A stream whose response holds a compaction item was compacted by the
// provider: its usage teaches no calibration.
func TestStreamWatchSeesAProviderCompaction(t *testing.T) {
	compactedStream := strings.Replace(completedStream, `"status":"completed","output":[]`, `"status":"completed","output":[{"id":"cmp_1","type":"compaction","encrypted_content":"gAAA"}]`, 1)
	for stream, want := range map[string]bool{completedStream: false, compactedStream: true} {
		var w StreamWatch
		w.Observe([]byte(stream))
		if u := w.Usage(); !u.Found || u.ServerCompacted != want {
			t.Fatalf("usage %+v, want compacted %v", u, want)
		}
	}
}

func TestStreamWatchSeesAStreamCutShort(t *testing.T) {
	cut := completedStream[:strings.Index(completedStream, "event: response.completed")]
	var w StreamWatch
	w.Observe([]byte(cut))
	if w.Ended() || w.Completed() || w.Usage().Found {
		t.Fatalf("a stream without response.completed: ended %v, usage %+v", w.Ended(), w.Usage())
	}
	var f StreamWatch
	f.Observe([]byte(`data: {"type":"response.failed","response":{"status":"failed","error":{"code":"server_error"}}}` + "\n\n"))
	if !f.Ended() || f.Completed() {
		t.Fatalf("response.failed: ended %v, completed %v", f.Ended(), f.Completed())
	}
}

func TestUsageFromJSON(t *testing.T) {
	for body, want := range map[string]Usage{
		`{"object":"response","usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":2}}`: {InputTokens: 10, CachedTokens: 4, OutputTokens: 2, Found: true},
		`{"object":"response","usage":null}`: {},
		// The provider compacted the input (context_management or a trigger): its usage is not of the request as sent.
		`{"object":"response","output":[{"type":"compaction","encrypted_content":"gA"},{"type":"message"}],"usage":{"input_tokens":10,"output_tokens":2}}`: {InputTokens: 10, OutputTokens: 2, Found: true, ServerCompacted: true},
		`{"object":"response","output":[{"type":"compaction_summary","encrypted_content":"gA"}],"usage":{"input_tokens":10,"output_tokens":2}}`:            {InputTokens: 10, OutputTokens: 2, Found: true, ServerCompacted: true},
		`{"object":"response","output":[{"type":"message","content":"compaction"}],"usage":{"input_tokens":10,"output_tokens":2}}`:                         {InputTokens: 10, OutputTokens: 2, Found: true},
		`{"object":"response"}`: {},
		`not json`:              {},
	} {
		if got := UsageFromJSON([]byte(body)); got != want {
			t.Errorf("UsageFromJSON(%s) = %+v, want %+v", body, got, want)
		}
	}
}

// replyServer answers every request with r.
func replyServer(t *testing.T, r Reply) *openai.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", r.ContentType)
		w.Write(r.Body)
	}))
	t.Cleanup(srv.Close)
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	return &c
}

func TestAssistantReplyReadsAsAResponseInTheOfficialClient(t *testing.T) {
	now := time.Unix(1764547200, 0)
	params := responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("/compact")}}
	text := "[ctxpress] compacted 40 messages <into> a summary & kept 6"

	got, err := replyServer(t, AssistantReply("gpt-5", text, false, now)).Responses.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if got.OutputText() != text || got.Status != "completed" || got.Model != "gpt-5" {
		t.Fatalf("response: text %q, status %q, model %q", got.OutputText(), got.Status, got.Model)
	}

	stream := replyServer(t, AssistantReply("gpt-5", text, true, now)).Responses.NewStreaming(context.Background(), params)
	var deltas, final string
	for stream.Next() {
		switch ev := stream.Current(); ev.Type {
		case "response.output_text.delta":
			deltas += ev.Delta
		case "response.completed":
			final = ev.Response.OutputText()
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if deltas != text || final != text {
		t.Fatalf("stream: deltas %q, completed %q", deltas, final)
	}
	var w StreamWatch
	w.Observe(AssistantReply("gpt-5", text, true, now).Body)
	if !w.Completed() {
		t.Fatal("our own stream does not end with response.completed")
	}
}

func TestSummaryBodyFollowsTheModelsParameterRules(t *testing.T) {
	for _, tc := range []struct {
		model           string
		wantTemperature bool
		wantMax         int
	}{
		{"gpt-4.1", true, 2000},
		{"gpt-5-mini", false, 2000 + wire.ReasoningHeadroom},
		{"o3", false, 2000 + wire.ReasoningHeadroom},
	} {
		b, err := SummaryBody(wire.SummaryCall{Model: tc.model, Prompt: "Summarise <this> & that", MaxTokens: 2000}, wire.RulesFor(tc.model, nil))
		if err != nil {
			t.Fatal(err)
		}
		var r map[string]any
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		_, hasT := r["temperature"]
		if hasT != tc.wantTemperature || r["max_output_tokens"] != float64(tc.wantMax) || r["store"] != false || r["stream"] != false {
			t.Errorf("%s: %s", tc.model, b)
		}
		for _, forbidden := range []string{"max_tokens", "max_completion_tokens", "messages", "previous_response_id"} {
			if _, ok := r[forbidden]; ok {
				t.Errorf("%s: sends %s: %s", tc.model, forbidden, b)
			}
		}
		if !strings.Contains(string(b), `"input":[{"role":"user","content":[{"type":"input_text","text":"Summarise <this> & that"}]}]`) {
			t.Errorf("%s: input: %s", tc.model, b)
		}
	}
}

func TestReadSummary(t *testing.T) {
	ok := `{"object":"response","status":"completed","output":[{"type":"reasoning","id":"rs_1","summary":[]},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"## Active Task\nfix it"}]}],` +
		`"usage":{"input_tokens":900,"output_tokens":40}}`
	s, err := ReadSummary(200, []byte(ok), "")
	if err != nil || s.Text != "## Active Task\nfix it" || s.PromptTokens != 900 || s.CompletionTokens != 40 || s.Truncated {
		t.Fatalf("%+v %v", s, err)
	}
	cut := `{"object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},` +
		`"output":[{"type":"message","content":[{"type":"output_text","text":"## Active"}]}]}`
	if s, err := ReadSummary(200, []byte(cut), ""); err != nil || !s.Truncated {
		t.Fatalf("incomplete: %+v %v", s, err)
	}
	onlyReasoning := `{"object":"response","status":"incomplete","output":[{"type":"reasoning","id":"rs_1","summary":[]}]}`
	if _, err := ReadSummary(200, []byte(onlyReasoning), ""); !errors.Is(err, wire.ErrEmptySummary) {
		t.Fatalf("only reasoning: %v", err)
	}
	overflow := `{"error":{"message":"Your input exceeds the context window of this model.","type":"invalid_request_error","code":"context_length_exceeded"}}`
	if _, err := ReadSummary(400, []byte(overflow), "Bearer sk-secret-key-1234"); !errors.Is(err, wire.ErrContextOverflow) {
		t.Fatalf("overflow: %v", err)
	}
	if _, err := ReadSummary(200, []byte(`{"object":"response"}`), ""); !errors.Is(err, wire.ErrBadResponse) {
		t.Fatalf("no output: %v", err)
	}
}
