package proxy

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/state"
)

func TestRouteBase(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      Config
		format   string
		base     string
		key      string
		provider bool
	}{
		{"nothing set: chat to OpenAI", Config{}, RouteChat, "https://api.openai.com/v1", "", true},
		{"nothing set: Messages to Anthropic", Config{}, RouteMessages, "https://api.anthropic.com/v1", "", true},
		{"nothing set: Gemini to Google", Config{}, RouteGemini, "https://generativelanguage.googleapis.com", "", true},
		{"one upstream for all", Config{Upstream: "http://h/v1", UpstreamAPIKey: "k"}, RouteMessages, "http://h/v1", "k", false},
		{"one upstream for all, Gemini too", Config{Upstream: "http://h/v1", UpstreamAPIKey: "k"}, RouteGemini, "http://h/v1", "k", false},
		{"a route over the upstream", Config{Upstream: "http://h/v1", UpstreamAPIKey: "k",
			Routes: map[string]Route{RouteMessages: {Upstream: "http://a/v1", APIKey: "ka"}}}, RouteMessages, "http://a/v1", "ka", false},
		{"a route leaves the others on the upstream", Config{Upstream: "http://h/v1",
			Routes: map[string]Route{RouteMessages: {Upstream: "http://a/v1"}}}, RouteResponses, "http://h/v1", "", false},
		{"a route's key alone, on the provider", Config{Routes: map[string]Route{RouteMessages: {APIKey: "ka"}}}, RouteMessages,
			"https://api.anthropic.com/v1", "ka", true},
	} {
		base, key, provider := routeBase(tc.cfg, tc.format)
		if base != tc.base || key != tc.key || provider != tc.provider {
			t.Errorf("%s: %s %q %v, want %s %q %v", tc.name, base, key, provider, tc.base, tc.key, tc.provider)
		}
	}
}

// routeLines are the startup's route lines, by format.
func routeLines(t *testing.T, p *testProxy) map[string]gjson.Result {
	t.Helper()
	out := map[string]gjson.Result{}
	for _, l := range strings.Split(p.logs.String(), "\n") {
		if r := gjson.Parse(l); r.Get("message").Str == "route" {
			out[r.Get("format").Str] = r
		}
	}
	if len(out) != len(routeNames) {
		t.Fatalf("%d route lines at startup, want %d:\n%s", len(out), len(routeNames), p.logs.String())
	}
	return out
}

// startProbed serves cfg as given: its upstreams are probed at startup.
func startProbed(t *testing.T, cfg Config) *testProxy {
	t.Helper()
	return startProxyConfigured(t, cfg, Deps{})
}

// A plain HTTP server on loopback (a gateway, a test server) is hosted,
// not a local model server; LM Studio and Ollama, found by what they
// answer, are local. The startup says which and why.
func TestUpstreamIsClassifiedByWhatItAnswers(t *testing.T) {
	plain := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(plain.Close)
	lmstudio := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v0/models" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"qwen2.5-7b-instruct","object":"model","type":"llm","publisher":"lmstudio-community","arch":"qwen2","compatibility_type":"gguf","quantization":"Q4_K_M","state":"loaded","max_context_length":32768}]}`))
	}))
	t.Cleanup(lmstudio.Close)
	ollama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/version" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"version":"0.12.3"}`))
	}))
	t.Cleanup(ollama.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String() + "/v1"
	ln.Close() // nothing listens there

	cfg := Config{Routes: map[string]Route{RouteChat: {Upstream: plain.URL + "/v1"}, RouteResponses: {Upstream: lmstudio.URL + "/v1"},
		RouteMessages: {Upstream: ollama.URL + "/v1"}}}
	lines := routeLines(t, startProbed(t, cfg))
	for format, want := range map[string][2]string{RouteChat: {"hosted", "hosted"}, RouteResponses: {"local", "LM Studio"},
		RouteMessages: {"local", "Ollama"}} {
		l := lines[format]
		if l.Get("upstream_is").Str != want[0] || l.Get("found").Str != want[1] || l.Get("because").Str == "" {
			t.Errorf("%s: %s, want %s (%s) with a reason", format, l.Raw, want[0], want[1])
		}
	}
	lines = routeLines(t, startProbed(t, Config{Upstream: gone}))
	if l := lines[RouteChat]; l.Get("upstream_is").Str != "local" || l.Get("found").Str != "unreachable" {
		t.Errorf("an upstream on loopback that does not answer: %s", l.Raw)
	}
	yes := true
	lines = routeLines(t, startProxyWith(t, Config{Upstream: plain.URL + "/v1", LocalUpstream: &yes}, Deps{}))
	if l := lines[RouteChat]; l.Get("upstream_is").Str != "local" || l.Get("because").Str != "local_upstream" {
		t.Errorf("local_upstream: true overrides the probe: %s", l.Raw)
	}
}

// One ctxpress in front of both providers: Claude Code's Messages requests
// go to the Messages route and codex's Responses requests to the
// Responses one, each with its own key, and both conversations are kept.
func TestClaudeCodeAndCodexThroughOneProxy(t *testing.T) {
	anthropic := newMessagesUpstream(t)
	openAI := newResponsesUpstream(t)
	hosted := false
	cfg := compactionConfig("")
	cfg.Upstream, cfg.LocalUpstream = "", &hosted
	cfg.Compaction.Trigger.ThresholdTokens = 1 << 20
	cfg.Routes = map[string]Route{RouteMessages: {Upstream: anthropic.BaseURL()}, RouteResponses: {Upstream: openAI.BaseURL()},
		RouteChat: {Upstream: openAI.BaseURL()}}
	p, st := startWithStore(t, cfg)
	claude := newMessagesAgent(t, p.URL, "claude-session")
	codex := newResponsesAgent(t, p.BaseURL(), "codex-thread")
	for range 3 {
		claude.turn(true)
		codex.turn(true)
	}
	mt, _ := anthropic.turns()
	rt, _ := openAI.turns()
	if len(mt) != 3 || len(rt) != 3 {
		t.Fatalf("the Anthropic fake got %d Messages turns, the OpenAI fake %d Responses turns; want 3 each", len(mt), len(rt))
	}
	for _, g := range mt {
		if g.status != http.StatusOK {
			t.Errorf("Anthropic refused a turn: %d %s", g.status, g.refusal)
		}
	}
	for _, g := range rt {
		if g.status != http.StatusOK || g.path != "/v1/responses" {
			t.Errorf("OpenAI got %s: %d %s", g.path, g.status, g.refusal)
		}
	}
	waitFor(t, func() bool { return p.recorderDrained() }, "the turns recorded")
	recs, err := st.List(state.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	for _, r := range recs {
		ids[r.Key.ID] = r.Requests
	}
	if len(ids) != 2 || ids["claude-session"] != 3 || ids["codex-thread"] != 3 {
		t.Errorf("recorded %v, want Claude Code's and codex's conversations with 3 requests each", ids)
	}
}
