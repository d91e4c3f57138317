package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/state"
)

// With auth.keys, a request without one of the keys is refused in the
// OpenAI shape and never forwarded; with one it is, carrying the upstream
// key and never the client's.
func TestAuthKeysGateEveryForwardedPath(t *testing.T) {
	up := openaitest.New(t)
	deps, _ := chatDeps(t)
	p := startProxyWith(t, Config{Upstream: up.BaseURL(), UpstreamAPIKey: "sk-provider-secret", AuthKeys: []string{"cx-alpha", "cx-beta"}}, deps)
	chat := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name    string
		method  string
		path    string
		headers map[string]string
	}{
		{"no key", "POST", "/v1/chat/completions", nil},
		{"wrong bearer", "POST", "/v1/chat/completions", map[string]string{"Authorization": "Bearer cx-gamma"}},
		{"prefix of a key", "POST", "/v1/chat/completions", map[string]string{"Authorization": "Bearer cx-alph"}},
		{"key without scheme", "POST", "/v1/chat/completions", map[string]string{"Authorization": "cx-alpha"}},
		{"wrong header key", "POST", "/v1/chat/completions", map[string]string{HeaderClientKey: "nope", "Authorization": "Bearer cx-alpha"}},
		{"empty header key", "GET", "/v1/models", map[string]string{HeaderClientKey: ""}},
		{"models without key", "GET", "/v1/models", nil},
		{"bare path without key", "POST", "/chat/completions", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, h := send(t, tc.method, p.URL+tc.path, chat, tc.headers)
			if status != http.StatusUnauthorized || !strings.Contains(body, `"code":"invalid_api_key"`) ||
				!strings.HasPrefix(gjson.Get(body, "error.message").String(), "ctxpress: ") || h.Get("WWW-Authenticate") == "" {
				t.Fatalf("got %d %s", status, body)
			}
		})
	}
	if n := len(up.Requests()); n != 0 {
		t.Fatalf("%d refused requests reached the upstream", n)
	}

	for _, tc := range []struct {
		name    string
		headers map[string]string
	}{
		{"bearer", map[string]string{"Authorization": "Bearer cx-alpha"}},
		{"bearer lower-case scheme", map[string]string{"Authorization": "bearer cx-beta"}},
		{"ctxpress header", map[string]string{HeaderClientKey: "cx-beta"}},
		{"ctxpress header beside a client authorization", map[string]string{HeaderClientKey: "cx-alpha", "Authorization": "Bearer sk-someone-else"}},
	} {
		t.Run("accepted "+tc.name, func(t *testing.T) {
			before := len(up.Requests())
			status, body, _ := send(t, "POST", p.URL+"/v1/chat/completions", chat, tc.headers)
			if status != 200 || len(up.Requests()) != before+1 {
				t.Fatalf("got %d %s", status, body)
			}
			got := up.Last(t)
			if got.Header.Get("Authorization") != "Bearer sk-provider-secret" {
				t.Fatalf("upstream Authorization = %q", got.Header.Get("Authorization"))
			}
			for name, vals := range got.Header {
				for _, v := range vals {
					if strings.Contains(v, "cx-alpha") || strings.Contains(v, "cx-beta") {
						t.Fatalf("the client's ctxpress key went upstream in %s", name)
					}
				}
			}
		})
	}
	// healthz stays open: orchestrators probe it without credentials.
	if status, _, _ := send(t, "GET", p.URL+"/ctxpress/healthz", "", nil); status != 200 {
		t.Fatalf("healthz with auth.keys: %d", status)
	}
}

// Without upstream_api_key (a local upstream), a key sent as Authorization
// is still removed: a ctxpress key is not a provider key.
func TestAuthKeyNotForwardedWithoutUpstreamKey(t *testing.T) {
	up := openaitest.New(t)
	p := startProxy(t, Config{Upstream: up.BaseURL(), AuthKeys: []string{"cx-alpha"}})
	if status, body, _ := send(t, "GET", p.URL+"/v1/models", "", map[string]string{"Authorization": "Bearer cx-alpha"}); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	if got := up.Last(t).Header.Get("Authorization"); got != "" {
		t.Fatalf("upstream got Authorization %q", got)
	}
	// Without auth.keys the header is still ctxpress's own and stays here.
	up2 := openaitest.New(t)
	p2 := startProxy(t, Config{Upstream: up2.BaseURL()})
	send(t, "GET", p2.URL+"/v1/models", "", map[string]string{HeaderClientKey: "whatever", "Authorization": "Bearer sk-client"})
	if h := up2.Last(t).Header; h.Get(HeaderClientKey) != "" || h.Get("Authorization") != "Bearer sk-client" {
		t.Fatalf("without auth.keys: upstream headers %v", h)
	}
}

// Two client keys with the same conversation id never share a record; one
// key sent either way is one namespace.
func TestAuthKeysIsolateConversations(t *testing.T) {
	up := openaitest.New(t)
	deps, st := chatDeps(t)
	p := startProxyWith(t, Config{Upstream: up.BaseURL(), AuthKeys: []string{"cx-alpha", "cx-beta"}}, deps)
	chat := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	for _, h := range []map[string]string{
		{"Authorization": "Bearer cx-alpha", "X-Session-ID": "shared"},
		{HeaderClientKey: "cx-alpha", "X-Session-ID": "shared"},
		{"Authorization": "Bearer cx-beta", "X-Session-ID": "shared"},
	} {
		if status, body, _ := send(t, "POST", p.URL+"/v1/chat/completions", chat, h); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
	}
	alpha, beta := state.NewKey([]byte("Bearer cx-alpha"), "shared"), state.NewKey([]byte("Bearer cx-beta"), "shared")
	waitFor(t, func() bool {
		a, _, _ := st.Get(alpha)
		b, _, _ := st.Get(beta)
		return a.Requests == 2 && b.Requests == 1
	}, "alpha's two turns in one record and beta's one in another")
	recs, err := st.List(state.ListOptions{ID: "shared"})
	if err != nil || len(recs) != 2 {
		t.Fatalf("records for the shared id: %d, %v", len(recs), err)
	}
}

// Admin endpoints: with admin_token set they need it, from any peer; without
// one they answer loopback peers only. healthz is always open.
func TestAdminEndpointsNeedTokenOrLoopback(t *testing.T) {
	up := openaitest.New(t)
	deps, _ := chatDeps(t)
	p := startProxyWith(t, Config{Upstream: up.BaseURL(), AdminToken: "adm-secret"}, deps)
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer wrong", http.StatusUnauthorized},
		{"Bearer adm-secret", http.StatusNotFound},
	} {
		status, body, _ := send(t, "POST", p.URL+"/ctxpress/conversations/nobody/compact", "", map[string]string{"Authorization": tc.auth})
		if status != tc.want {
			t.Errorf("Authorization %q: %d %s, want %d", tc.auth, status, body, tc.want)
		}
	}

	// The peer address is what decides without a token: drive the handler
	// with a request from a non-loopback address.
	open, err := New(unprobed(Config{Upstream: up.BaseURL()}), zerolog.Nop(), deps)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		peer, path string
		want       int
	}{
		{"192.0.2.7:4000", "/ctxpress/conversations/nobody/compact", http.StatusUnauthorized},
		{"[2001:db8::1]:4000", "/ctxpress/events", http.StatusUnauthorized},
		{"192.0.2.7:4000", "/ctxpress/healthz", http.StatusOK},
		{"127.0.0.1:4000", "/ctxpress/conversations/nobody/compact", http.StatusNotFound},
		{"[::1]:4000", "/ctxpress/conversations/nobody/compact", http.StatusNotFound},
	} {
		var req fasthttp.Request
		req.Header.SetMethod("POST")
		if strings.HasSuffix(tc.path, "healthz") {
			req.Header.SetMethod("GET")
		}
		req.SetRequestURI(tc.path)
		addr, _ := net.ResolveTCPAddr("tcp", tc.peer)
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, addr, nil)
		open.Handler()(&ctx)
		if got := ctx.Response.StatusCode(); got != tc.want {
			t.Errorf("%s from %s: %d, want %d", tc.path, tc.peer, got, tc.want)
		}
	}
	if n := len(up.Requests()); n != 0 {
		t.Fatalf("admin requests reached the upstream: %d", n)
	}
}

// A conversation id that is too long or not printable is ignored with a
// warning: the turn is filed under the fingerprint, never under that id.
func TestBadConversationIDIsIgnored(t *testing.T) {
	up := openaitest.New(t)
	deps, st := chatDeps(t)
	p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
	bads := []string{strings.Repeat("x", 257), "\xff\xfe", "zero\u200bwidth", "bidi\u202eid"}
	for i, bad := range bads {
		body := fmt.Sprintf(`{"model":"gpt-4o","messages":[{"role":"user","content":"question %d"}]}`, i)
		// Raw bytes on the wire: Go's client refuses control characters in
		// header values, a hostile client does not.
		conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Session-ID: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", bad, len(body), body)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("id %q: %v", bad, err)
		}
		io.Copy(io.Discard, resp.Body)
		conn.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("id %q: status %d", bad, resp.StatusCode)
		}
		if got := resp.Header.Get(HeaderConversation); !strings.HasPrefix(got, "fp-") {
			t.Fatalf("id %q: conversation %q, want the fingerprint", bad, got)
		}
	}
	waitFor(t, func() bool { return strings.Count(p.logs.String(), "ignored a conversation id") == len(bads) }, "one warning per bad id")
	waitFor(t, func() bool { recs, _ := st.List(state.ListOptions{}); return len(recs) == len(bads) }, "one fingerprint record per request")
	// A control character never gets that far: the HTTP parser refuses
	// the request in the OpenAI error shape.
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Session-ID: bad\x01id\r\nContent-Length: 2\r\n\r\n{}")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("control character in the id: %v %v", resp, err)
	}
	decodeError(t, resp)
	recs, _ := st.List(state.ListOptions{})
	for _, r := range recs {
		if !strings.HasPrefix(r.Key.ID, "fp-") {
			t.Fatalf("a record is keyed by a rejected id: %q", r.Key.ID)
		}
	}
}

// The secrets an agent's tools print. Each value is what must not appear;
// Redact keeps the surrounding words.
var plantedSecrets = []struct{ text, secret string }{
	{"OPENAI_API_KEY=sk-proj-Zq9Xw3Lm5Np7Rt2Vb4Kc6Hd8Jf1Gs0Ae3Yu5Io7P", "Zq9Xw3Lm5Np7Rt2Vb4Kc6Hd8Jf1Gs0Ae3Yu5Io7P"},
	{"aws configure: AKIAQ3EGRTXKXN7WPZ2M", "AKIAQ3EGRTXKXN7WPZ2M"},
	{"aws_secret_access_key = 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", "wJalrXUtnFEMIK7MDENGbPxRfiCYzq8x3kPLm2Q9"},
	{"curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZ2VudCJ9.c2lnbmF0dXJlMTIz' https://api.internal", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZ2VudCJ9"},
	{"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACDm3nV5vX2wQ9Hk8JpLr4Tz7aYc1Fg6Ue0Sb5Md2Wn8ggAAAJgq\n-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"},
	{"git remote: https://ghp_R7tY2uI9oP4aS6dF8gH1jK3lZ5xC0vB2nM4q@github.com/org/repo", "R7tY2uI9oP4aS6dF8gH1jK3lZ5xC0vB2nM4q"},
	{"DATABASE_PASSWORD=Tr0ub4dor-and-3-horses", "Tr0ub4dor-and-3-horses"},
}

func secretToolOutput(turn int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "$ ./deploy.sh --verbose (turn %d)\n", turn)
	for _, s := range plantedSecrets {
		b.WriteString(s.text + "\n")
	}
	b.WriteString("deploy: done\n")
	return b.String()
}

// Secrets planted in tool outputs (and echoed back by a careless summary
// model) reach neither a transcript summary request nor any byte of the
// bbolt file, over two compactions (the second an iterative update). The
// transcript is what every summariser but the conversation's own upstream
// and model gets; that one is sent the history it already received.
func TestSecretsNeverReachSummariesOrTheDB(t *testing.T) {
	up := openaitest.New(t)
	var echo strings.Builder
	echo.WriteString("## Goal\nDeploy.\n\n## Critical Context\n")
	for _, s := range plantedSecrets {
		echo.WriteString("- " + s.text + "\n")
	}
	echo.WriteString("\n## Active Task\nFinish the deploy.")
	up.Summary = echo.String()

	dbPath := filepath.Join(t.TempDir(), "ctxpress.db")
	st := openStoreAt(t, dbPath)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Trigger.ThresholdTokens = 100000 // manual compactions only
	cfg.Compaction.Summarizer.MaxTokens = 500       // so a short history is worth a summary
	cfg.Compaction.Summarizer.Model = "gpt-4o-mini" // another model: a transcript
	p := startProxyWith(t, cfg, Deps{Pipeline: pipelineForTest(), Store: st})
	a := newAgent(t, p.BaseURL(), "leaky")
	a.history = append(a.history, openai.UserMessage("Deploy with my key sk-proj-Zq9Xw3Lm5Np7Rt2Vb4Kc6Hd8Jf1Gs0Ae3Yu5Io7P please"))
	for round := 0; round < 2; round++ {
		for i := 0; i < 8; i++ {
			a.turn(i%2 == 0)
			a.history[len(a.history)-1] = openai.ToolMessage(secretToolOutput(a.turns), fmt.Sprintf("call_%d", a.turns))
		}
		if h := a.turn(false, option.WithHeader(HeaderCompact, "force")); h.Get(HeaderCompacted) != "true" {
			t.Fatalf("round %d: the forced compaction did not happen", round)
		}
	}
	a.turn(false)

	chats, summaries := up.ChatRequests()
	if len(summaries) != 2 {
		t.Fatalf("%d summary requests, want 2", len(summaries))
	}
	if !strings.Contains(string(summaries[1].Body), "PREVIOUS SUMMARY:") {
		t.Fatal("the second compaction was not an iterative update")
	}
	// The test is only meaningful if the secrets really were in the
	// client's history the proxy forwarded.
	if !strings.Contains(string(chats[len(chats)-2].Body), plantedSecrets[0].secret) {
		t.Fatal("the planted secrets never reached ctxpress")
	}
	for i, r := range summaries {
		for _, s := range plantedSecrets {
			if strings.Contains(string(r.Body), s.secret) {
				t.Errorf("summary request %d holds %q", i, s.secret)
			}
		}
	}
	if !strings.Contains(string(summaries[0].Body), "[REDACTED]") {
		t.Error("no redaction marker in the summary request")
	}
	last := string(chats[len(chats)-1].Body)
	if !strings.Contains(last, "<conversation_summary>") {
		t.Fatal("the last turn has no summary")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "Finish the deploy.") {
		t.Fatal("the db holds no summary: the check below would prove nothing")
	}
	for _, s := range plantedSecrets {
		if strings.Contains(string(raw), s.secret) {
			t.Errorf("the bbolt file holds %q", s.secret)
		}
	}
}

// Profiles are off unless debug.pprof is set, and then behind the admin
// token like every admin endpoint.
func TestPprofOptInBehindAdminToken(t *testing.T) {
	up := openaitest.New(t)
	deps, _ := chatDeps(t)
	off := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
	if status, _, _ := send(t, "GET", off.URL+"/ctxpress/debug/pprof/heap", "", nil); status != http.StatusNotFound {
		t.Fatalf("pprof off: %d", status)
	}
	deps2, _ := chatDeps(t)
	on := startProxyWith(t, Config{Upstream: up.BaseURL(), AdminToken: "adm", Pprof: true}, deps2)
	if status, _, _ := send(t, "GET", on.URL+"/ctxpress/debug/pprof/heap", "", nil); status != http.StatusUnauthorized {
		t.Fatalf("pprof without the admin token: %d", status)
	}
	status, body, _ := send(t, "GET", on.URL+"/ctxpress/debug/pprof/heap?debug=1", "", map[string]string{"Authorization": "Bearer adm"})
	if status != http.StatusOK || !strings.Contains(body, "heap profile") {
		t.Fatalf("heap profile: %d %.200s", status, body)
	}
	status, body, _ = send(t, "GET", on.URL+"/ctxpress/debug/pprof/", "", map[string]string{"Authorization": "Bearer adm"})
	if status != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("pprof index: %d %.200s", status, body)
	}
}
