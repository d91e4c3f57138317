// Package openaitest is an in-test upstream that speaks the OpenAI wire
// format: chat completions (whole JSON with usage, or SSE chunks with a usage
// chunk when asked and [DONE]), models and embeddings. It records every
// request it gets so tests can check what the proxy sent. It binds 127.0.0.1.
package openaitest

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/tidwall/gjson"
)

// Request is one request the upstream received.
type Request struct {
	Method string
	Path   string // as received, e.g. /v1/chat/completions
	Query  string
	Header http.Header
	Body   []byte
}

// Server is a running fake upstream.
type Server struct {
	*httptest.Server
	// Reply is the assistant text of every completion; it is split on spaces
	// into one SSE chunk per word when streaming.
	Reply string
	// Summary is the text a summary request gets (see IsSummaryRequest).
	Summary string

	mu       sync.Mutex
	requests []Request                   // guarded by mu
	handlers map[string]http.HandlerFunc // guarded by mu; path -> override
}

// New starts a fake upstream on 127.0.0.1 and stops it at the end of the test.
func New(t testing.TB) *Server { return start(t, httptest.NewServer) }

// NewTLS is New over HTTPS, as hosted providers answer, with a certificate
// of its own: CertPEM is what a client must trust.
func NewTLS(t testing.TB) *Server { return start(t, httptest.NewTLSServer) }

// NewIPv6 is New on the IPv6 loopback, [::1]; it skips the test where
// there is none.
func NewIPv6(t testing.TB) *Server {
	t.Helper()
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	return start(t, func(h http.Handler) *httptest.Server {
		s := httptest.NewUnstartedServer(h)
		s.Listener.Close()
		s.Listener = ln
		s.Start()
		return s
	})
}

func start(t testing.TB, serve func(http.Handler) *httptest.Server) *Server {
	t.Helper()
	s := newServer()
	s.Server = serve(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// CertPEM returns the server's certificate, PEM-encoded (NewTLS only).
func (s *Server) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}

func newServer() *Server {
	return &Server{Reply: "Hello from the fake upstream.", handlers: map[string]http.HandlerFunc{},
		Summary: "## Goal\nFix the build.\n\n## Completed Actions\n1. Ran make: failed.\n\n## Active Task\nFix the error."}
}

// BaseURL is what a client would use as its OpenAI base URL: {URL}/v1.
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// Handle overrides the answer for one path (as received, e.g.
// "/v1/chat/completions"); the request is still recorded.
func (s *Server) Handle(path string, h http.HandlerFunc) {
	s.mu.Lock()
	s.handlers[path] = h
	s.mu.Unlock()
}

// Requests returns a copy of the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// IsSummaryRequest reports whether body is ctxpress's summary call: one
// user message that opens with the summariser preamble, or a conversation
// whose last user text is the instruction of a call that continues it
// (compactor.IsSummaryPrompt).
func IsSummaryRequest(body []byte) bool {
	msgs := gjson.GetBytes(body, "messages").Array()
	if len(msgs) == 0 || msgs[len(msgs)-1].Get("role").String() != "user" {
		return false
	}
	return compactor.IsSummaryPrompt(LastText(msgs[len(msgs)-1].Get("content")))
}

// LastText is a message content's last text: the string, or the text of
// its last text part.
func LastText(content gjson.Result) string {
	if content.Type == gjson.String {
		return content.Str
	}
	text := ""
	for _, p := range content.Array() {
		if t := p.Get("text"); t.Type == gjson.String && strings.HasSuffix(p.Get("type").String(), "text") {
			text = t.Str
		}
	}
	return text
}

// ChatRequests returns the chat completion requests received so far, summary
// requests apart.
func (s *Server) ChatRequests() (chats, summaries []Request) {
	for _, r := range s.Requests() {
		if !strings.HasSuffix(r.Path, "/chat/completions") {
			continue
		}
		if IsSummaryRequest(r.Body) {
			summaries = append(summaries, r)
		} else {
			chats = append(chats, r)
		}
	}
	return chats, summaries
}

// Last returns the last request received; it fails the test when none came.
func (s *Server) Last(t testing.TB) Request {
	t.Helper()
	reqs := s.Requests()
	if len(reqs) == 0 {
		t.Fatal("upstream received no request")
	}
	return reqs[len(reqs)-1]
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{
		Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body,
	})
	h := s.handlers[r.URL.Path]
	s.mu.Unlock()
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	if h != nil {
		h(w, r)
		return
	}
	switch strings.TrimPrefix(r.URL.Path, "/v1") {
	case "/chat/completions":
		s.AnswerChat(w, r, body)
	case "/models":
		writeJSON(w, map[string]any{"object": "list", "data": []map[string]any{
			{"id": "gpt-4o", "object": "model", "created": 1715367049, "owned_by": "system"},
			{"id": "tiny", "object": "model", "created": 1715367049, "owned_by": "local"},
		}})
	case "/embeddings":
		writeJSON(w, map[string]any{"object": "list", "model": "text-embedding-3-small",
			"data":  []map[string]any{{"object": "embedding", "index": 0, "embedding": []float64{0.1, -0.2, 0.3}}},
			"usage": map[string]int{"prompt_tokens": 4, "total_tokens": 4}})
	default:
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
	}
}

// AnswerChat answers a chat completion request whose body was read as
// the fake does by default: the SummaryPath handler or Summary for a
// summary request, else Reply; streamed when asked. A handler set with
// Handle can call it to answer as usual once it has checked what it wants.
func (s *Server) AnswerChat(w http.ResponseWriter, r *http.Request, body []byte) {
	if IsSummaryRequest(body) {
		s.mu.Lock()
		h := s.handlers[SummaryPath]
		s.mu.Unlock()
		if h != nil {
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			h(w, r)
			return
		}
		s.reply(w, body, s.Summary)
		return
	}
	s.reply(w, body, s.Reply)
}

// PromptTokens is the input token count the fake reports for a request body:
// one token per 4 bytes of the messages array, so tests can predict it.
func PromptTokens(body []byte) int {
	var req struct {
		Messages json.RawMessage `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	return len(req.Messages)/4 + 1
}

// SummaryPath is the Handle key that overrides the answer to summary
// requests only.
const SummaryPath = "summary"

func (s *Server) reply(w http.ResponseWriter, body []byte, text string) {
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		writeJSON(w, map[string]any{"error": map[string]any{"message": "bad json: " + err.Error(), "type": "invalid_request_error"}})
		return
	}
	prompt := PromptTokens(body)
	words := strings.Fields(text)
	usage := map[string]any{"prompt_tokens": prompt, "completion_tokens": len(words), "total_tokens": prompt + len(words),
		"prompt_tokens_details": map[string]int{"cached_tokens": 0}}
	if !req.Stream {
		writeJSON(w, map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion", "created": 1715367049, "model": req.Model,
			"choices": []map[string]any{{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": text}}},
			"usage": usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher := w.(http.Flusher)
	chunk := func(delta map[string]any, finish any) {
		c := map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1715367049,
			"model": req.Model, "choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}}
		if req.StreamOptions.IncludeUsage {
			c["usage"] = nil
		}
		WriteEvent(w, c)
		flusher.Flush()
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	for i, word := range words {
		if i > 0 {
			word = " " + word
		}
		chunk(map[string]any{"content": word}, nil)
	}
	chunk(map[string]any{}, "stop")
	if req.StreamOptions.IncludeUsage {
		WriteEvent(w, map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1715367049,
			"model": req.Model, "choices": []any{}, "usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	flusher.Flush()
}

// WriteEvent writes v as one SSE data event.
func WriteEvent(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "data: %s\n\n", b)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
