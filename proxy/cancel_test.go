package proxy

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
			waitFor(t, func() bool { return p.up.leases.active.Load() == 0 && len(p.up.leases.idle) == 1 },
				"every lease returned, the aborted one dropped")
		})
	}
}
