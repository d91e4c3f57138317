package proxy

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/internal/upstreamerr"
	"github.com/tidwall/gjson"
)

// anthropicErrorOf fails unless body is one of ctxpress's own errors in
// Anthropic's shape, {"type":"error","error":{"type":…,"message":"ctxpress: …"}},
// and returns its error type.
func anthropicErrorOf(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Type != "error" || e.Error.Type == "" ||
		!strings.HasPrefix(e.Error.Message, "ctxpress: ") || gjson.Get(body, "error.code").Exists() {
		t.Fatalf("not ctxpress's error in Anthropic's shape (%v): %s", err, body)
	}
	return e.Error.Type
}

// claudeCodeRequest is a small Messages request with Claude Code's headers.
func claudeCodeRequest() (string, map[string]string) {
	return `{"model":"claude-opus-5-5","max_tokens":1024,"messages":[{"role":"user","content":"List the files."}],"stream":true}`,
		map[string]string{"x-api-key": testAnthropicKey, "anthropic-version": "2023-06-01", "X-Claude-Code-Session-Id": "errors",
			"anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14", "Content-Type": "application/json"}
}

// ctxpress's own faults on the Messages paths (the conversation endpoint
// with Claude Code's ?beta=true, count_tokens, the bare path) answer in
// Anthropic's error shape, which Claude Code and the Anthropic SDKs read
// and retry: an unreachable upstream is a 502 api_error. The OpenAI paths
// keep OpenAI's shape.
func TestMessagesUpstreamDownIsAnAnthropicError(t *testing.T) {
	up := newMessagesUpstream(t)
	base := up.BaseURL()
	up.Close()
	deps, _ := responsesDeps(t)
	p := startProxyWith(t, Config{Upstream: base}, deps)
	body, h := claudeCodeRequest()
	for _, path := range []string{"/v1/messages?beta=true", "/v1/messages/count_tokens?beta=true", "/messages"} {
		status, answer, _ := send(t, http.MethodPost, p.URL+path, body, h)
		if status != http.StatusBadGateway || anthropicErrorOf(t, answer) != "api_error" {
			t.Errorf("%s: %d %s", path, status, answer)
		}
	}
	status, answer, _ := send(t, http.MethodPost, p.URL+"/v1/chat/completions", `{"model":"m","messages":[]}`, nil)
	if status != http.StatusBadGateway || gjson.Get(answer, "error.code").Str != upstreamerr.CodeUnreachable {
		t.Errorf("chat completions: %d %s", status, answer)
	}
}

// An upstream that does not answer in time is a 504 api_error on the
// Messages path.
func TestMessagesSlowUpstreamIsAnAnthropic504(t *testing.T) {
	up := newMessagesUpstream(t)
	up.mu.Lock()
	up.stall = make(chan struct{})
	defer close(up.stall)
	up.mu.Unlock()
	p := startProxy(t, Config{Upstream: up.BaseURL(), UpstreamTimeout: 200 * time.Millisecond})
	body, h := claudeCodeRequest()
	status, answer, _ := send(t, http.MethodPost, p.URL+"/v1/messages?beta=true", body, h)
	if status != http.StatusGatewayTimeout || anthropicErrorOf(t, answer) != "api_error" {
		t.Fatalf("%d %s", status, answer)
	}
}

// A Messages body over max_body_bytes is refused 413 request_too_large,
// as Anthropic names it, and never forwarded.
func TestMessagesBodyTooLargeIsAnAnthropic413(t *testing.T) {
	up := newMessagesUpstream(t)
	p := startProxy(t, Config{Upstream: up.BaseURL(), MaxBodyBytes: 1024})
	_, h := claudeCodeRequest()
	body := `{"model":"claude-opus-5-5","max_tokens":1024,"messages":[{"role":"user","content":"` + strings.Repeat("a", 2000) + `"}]}`
	status, answer, _ := send(t, http.MethodPost, p.URL+"/v1/messages?beta=true", body, h)
	if status != http.StatusRequestEntityTooLarge || anthropicErrorOf(t, answer) != "request_too_large" {
		t.Fatalf("%d %s", status, answer)
	}
	if turns, _ := up.turns(); len(turns) != 0 {
		t.Fatal("an oversized body was forwarded")
	}
}

// With auth.keys, a Claude Code request without a ctxpress key is refused
// 401 authentication_error in Anthropic's shape, naming x-api-key among
// the ways to send one, and never forwarded.
func TestMessagesMissingClientKeyIsAnAnthropic401(t *testing.T) {
	up := newMessagesUpstream(t)
	p := startProxy(t, Config{Upstream: up.BaseURL(), AuthKeys: []string{"cx-alpha"}})
	body, h := claudeCodeRequest()
	status, answer, header := send(t, http.MethodPost, p.URL+"/v1/messages?beta=true", body, h)
	if status != http.StatusUnauthorized || anthropicErrorOf(t, answer) != "authentication_error" ||
		!strings.Contains(answer, "x-api-key") || header.Get("WWW-Authenticate") == "" {
		t.Fatalf("%d %s", status, answer)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.got) != 0 {
		t.Fatal("a refused request was forwarded")
	}
}

// The upstream's own errors on the Messages path reach Claude Code exactly
// as sent: 529 overloaded (which it retries), a 401, a 400.
func TestMessagesUpstreamErrorsPassThrough(t *testing.T) {
	up := newMessagesUpstream(t)
	p := startProxy(t, Config{Upstream: up.BaseURL()})
	body, h := claudeCodeRequest()
	up.mu.Lock()
	up.overloaded = 1
	up.mu.Unlock()
	for _, tc := range []struct {
		name   string
		header map[string]string
		body   string
		status int
		want   string
	}{
		{"overloaded", h, body, 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		{"wrong key", map[string]string{"x-api-key": "sk-ant-wrong", "anthropic-version": "2023-06-01"}, body, 401,
			`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`},
		{"no max_tokens", h, `{"model":"claude-opus-5-5","messages":[{"role":"user","content":"hi"}]}`, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`},
	} {
		status, answer, _ := send(t, http.MethodPost, p.URL+"/v1/messages?beta=true", tc.body, tc.header)
		if status != tc.status || answer != tc.want {
			t.Errorf("%s: %d %s, want %d %s", tc.name, status, answer, tc.status, tc.want)
		}
	}
}

// Which error shape a client gets, by the path it asked.
func TestErrorShapeOfPath(t *testing.T) {
	for _, tc := range []struct {
		path      string
		anthropic bool
	}{
		{"/v1/messages", true},
		{"/messages", true},
		{"/v1/messages/count_tokens", true},
		{"/v1/messages/batches/msgbatch_1", true},
		{"/v1/chat/completions", false},
		{"/v1/responses", false},
		{"/v1/messagesx", false},
		{"/v1/models", false},
		{"/ctxpress/healthz", false},
	} {
		body := string(errorShapeOf([]byte(tc.path))(502, upstreamerr.CodeUnreachable, "upstream request failed"))
		if got := gjson.Get(body, "type").Str == "error"; got != tc.anthropic {
			t.Errorf("%s: %s", tc.path, body)
		}
	}
}
