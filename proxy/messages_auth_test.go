package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/state"
)

// Claude Code sends its key as x-api-key: without auth.keys that key names
// its namespace, so two keys never share a conversation and one key keeps
// its own across requests.
func TestClaudeCodeNamespaceIsItsAPIKey(t *testing.T) {
	up := newMessagesUpstream(t)
	deps, st := responsesDeps(t)
	p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
	body, h := claudeCodeRequest()
	h["X-Claude-Code-Session-Id"] = "shared-session"
	for _, key := range []string{testAnthropicKey, "sk-ant-other-key-99", testAnthropicKey} {
		h["x-api-key"] = key
		up.mu.Lock()
		up.key = key
		up.mu.Unlock()
		if status, answer, _ := send(t, http.MethodPost, p.URL+"/v1/messages?beta=true", body, h); status != http.StatusOK {
			t.Fatalf("%s: %d %s", key, status, answer)
		}
	}
	waitFor(t, p.recorderDrained, "the recorder")
	for key, want := range map[string]int{testAnthropicKey: 2, "sk-ant-other-key-99": 1} {
		rec, ok, _ := st.Get(state.NewKey([]byte("x-api-key\x00"+key), "shared-session"))
		if !ok || len(rec.Turns) != want {
			t.Errorf("%s: %d turns recorded (found %v), want %d", key, len(rec.Turns), ok, want)
		}
	}
}

// With auth.keys, a Claude Code user sends a ctxpress key as x-api-key
// (ANTHROPIC_API_KEY), as a Bearer token (ANTHROPIC_AUTH_TOKEN), or in
// X-Ctxpress-Key beside its own Anthropic key (ANTHROPIC_CUSTOM_HEADERS).
// The ctxpress key never reaches the upstream, which gets
// upstream_api_key as x-api-key or the client's own key; every spelling
// of one key is one namespace.
func TestClaudeCodeSendsItsCtxpressKey(t *testing.T) {
	up := newMessagesUpstream(t)
	for _, tc := range []struct {
		name        string
		upstreamKey string
		header      map[string]string
	}{
		{"x-api-key", testAnthropicKey, map[string]string{"x-api-key": "cx-alpha"}},
		{"bearer", testAnthropicKey, map[string]string{"Authorization": "Bearer cx-alpha"}},
		{"x-api-key beside a provider bearer", testAnthropicKey, map[string]string{"x-api-key": "cx-alpha", "Authorization": "Bearer sk-ant-oat-someone"}},
		{"X-Ctxpress-Key beside the client's own key", "", map[string]string{HeaderClientKey: "cx-alpha", "x-api-key": testAnthropicKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deps, st := responsesDeps(t)
			p := startProxyWith(t, Config{Upstream: up.BaseURL(), UpstreamAPIKey: tc.upstreamKey, AuthKeys: []string{"cx-alpha", "cx-beta"}}, deps)
			body, h := claudeCodeRequest()
			delete(h, "x-api-key")
			for k, v := range tc.header {
				h[k] = v
			}
			status, answer, _ := send(t, http.MethodPost, p.URL+"/v1/messages?beta=true", body, h)
			if status != http.StatusOK {
				t.Fatalf("%d %s", status, answer)
			}
			turns, _ := up.turns()
			got := turns[len(turns)-1].header
			if got.Get("X-Api-Key") != testAnthropicKey || got.Get("Authorization") != "" && tc.upstreamKey != "" {
				t.Errorf("upstream x-api-key %q, Authorization %q", got.Get("X-Api-Key"), got.Get("Authorization"))
			}
			for name, vals := range got {
				for _, v := range vals {
					if strings.Contains(v, "cx-alpha") {
						t.Errorf("the ctxpress key reached the upstream in %s", name)
					}
				}
			}
			waitFor(t, p.recorderDrained, "the recorder")
			if _, ok, _ := st.Get(state.NewKey([]byte("Bearer cx-alpha"), "errors")); !ok {
				t.Error("the turn is not in the key's namespace")
			}
		})
	}
}
