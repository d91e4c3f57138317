package proxy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ctxpress/ctxpress/internal/openaitest"
)

// A client that gives up before the upstream has sent anything (a long
// prompt still being processed, or a non-streamed answer still being
// generated) aborts the upstream request: a local server stops working on
// it. The log says 499, the lease's connection is not reused, and the next
// request is served normally.
func TestClientGoneBeforeHeadersCancelsUpstream(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			up := openaitest.New(t)
			var held atomic.Int32
			sawCancel := make(chan struct{}, 1)
			up.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
				if strings.Contains(r.Header.Get("X-Test"), "hold") {
					held.Add(1)
					select { // "generating" until the proxy hangs up
					case <-r.Context().Done():
						sawCancel <- struct{}{}
					case <-time.After(30 * time.Second):
					}
					return
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
			})
			p := startProxy(t, Config{Upstream: up.BaseURL()})

			body := fmt.Sprintf(`{"model":"m","stream":%v,"messages":[{"role":"user","content":"a long prompt"}]}`, stream)
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("X-Test", "hold")
			errc := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				errc <- err
			}()
			waitFor(t, func() bool { return held.Load() == 1 }, "the request upstream")
			cancel()
			if err := <-errc; err == nil {
				t.Fatal("the cancelled request got an answer")
			}
			select {
			case <-sawCancel:
			case <-time.After(10 * time.Second):
				t.Fatal("the upstream kept working for a client that had gone")
			}
			waitFor(t, func() bool { return strings.Contains(p.logs.String(), `"status":499`) }, "a 499 in the log")

			resp := postChat(t, context.Background(), p.URL, body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("the next request: %d", resp.StatusCode)
			}
			// The aborted lease was dropped, not pooled: the next request
			// dialled a fresh one, which is back in the pool once done.
			waitFor(t, func() bool {
				return p.routes[RouteChat].up.abortable.active.Load() == 0 && p.routes[RouteChat].up.abortable.idleCount() == 1
			},
				"every lease returned, the aborted one dropped")
		})
	}
}

// The most recently returned lease is handed out first (its connection is
// the likeliest to be still open); beyond the limit, get says to use the
// shared pool.
func TestLeasesMostRecentFirst(t *testing.T) {
	ls := newAbortablePool(2, nil, func(fasthttp.DialFunc) *fasthttp.HostClient { return &fasthttp.HostClient{} })
	a, b := ls.get(), ls.get()
	if a == nil || b == nil || a == b {
		t.Fatal("two leases expected")
	}
	if ls.get() != nil {
		t.Fatal("a third lease beyond the limit of 2")
	}
	ls.put(a)
	ls.put(b)
	if got := ls.get(); got != b {
		t.Fatal("not the most recently returned lease")
	}
	b.abort()
	ls.put(b)
	if got := ls.get(); got != a {
		t.Fatal("an aborted lease was pooled again")
	}
}

// Requests waiting at once share one watch of their clients: the one whose
// client leaves is cancelled upstream, and only that one; the others are
// answered when their upstream answers.
func TestClientGoneCancelsOnlyItsOwnRequest(t *testing.T) {
	up := openaitest.New(t)
	const waiting = 4
	var held atomic.Int32
	release := make(chan struct{})
	cancelled := make(chan string, waiting)
	up.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		held.Add(1)
		select {
		case <-r.Context().Done():
			cancelled <- r.Header.Get("X-Test")
			return
		case <-release:
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	})
	p := startProxy(t, Config{Upstream: up.BaseURL()})
	body := `{"model":"m","messages":[{"role":"user","content":"a long prompt"}]}`
	leaving, cancel := context.WithCancel(context.Background())
	defer cancel()
	status := make(chan string, waiting)
	for i := range waiting {
		ctx := context.Background()
		if i == 0 {
			ctx = leaving
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("X-Test", fmt.Sprintf("client-%d", i))
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				status <- fmt.Sprintf("client-%d: %v", i, err)
				return
			}
			resp.Body.Close()
			status <- fmt.Sprintf("client-%d: %d", i, resp.StatusCode)
		}()
	}
	waitFor(t, func() bool { return held.Load() == waiting }, "every request upstream")
	cancel()
	select {
	case who := <-cancelled:
		if who != "client-0" {
			t.Fatalf("the upstream request of %s was cancelled, not the one whose client left", who)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream kept working for a client that had gone")
	}
	if got := <-status; !strings.HasPrefix(got, "client-0: ") || strings.HasSuffix(got, ": 200") {
		t.Fatalf("the client that left: %s", got)
	}
	close(release)
	for range waiting - 1 {
		if got := <-status; !strings.HasSuffix(got, ": 200") {
			t.Errorf("a client that stayed: %s", got)
		}
	}
	select {
	case who := <-cancelled:
		t.Errorf("%s's upstream request was cancelled too", who)
	default:
	}
}

// The shared watch keeps each waiting request apart however they come and
// go: a look aborts the lease of a client that left and no other, and each
// stop reports its own request's fate.
func TestClientWatchTellsEachRequestItsOwnFate(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const n = 6
	left := map[int]bool{1: true, 4: true}
	var served [n]net.Conn
	for i := range n {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if served[i], err = ln.Accept(); err != nil {
			t.Fatal(err)
		}
		defer served[i].Close()
		if left[i] {
			c.Close()
			waitFor(t, func() bool { return peerClosed(served[i]) }, "the close to arrive")
		} else {
			defer c.Close()
		}
	}
	// The test looks itself; the watch's own looks (as often as it likes)
	// change nothing, and its goroutine ends soon after the last stop.
	cw := newClientWatch(10 * time.Millisecond)
	var leases [n]*abortableClient
	var waiters [n]*clientWaiter
	for i := range n {
		leases[i] = &abortableClient{}
		waiters[i] = cw.watch(served[i], leases[i])
	}
	cw.mu.Lock()
	waiting := append([]*clientWaiter(nil), cw.waiting...)
	cw.mu.Unlock()
	for _, w := range waiting {
		w.look()
	}
	for _, i := range []int{3, 0, 5, 1, 4, 2} {
		gone := waiters[i].stop(cw)
		leases[i].mu.Lock()
		aborted := leases[i].aborted
		leases[i].mu.Unlock()
		if gone != left[i] || aborted != left[i] {
			t.Errorf("request %d: gone %v, lease aborted %v; its client left: %v", i, gone, aborted, left[i])
		}
		cw.mu.Lock()
		for at, w := range cw.waiting {
			if w.at != at {
				t.Errorf("after stopping %d: waiter at %d thinks it is at %d", i, at, w.at)
			}
		}
		cw.mu.Unlock()
	}
	if len(cw.waiting) != 0 {
		t.Errorf("%d waiters left after every stop", len(cw.waiting))
	}
}
