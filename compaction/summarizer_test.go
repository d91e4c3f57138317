package compaction

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/wire"
)

// upstream is an in-test OpenAI-compatible server on 127.0.0.1 that
// records what it received and answers with reply.
type summaryUpstream struct {
	*httptest.Server
	release chan struct{} // closed at cleanup: unblocks slow handlers

	mu   sync.Mutex // guards the fields below
	body []byte
	auth string
	path string
	hits int
}

func newSummaryUpstream(t *testing.T, reply func(w http.ResponseWriter, r *http.Request)) *summaryUpstream {
	t.Helper()
	u := &summaryUpstream{release: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.body, u.auth, u.path = b, r.Header.Get("Authorization"), r.URL.Path
		u.hits++
		u.mu.Unlock()
		reply(w, r)
	}))
	t.Cleanup(u.Close)
	t.Cleanup(func() { close(u.release) }) // runs first: Close waits for handlers
	return u
}

func summaryReply(status int, body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func summaryCompletion(content string) string {
	b, _ := json.Marshal(content)
	return `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":` + string(b) +
		`},"finish_reason":"stop"}],"usage":{"prompt_tokens":1234,"completion_tokens":56,"total_tokens":1290}}`
}

func TestSummarize(t *testing.T) {
	up := newSummaryUpstream(t, summaryReply(200, summaryCompletion("\n## Goal\nShip <it> & test.\n")))
	prompt := compactor.BuildPromptFor(0, "", compactor.Transcript([]compactor.Message{{Role: wire.RoleUser, Text: "hi <there> & bye"}}, 0))
	res, err := NewSummarizer().Summarize(context.Background(), SummaryRequest{
		BaseURL:       up.URL + "/v1/",
		Authorization: "Bearer test-key-123",
		Model:         "gpt-4o-mini",
		Prompt:        prompt,
		MaxTokens:     2048,
		Timeout:       10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "## Goal\nShip <it> & test." {
		t.Errorf("summary %q", res.Text)
	}
	if res.PromptTokens != 1234 || res.CompletionTokens != 56 || res.Truncated {
		t.Errorf("result %+v", res)
	}

	up.mu.Lock()
	defer up.mu.Unlock()
	if up.path != "/v1/chat/completions" {
		t.Errorf("path %q", up.path)
	}
	if up.auth != "Bearer test-key-123" {
		t.Errorf("Authorization %q not forwarded", up.auth)
	}
	var got struct {
		Model    string `json:"model"`
		Messages []struct {
			Role, Content string
		} `json:"messages"`
		Temperature *float64 `json:"temperature"`
		MaxTokens   int      `json:"max_tokens"`
		Stream      *bool    `json:"stream"`
	}
	if err := json.Unmarshal(up.body, &got); err != nil {
		t.Fatalf("request body %q: %v", up.body, err)
	}
	if got.Model != "gpt-4o-mini" || len(got.Messages) != 1 || got.Messages[0].Role != "user" ||
		got.Messages[0].Content != prompt || got.Temperature == nil || *got.Temperature != 0.3 ||
		got.MaxTokens != 2048 || got.Stream == nil || *got.Stream {
		t.Errorf("request body: %s", up.body)
	}
}

func TestSummarizeErrors(t *testing.T) {
	const key = "sk-" + "secretsecretsecret1234567890"
	tests := []struct {
		name  string
		reply func(http.ResponseWriter, *http.Request)
		is    error
		says  string
	}{
		{"upstream 500", summaryReply(500, `{"error":{"message":"The server had an error while processing your request","type":"server_error"}}`),
			wire.ErrUpstream, "status 500: The server had an error while processing your request"},
		{"upstream 401 echoing the key", summaryReply(401, `{"error":{"message":"Incorrect API key provided: `+key+`"}}`),
			wire.ErrUpstream, "Incorrect API key provided: [REDACTED]"},
		{"plain-text 502", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "bad gateway from nginx", 502) },
			wire.ErrUpstream, "bad gateway from nginx"},
		{"llama.cpp overflow 400", summaryReply(400, `{"error":{"code":400,"message":"request (4390 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4390,"n_ctx":4096}}`),
			wire.ErrContextOverflow, "exceeds the available context size"},
		{"llama.cpp shared KV cache full 500", summaryReply(500, `{"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}`),
			wire.ErrContextOverflow, "status 500: Context size has been exceeded."},
		{"error with 200", summaryReply(200, `{"error":"model not loaded"}`), wire.ErrUpstream, "model not loaded"},
		{"garbage body", summaryReply(200, `<html>oops`), wire.ErrBadResponse, "not JSON"},
		{"no choices", summaryReply(200, `{"choices":[]}`), wire.ErrBadResponse, "no choices"},
		{"empty content", summaryReply(200, summaryCompletion("  \n ")), wire.ErrEmptySummary, ""},
		{"null content", summaryReply(200, `{"choices":[{"message":{"role":"assistant","content":null}}]}`), wire.ErrEmptySummary, ""},
		{"reasoning only", summaryReply(200, `{"choices":[{"message":{"content":"","reasoning_content":"Let me think..."},"finish_reason":"length"}]}`),
			wire.ErrEmptySummary, "only reasoning"},
		{"unclosed think", summaryReply(200, summaryCompletion("<think>hmm, the user wants")), wire.ErrEmptySummary, ""},
	}
	s := NewSummarizer()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := newSummaryUpstream(t, tc.reply)
			_, err := s.Summarize(context.Background(), SummaryRequest{
				BaseURL: up.URL, Authorization: "Bearer " + key, Model: "m", Prompt: "p", Timeout: 10 * time.Second,
			})
			if !errors.Is(err, tc.is) {
				t.Fatalf("error %v, want %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			if strings.Contains(err.Error(), key) {
				t.Errorf("error leaks the key: %q", err)
			}
		})
	}
}

func TestSummarizeContentShapes(t *testing.T) {
	for _, tc := range []struct{ name, reply, want string }{
		{"think block removed", summaryCompletion("<think>plan it</think>\n\n## Goal\nX"), "## Goal\nX"},
		{"content parts", `{"choices":[{"message":{"content":[{"type":"text","text":"## Goal"},{"type":"text","text":"X"}]}}]}`, "## Goal\nX"},
		{"usage as input/output tokens", `{"choices":[{"message":{"content":"S"},"finish_reason":"length"}],"usage":{"input_tokens":7,"output_tokens":3}}`, "S"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newSummaryUpstream(t, summaryReply(200, tc.reply))
			res, err := NewSummarizer().Summarize(context.Background(), SummaryRequest{BaseURL: up.URL, Model: "m", Prompt: "p"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != tc.want {
				t.Errorf("summary %q, want %q", res.Text, tc.want)
			}
			if tc.name == "usage as input/output tokens" && (res.PromptTokens != 7 || res.CompletionTokens != 3 || !res.Truncated) {
				t.Errorf("result %+v", res)
			}
		})
	}
}

// TestSummarizeTimeout: an upstream that never answers costs the timeout,
// not the request. The guard only catches a hang; it asserts no timing.
func TestSummarizeTimeout(t *testing.T) {
	var up *summaryUpstream
	up = newSummaryUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-up.release:
		}
	})
	s := NewSummarizer()
	call := func(ctx context.Context, timeout time.Duration) error {
		done := make(chan error, 1)
		go func() {
			_, err := s.Summarize(ctx, SummaryRequest{BaseURL: up.URL, Model: "m", Prompt: "p", Timeout: timeout})
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("Summarize did not return: timeout not applied")
			return nil
		}
	}

	if err := call(context.Background(), 100*time.Millisecond); !errors.Is(err, ErrTransport) {
		t.Errorf("slow upstream: error %v, want ErrTransport", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := call(ctx, time.Hour); !errors.Is(err, ErrTransport) {
		t.Errorf("context deadline before the timeout: error %v, want ErrTransport", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	up.mu.Lock()
	before := up.hits
	up.mu.Unlock()
	if err := call(ctx, time.Hour); !errors.Is(err, context.Canceled) || !errors.Is(err, ErrTransport) {
		t.Errorf("cancelled context: error %v", err)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if up.hits != before {
		t.Error("a cancelled context still reached the upstream")
	}
}

func TestSummarizeUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	_, err := NewSummarizer().Summarize(context.Background(), SummaryRequest{BaseURL: url, Model: "m", Prompt: "p", Timeout: 5 * time.Second})
	if !errors.Is(err, ErrTransport) {
		t.Errorf("error %v, want ErrTransport", err)
	}
}
