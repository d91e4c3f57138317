package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// seenRequest is what an upstream got: where, with which credentials.
type seenRequest struct {
	method, path, query string
	header              http.Header
}

// recordingUpstream answers every request {} (200) and keeps what it got.
type recordingUpstream struct {
	*httptest.Server
	mu  sync.Mutex
	got []seenRequest // guarded by mu
}

func newRecordingUpstream(t *testing.T) *recordingUpstream {
	u := &recordingUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.got = append(u.got, seenRequest{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone()})
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(u.Close)
	return u
}

// last is the latest request the upstream got.
func (u *recordingUpstream) last(t *testing.T) seenRequest {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.got) == 0 {
		t.Fatal("the upstream got no request")
	}
	return u.got[len(u.got)-1]
}

// sendGemini makes one request to the proxy and returns its status and body.
func sendGemini(t *testing.T, method, url string, header map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// One --upstream http://host/v1 for every format (a gateway, a test
// server serving all four): Gemini's paths carry their version and go to
// the host's /v1beta/… (and /v1/…) as sent, query and all; the other
// formats' /v1/X and bare /X go to {upstream}/X as before.
func TestOneUpstreamServesGeminiUnderItsOwnVersion(t *testing.T) {
	up := newRecordingUpstream(t)
	p := startProxy(t, Config{Upstream: up.URL + "/v1"})
	for _, r := range []struct{ method, path, want string }{
		{"POST", "/v1beta/models/gemini-2.5-pro:generateContent", "/v1beta/models/gemini-2.5-pro:generateContent"},
		{"POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"},
		{"POST", "/v1beta/models/gemini-2.5-pro:countTokens", "/v1beta/models/gemini-2.5-pro:countTokens"},
		{"GET", "/v1beta/models?pageSize=50", "/v1beta/models?pageSize=50"},
		{"POST", "/v1/models/gemini-2.5-pro:generateContent", "/v1/models/gemini-2.5-pro:generateContent"},
		{"GET", "/v1/models", "/v1/models"},
		{"POST", "/v1/chat/completions", "/v1/chat/completions"},
		{"POST", "/chat/completions", "/v1/chat/completions"},
	} {
		if status, _ := sendGemini(t, r.method, p.URL+r.path, nil, `{}`); status != http.StatusOK {
			t.Fatalf("%s %s: %d", r.method, r.path, status)
		}
		got := up.last(t)
		if where := got.path + "?" + got.query; strings.TrimSuffix(where, "?") != r.want || got.method != r.method {
			t.Errorf("%s %s went to %s %s, want %s", r.method, r.path, got.method, where, r.want)
		}
	}
}

// Gemini has a route of its own: Google's API by default (the startup
// says so), upstreams.gemini over the one upstream; Gemini's paths go
// there and nowhere else.
func TestGeminiHasItsOwnRoute(t *testing.T) {
	p := startProxyConfigured(t, Config{}, Deps{}) // a provider's API is not probed
	if r := routeLines(t, p)[RouteGemini]; r.Get("upstream").Str != "https://generativelanguage.googleapis.com" || r.Get("found").Str != "provider" {
		t.Errorf("the Gemini route line: %s", r.Raw)
	}
	chat, gemini := newRecordingUpstream(t), newRecordingUpstream(t)
	p = startProxy(t, Config{Upstream: chat.URL + "/v1", Routes: map[string]Route{RouteGemini: {Upstream: gemini.URL}}})
	for _, path := range []string{"/v1beta/models/m:generateContent", "/v1beta/models", "/upload/v1beta/files", "/v1/models/m:countTokens"} {
		sendGemini(t, "POST", p.URL+path, nil, `{}`)
		if got := gemini.last(t); got.path != path {
			t.Errorf("%s went to the Gemini upstream's %s", path, got.path)
		}
	}
	sendGemini(t, "GET", p.URL+"/v1/models", nil, "")
	if got := chat.last(t); got.path != "/v1/models" {
		t.Errorf("/v1/models went to the chat upstream's %s", got.path)
	}
	if len(chat.got) != 1 {
		t.Errorf("the chat upstream got %d requests, want the model list alone", len(chat.got))
	}
}

// upstream_api_key (and a route's api_key) goes where the Gemini client
// put its key: the key= query parameter, or x-goog-api-key; a client that
// sent none gets it as x-goog-api-key. The client's key goes nowhere.
func TestUpstreamKeyReplacesTheGeminiKeyWhereTheClientPutIt(t *testing.T) {
	for _, cfg := range []func(base string) Config{
		func(base string) Config { return Config{Upstream: base, UpstreamAPIKey: "AIza-upstream"} },
		func(base string) Config {
			return Config{Upstream: base, Routes: map[string]Route{RouteGemini: {Upstream: base, APIKey: "AIza-upstream"}}}
		},
	} {
		up := newRecordingUpstream(t)
		p := startProxy(t, cfg(up.URL))
		path := "/v1beta/models/gemini-2.5-flash:streamGenerateContent"

		sendGemini(t, "POST", p.URL+path+"?alt=sse&key=AIza-client", nil, `{}`)
		got := up.last(t)
		if got.query != "alt=sse&key=AIza-upstream" || got.header.Get("X-Goog-Api-Key") != "" {
			t.Errorf("key in the query: upstream got ?%s and x-goog-api-key %q", got.query, got.header.Get("X-Goog-Api-Key"))
		}

		sendGemini(t, "POST", p.URL+path+"?alt=sse", map[string]string{"X-Goog-Api-Key": "AIza-client"}, `{}`)
		got = up.last(t)
		if got.query != "alt=sse" || got.header.Get("X-Goog-Api-Key") != "AIza-upstream" {
			t.Errorf("key in the header: upstream got ?%s and x-goog-api-key %q", got.query, got.header.Get("X-Goog-Api-Key"))
		}

		sendGemini(t, "GET", p.URL+"/v1beta/models", map[string]string{"Authorization": "Bearer client-token"}, "")
		got = up.last(t)
		if got.header.Get("X-Goog-Api-Key") != "AIza-upstream" || got.header.Get("Authorization") != "" {
			t.Errorf("no key: upstream got x-goog-api-key %q, Authorization %q", got.header.Get("X-Goog-Api-Key"), got.header.Get("Authorization"))
		}
	}
}

// Without upstream_api_key, the client's key goes upstream as it sent it.
func TestTheGeminiKeyGoesUpstreamAsSent(t *testing.T) {
	up := newRecordingUpstream(t)
	p := startProxy(t, Config{Upstream: up.URL})
	sendGemini(t, "POST", p.URL+"/v1beta/models/m:generateContent?key=AIza-client", nil, `{}`)
	sendGemini(t, "POST", p.URL+"/v1beta/models/m:generateContent", map[string]string{"X-Goog-Api-Key": "AIza-client"}, `{}`)
	if q, h := up.got[0].query, up.got[1].header.Get("X-Goog-Api-Key"); q != "key=AIza-client" || h != "AIza-client" {
		t.Errorf("upstream got ?%s and x-goog-api-key %q", q, h)
	}
}

// A Gemini key names the client's namespace, whether it came in the
// header or the query (one key, one namespace), apart from every
// Authorization and x-api-key value; Authorization comes first.
func TestGeminiKeyNamesTheNamespace(t *testing.T) {
	m, _ := parseNamespace("")
	ns := func(uri string, header map[string]string) string {
		var req fasthttp.Request
		req.SetRequestURI(uri)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		return string(m.credential(nil, &req))
	}
	path := "http://h/v1beta/models/m:generateContent"
	byHeader := ns(path, map[string]string{"X-Goog-Api-Key": "AIza-1"})
	byQuery := ns(path+"?alt=sse&key=AIza-1", nil)
	if byHeader != byQuery || byHeader == "" {
		t.Errorf("one key, two namespaces: %q and %q", byHeader, byQuery)
	}
	for name, other := range map[string]string{
		"another key":   ns(path+"?key=AIza-2", nil),
		"Authorization": ns(path, map[string]string{"Authorization": "AIza-1"}),
		"x-api-key":     ns(path, map[string]string{"X-Api-Key": "AIza-1"}),
		"no key":        ns(path, nil),
	} {
		if other == byHeader {
			t.Errorf("%s shares the namespace of the Gemini key", name)
		}
	}
	if got := ns(path+"?key=AIza-1", map[string]string{"Authorization": "Bearer t"}); got != "Bearer t" {
		t.Errorf("Authorization first: %q", got)
	}
}

// Gemini keys never reach the log, from the query or the header.
func TestGeminiKeysAreNeverLogged(t *testing.T) {
	up := newRecordingUpstream(t)
	p := startProxy(t, Config{Upstream: up.URL})
	sendGemini(t, "POST", p.URL+"/v1beta/models/m:streamGenerateContent?alt=sse&key=AIza-secret-query", nil, `{}`)
	sendGemini(t, "POST", p.URL+"/v1beta/models/m:generateContent", map[string]string{"X-Goog-Api-Key": "AIza-secret-header"}, `{}`)
	waitFor(t, func() bool { return strings.Count(p.logs.String(), `"message":"request"`) == 2 }, "two access-log lines")
	logs := p.logs.String()
	if strings.Contains(logs, "AIza-secret") {
		t.Errorf("a key in the log:\n%s", logs)
	}
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		if r := gjson.Parse(l); r.Get("message").Str == "request" && !strings.HasPrefix(r.Get("path").Str, "/v1beta/models/m:") {
			t.Errorf("access-log path %q", r.Get("path").Str)
		}
	}
}

// With auth.keys, a Gemini client may present its ctxpress key as
// x-goog-api-key (GEMINI_API_KEY): it passes, and it is not sent upstream.
func TestCtxpressKeyAsGeminiKey(t *testing.T) {
	up := newRecordingUpstream(t)
	p := startProxy(t, Config{Upstream: up.URL, AuthKeys: []string{"cx-key"}, UpstreamAPIKey: "AIza-upstream"})
	if status, body := sendGemini(t, "POST", p.URL+"/v1beta/models/m:generateContent", map[string]string{"X-Goog-Api-Key": "cx-key"}, `{}`); status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	if got := up.last(t).header.Get("X-Goog-Api-Key"); got != "AIza-upstream" {
		t.Errorf("upstream got x-goog-api-key %q", got)
	}
	if status, _ := sendGemini(t, "POST", p.URL+"/v1beta/models/m:generateContent", map[string]string{"X-Goog-Api-Key": "AIza-other"}, `{}`); status != http.StatusUnauthorized {
		t.Errorf("an unknown key: %d", status)
	}
}
