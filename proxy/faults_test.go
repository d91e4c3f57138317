package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/internal/upstreamerr"
	"github.com/ctxpress/ctxpress/state"
)

// Faults of the upstream and of the store, each on loopback. Refused
// connections, a reset mid-body, a stall before headers and a summariser
// answering garbage or nothing are in errors_test.go, stream_test.go and
// compaction_test.go; this file has the rest.

// resetConn ends a hijacked connection with a TCP RST rather than a FIN, as
// a crashed upstream or a middlebox does.
func resetConn(t *testing.T, w http.ResponseWriter) {
	conn, bufrw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Error(err)
		return
	}
	_ = bufrw.Flush()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}

// An upstream reset in the middle of a stream ends the client's stream as
// broken (the client sees an error, not a clean end), and the cut turn is
// not recorded.
func TestUpstreamResetMidStream(t *testing.T) {
	up := openaitest.New(t)
	// The reset waits until the client has the first events: a RST can
	// make the kernel drop data not yet read, which would test the kernel.
	clientHasEvents := make(chan struct{})
	up.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for i := 0; i < 3; i++ {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"}}]}\n\n", i)
			w.(http.Flusher).Flush()
		}
		select {
		case <-clientHasEvents:
		case <-time.After(5 * time.Second):
		}
		resetConn(t, w)
	})
	deps, st := chatDeps(t)
	p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
	within(t, 10*time.Second, "reset stream", func() {
		req, _ := http.NewRequest("POST", p.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"go"}]}`))
		req.Header.Set("X-Session-ID", "reset-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		first, _ := br.ReadString('\n')
		close(clientHasEvents)
		rest, err := io.ReadAll(br)
		if err == nil {
			t.Errorf("a reset stream ended cleanly: the client cannot tell it was cut (%q)", rest)
		}
		if !strings.Contains(first, "w0 ") {
			t.Errorf("events before the reset were lost: %q", first)
		}
	})
	waitFor(t, func() bool { return strings.Contains(p.logs.String(), `"stream":true`) }, "the access log line")
	if recs, _ := st.List(state.ListOptions{}); len(recs) != 0 {
		t.Fatalf("a cut turn was recorded: %+v", recs[0])
	}
}

// An upstream that sends its headers and then stalls: a whole chat answer is
// 504 after upstream_timeout; a streamed pass-through body is cut, so the
// client sees a short body as an error, never as complete.
func TestUpstreamHeadersThenStall(t *testing.T) {
	up := openaitest.New(t)
	release := make(chan struct{})
	defer close(release)
	stall := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(200)
		io.WriteString(w, `{"id":"chatcmpl-`)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	up.Handle("/v1/chat/completions", stall)
	up.Handle("/v1/models", stall)
	deps, _ := chatDeps(t)
	p := startProxyWith(t, Config{Upstream: up.BaseURL(), UpstreamTimeout: 300 * time.Millisecond}, deps)
	within(t, 10*time.Second, "stalled chat answer", func() {
		resp := postChat(t, context.Background(), p.URL, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != http.StatusGatewayTimeout {
			t.Errorf("status %d", resp.StatusCode)
			resp.Body.Close()
			return
		}
		if e := decodeError(t, resp); e.Error.Code != upstreamerr.CodeTimeout {
			t.Errorf("code %q", e.Error.Code)
		}
	})
	within(t, 10*time.Second, "stalled pass-through body", func() {
		resp, err := http.Get(p.URL + "/v1/models")
		if err != nil {
			return // cut before the headers: also not a silent short answer
		}
		defer resp.Body.Close()
		if got, err := io.ReadAll(resp.Body); err == nil {
			t.Errorf("a stalled body ended cleanly: %d %q", resp.StatusCode, got)
		}
	})
}

// An upstream's own error (429, 500, 503) reaches the client exactly as the
// upstream sent it, streamed request or not, through the whole chat path;
// the failed turn is not recorded.
func TestUpstreamErrorsPassThroughTheChatPath(t *testing.T) {
	for _, status := range []int{429, 500, 503} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/stream=%v", status, stream), func(t *testing.T) {
				up := openaitest.New(t)
				body := fmt.Sprintf(`{"error":{"message":"upstream says %d","type":"server_error","param":null,"code":"e%d"}}`, status, status)
				up.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("X-Request-Id", "req-123")
					w.Header().Set("Retry-After", "3")
					w.WriteHeader(status)
					io.WriteString(w, body)
				})
				deps, st := chatDeps(t)
				p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
				req := fmt.Sprintf(`{"model":"gpt-4o","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream)
				resp := postChat(t, context.Background(), p.URL, req)
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != status || string(got) != body ||
					resp.Header.Get("X-Request-Id") != "req-123" || resp.Header.Get("Retry-After") != "3" {
					t.Fatalf("got %d %q %v", resp.StatusCode, got, resp.Header)
				}
				waitFor(t, func() bool { return strings.Contains(p.logs.String(), fmt.Sprintf(`"status":%d`, status)) }, "the access log line")
				if recs, _ := st.List(state.ListOptions{}); len(recs) != 0 {
					t.Fatal("a failed turn was recorded")
				}
			})
		}
	}
}

// failingStore is a Store whose writes fail, as on a full disk; reads can
// be made to fail too.
type failingStore struct {
	state.Store
	failReads bool
	writes    atomic.Int64
}

var errDiskFull = errors.New("write /var/lib/ctxpress/ctxpress.db: no space left on device")

func (f *failingStore) Update(state.Key, func(*state.Record) error) (state.Record, error) {
	f.writes.Add(1)
	return state.Record{}, errDiskFull
}

func (f *failingStore) UpdateMany(muts []state.Mutation) ([]state.Record, []error, error) {
	f.writes.Add(1)
	return make([]state.Record, len(muts)), make([]error, len(muts)), errDiskFull
}

func (f *failingStore) Get(k state.Key) (state.Record, bool, error) {
	if f.failReads {
		return state.Record{}, false, errDiskFull
	}
	return f.Store.Get(k)
}

// warnLines returns the warning lines of a JSON log.
func warnLines(logs string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if gjson.Get(l, "level").String() == "warn" {
			out = append(out, l)
		}
	}
	return out
}

// When the store cannot be written (a full disk, a failing Store, a
// read-only db file), every request is still answered, and the failure is
// logged once per interval, not once per request, even for a conversation
// far over its trigger.
func TestStoreWriteFailure(t *testing.T) {
	readOnly := func(t *testing.T) state.Store {
		path := filepath.Join(t.TempDir(), "ro.db")
		st, err := state.OpenBolt(path, state.BoltOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		ro, err := state.OpenBolt(path, state.BoltOptions{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ro.Close() })
		return ro
	}
	for name, open := range map[string]func(t *testing.T) state.Store{
		"writes fail":        func(t *testing.T) state.Store { return &failingStore{Store: state.NewMemory()} },
		"reads fail too":     func(t *testing.T) state.Store { return &failingStore{Store: state.NewMemory(), failReads: true} },
		"read-only bbolt db": readOnly,
	} {
		t.Run(name, func(t *testing.T) {
			up := openaitest.New(t)
			st := open(t)
			cfg := compactionConfig(up.BaseURL())
			cfg.Compaction.Precompact = false
			// The clock stands still: however slow the machine, the turns
			// fall within one warning interval and one store-retry pause.
			cfg.Clock = newTestClock().Now
			p := startProxyWith(t, cfg, Deps{Pipeline: pipelineForTest(), Store: st})
			a := newAgent(t, p.BaseURL(), "full-disk")
			const turns = 30 // well past the trigger: compaction is attempted
			for i := 0; i < turns; i++ {
				a.turn(i%2 == 0)
			}
			// Shutdown returns once the recorder has written (and failed)
			// every queued turn.
			if err := p.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(p.logs.String(), `"message":"request"`); n != turns {
				t.Fatalf("%d requests logged, want %d", n, turns)
			}
			warns := warnLines(p.logs.String())
			if len(warns) == 0 {
				t.Fatal("the store failure was never reported")
			}
			// One line per kind of failure and interval: a handful, whatever
			// the number of requests.
			if len(warns) > 4 {
				t.Fatalf("%d warnings for %d requests; want the failure logged once per interval:\n%s",
					len(warns), turns, strings.Join(warns, "\n"))
			}
			_, summaries := up.ChatRequests()
			if len(summaries) > 1 {
				t.Fatalf("%d summary calls: a store that cannot keep a summary must not cost one per turn", len(summaries))
			}
		})
	}
}

// A client that disconnects while its request waits on a compaction: the
// compaction finishes (its summary is kept for the next turn) or is
// abandoned, the server keeps answering, and no goroutine is left behind.
func TestClientGoneMidCompaction(t *testing.T) {
	up := openaitest.New(t)
	inSummary := make(chan struct{}, 1)
	release := make(chan struct{})
	up.Handle(openaitest.SummaryPath, func(w http.ResponseWriter, r *http.Request) {
		inSummary <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"## Goal\nx\n\n## Active Task\nkeep going"},"finish_reason":"stop"}]}`)
	})
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Trigger.ThresholdTokens = 100000 // the forced compaction only
	cfg.Compaction.Summarizer.MaxTokens = 500       // so a short history is worth a summary
	p, st := startWithStore(t, cfg)
	a := newAgent(t, p.BaseURL(), "gone")
	for i := 0; i < 10; i++ {
		a.turn(false)
	}

	body := fmt.Sprintf(`{"model":"gpt-4o","messages":%s}`, historyJSON(t, a))
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-agent\r\nX-Session-ID: gone\r\n"+
		"X-Ctxpress-Compact: force\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	select {
	case <-inSummary:
	case <-time.After(10 * time.Second):
		t.Fatal("the compaction never called the summariser")
	}
	conn.Close() // the client gives up while the summary is being written
	close(release)

	key := state.NewKey([]byte("Bearer sk-agent"), "gone")
	waitFor(t, func() bool { rec, _, _ := st.Get(key); return len(rec.Branches) == 1 }, "the summary kept")
	if h := a.turn(false); h.Get(HeaderCompacted) == "true" {
		t.Fatal("the next turn compacted again instead of using the kept summary")
	}
	chats, _ := up.ChatRequests()
	if !strings.Contains(string(chats[len(chats)-1].Body), "<conversation_summary>") {
		t.Fatal("the next turn did not get the summary")
	}
	noStrayGoroutines(t)
}

// historyJSON renders the agent's history as the client would send it.
func historyJSON(t *testing.T, a *agent) string {
	t.Helper()
	var b strings.Builder
	w := bufio.NewWriter(&b)
	w.WriteString("[")
	for i, m := range a.history {
		if i > 0 {
			w.WriteString(",")
		}
		raw, err := m.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		w.Write(raw)
	}
	w.WriteString("]")
	w.Flush()
	return b.String()
}

const hiChat = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`

// An https:// upstream that speaks plain HTTP (a common slip with local
// servers) is a 502 that says so, on the chat path and the pass-through.
func TestUpstreamWithoutTLS(t *testing.T) {
	up := openaitest.New(t)
	p := startProxy(t, Config{Upstream: strings.Replace(up.BaseURL(), "http://", "https://", 1)})
	for _, path := range []string{"/v1/chat/completions", "/v1/embeddings"} {
		status, b, _ := send(t, "POST", p.URL+path, hiChat, nil)
		if status != http.StatusBadGateway || !strings.Contains(b, "does not speak TLS") {
			t.Fatalf("%s: %d %s", path, status, b)
		}
	}
}

// Upstreams close idle keep-alive connections (llama-server, LM Studio,
// nginx: a few seconds). A request that lands on a pooled connection the
// upstream has just closed is retried on a fresh one, never answered 502:
// on the chat path (its own leased connections) and the pass-through.
func TestUpstreamClosesIdleConnections(t *testing.T) {
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	}))
	up.Start()
	defer up.Close()
	p := startProxy(t, Config{Upstream: up.URL + "/v1"})
	for i := range 6 {
		for _, path := range []string{"/v1/chat/completions", "/v1/embeddings"} {
			if status, b, _ := send(t, "POST", p.URL+path, hiChat, nil); status != 200 {
				t.Fatalf("request %d to %s after the upstream closed its idle connection: %d %s", i, path, status, b)
			}
		}
		// The upstream closes the idle connections, as its keep-alive
		// timeout would: returns once they are closed.
		up.CloseClientConnections()
	}
}

// A common first-run slip: --upstream http://localhost:1234 where the
// server's OpenAI API is under /v1. The upstream's 404 passes through as
// sent, and the log says once what to set instead.
func TestUpstreamWithoutV1IsHinted(t *testing.T) {
	up := openaitest.New(t)
	up.Handle("/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":"Unexpected endpoint or method. (POST /chat/completions)"}`)
	})
	p := startProxy(t, Config{Upstream: up.URL})
	for range 3 {
		status, b, _ := send(t, "POST", p.URL+"/v1/chat/completions", hiChat, nil)
		if status != http.StatusNotFound || !strings.Contains(b, "Unexpected endpoint") {
			t.Fatalf("the upstream's 404 did not pass through: %d %s", status, b)
		}
	}
	waitFor(t, func() bool { return strings.Contains(p.logs.String(), `"try":"`+up.URL+`/v1"`) }, "the /v1 hint")
	if n := strings.Count(p.logs.String(), "most likely under /v1"); n != 1 {
		t.Fatalf("the hint was logged %d times, want once", n)
	}
	// With a base path configured, an upstream's 404 is its own business.
	p2 := startProxy(t, Config{Upstream: up.URL + "/api"})
	send(t, "POST", p2.URL+"/v1/chat/completions", hiChat, nil)
	waitFor(t, func() bool { return strings.Contains(p2.logs.String(), `"status":404`) }, "the 404 logged")
	if strings.Contains(p2.logs.String(), "most likely under /v1") {
		t.Fatal("hinted /v1 for an upstream with a base path")
	}
}
