package proxy

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"
)

// refusingUpstream answers request n (from 1) with answers[n-1] and records
// the bodies it got.
type refusingUpstream struct {
	answers []func(w http.ResponseWriter)
	mu      sync.Mutex
	bodies  []string // guarded by mu
}

func (u *refusingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, string(b))
	n := len(u.bodies)
	u.mu.Unlock()
	w.Header().Set("X-Request-Id", strconv.Itoa(n))
	u.answers[min(n, len(u.answers))-1](w)
}

func (u *refusingUpstream) got() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.bodies...)
}

func gzipped(s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return b.Bytes()
}

// answer writes status, body and headers (name, value pairs), sent chunked.
func answer(status int, body []byte, headers ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(status)
		w.(http.Flusher).Flush() // chunked, as an upstream that does not buffer its errors
		w.Write(body)
	}
}

// forwardDirect runs forward for one POST to /v1/chat/completions with
// body against up, and returns the answer the client would get and how
// often the hook ran.
func forwardDirect(t *testing.T, up *refusingUpstream, body string, hook refusalHook) (resp *fasthttp.Response, hookCalls int) {
	t.Helper()
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	s, err := New(unprobed(Config{Upstream: srv.URL + "/v1"}), zerolog.Nop(), Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.routes[RouteChat].up.closeIdle)
	var req fasthttp.Request
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("http://ctxpress/v1/chat/completions")
	req.Header.Set("Accept-Encoding", "gzip")
	req.SetBodyString(body)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, nil, nil)
	o := forwardOpts{api: chatAPI}
	if hook != nil {
		o.retry = func(status int, h *fasthttp.ResponseHeader, b []byte) ([]byte, bool) {
			hookCalls++
			return hook(status, h, b)
		}
	}
	s.forward(&ctx, s.newExchange(&ctx), []byte(body), o)
	resp = &fasthttp.Response{}
	ctx.Response.CopyTo(resp)
	resp.SetBody(ctx.Response.Body())
	return resp, hookCalls
}

// The hook sees the refusal as the upstream sent it, its body decoded; the
// body it returns is sent once; the second answer is the client's, even a
// refusal, and the hook is not asked again.
func TestRefusalHookRetriesOnce(t *testing.T) {
	up := &refusingUpstream{answers: []func(http.ResponseWriter){
		answer(422, gzipped(`{"detail":"first"}`), "Content-Type", "application/json", "Content-Encoding", "gzip"),
		answer(400, []byte(`{"detail":"second"}`), "Content-Type", "application/json"),
	}}
	var seen string
	resp, calls := forwardDirect(t, up, `{"changed":true}`, func(status int, h *fasthttp.ResponseHeader, b []byte) ([]byte, bool) {
		seen = strconv.Itoa(status) + " " + string(h.Peek("X-Request-Id")) + " " + string(b)
		return []byte(`{"changed":false}`), true
	})
	if calls != 1 || seen != `422 1 {"detail":"first"}` {
		t.Fatalf("hook ran %d times and saw %q", calls, seen)
	}
	if got := up.got(); strings.Join(got, " ") != `{"changed":true} {"changed":false}` {
		t.Fatalf("upstream got %q", got)
	}
	if resp.StatusCode() != 400 || string(resp.Header.Peek("X-Request-Id")) != "2" || string(resp.Body()) != `{"detail":"second"}` {
		t.Fatalf("client got %d %q: %s", resp.StatusCode(), resp.Header.Peek("X-Request-Id"), resp.Body())
	}
}

// A refusal the hook declines reaches the client exactly as the upstream
// sent it: status, headers, and the body's bytes, still compressed.
func TestDeclinedRefusalIsRelayedAsSent(t *testing.T) {
	raw := gzipped(`{"error":{"message":"overloaded"}}`)
	up := &refusingUpstream{answers: []func(http.ResponseWriter){
		answer(503, raw, "Content-Type", "application/json", "Content-Encoding", "gzip", "Retry-After", "7"),
	}}
	resp, calls := forwardDirect(t, up, `{"changed":true}`, func(int, *fasthttp.ResponseHeader, []byte) ([]byte, bool) { return nil, false })
	if calls != 1 || len(up.got()) != 1 {
		t.Fatalf("hook ran %d times, upstream got %d requests", calls, len(up.got()))
	}
	if resp.StatusCode() != 503 || string(resp.Header.Peek("Retry-After")) != "7" || string(resp.Header.Peek("Content-Encoding")) != "gzip" ||
		!bytes.Equal(resp.Body(), raw) {
		t.Fatalf("client got %d, headers %s, body %q", resp.StatusCode(), resp.Header.Header(), resp.Body())
	}
}

// The hook is for refusals only: a 2xx answer, or a refusal too large to
// hold, goes to the client without it.
func TestRefusalHookNotAskedAboutSuccessOrHugeAnswers(t *testing.T) {
	huge := bytes.Repeat([]byte("x"), maxRefusalBody+100)
	for name, a := range map[string]func(http.ResponseWriter){
		"2xx":  answer(200, []byte(`{"choices":[]}`), "Content-Type", "application/json"),
		"huge": answer(500, huge, "Content-Type", "text/plain"),
	} {
		t.Run(name, func(t *testing.T) {
			up := &refusingUpstream{answers: []func(http.ResponseWriter){a}}
			resp, calls := forwardDirect(t, up, `{}`, func(int, *fasthttp.ResponseHeader, []byte) ([]byte, bool) { return []byte(`{}`), true })
			if calls != 0 || len(up.got()) != 1 {
				t.Fatalf("hook ran %d times, upstream got %d requests", calls, len(up.got()))
			}
			if name == "huge" && (resp.StatusCode() != 500 || !bytes.Equal(resp.Body(), huge)) {
				t.Fatalf("client got %d and %d bytes", resp.StatusCode(), len(resp.Body()))
			}
		})
	}
}
