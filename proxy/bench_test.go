package proxy

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// startFastUpstream serves a fixed chat completion from fasthttp on
// 127.0.0.1, fast enough that the proxy, not the upstream, is measured.
func startFastUpstream(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	answer := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":250,"completion_tokens":1,"total_tokens":251}}`)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.SetBody(answer)
	}}
	go srv.Serve(ln)
	tb.Cleanup(func() { _ = srv.Shutdown() })
	return "http://" + ln.Addr().String() + "/v1"
}

func chatBody(size int) []byte {
	prefix := `{"model":"gpt-4o","messages":[{"role":"user","content":"`
	suffix := `"}]}`
	return []byte(prefix + strings.Repeat("a", max(size-len(prefix)-len(suffix), 0)) + suffix)
}

type loadResult struct {
	rps      float64
	p50, p99 time.Duration
}

// runLoad posts body to url from conc workers for d and measures throughput
// and per-request latency.
func runLoad(tb testing.TB, url string, body []byte, conc int, d time.Duration) loadResult {
	client := &fasthttp.Client{MaxConnsPerHost: conc * 2, ReadBufferSize: 64 << 10}
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			var mine []time.Duration
			for time.Now().Before(stop) {
				req.SetRequestURI(url + "/chat/completions")
				req.Header.SetMethod(fasthttp.MethodPost)
				req.Header.SetContentType("application/json")
				req.SetBodyRaw(body)
				t0 := time.Now()
				if err := client.Do(req, resp); err != nil || resp.StatusCode() != 200 {
					tb.Errorf("load request: %v %d", err, resp.StatusCode())
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	if len(lat) == 0 {
		tb.Fatal("no request completed")
	}
	return loadResult{
		rps: float64(len(lat)) / elapsed.Seconds(),
		p50: lat[len(lat)/2],
		p99: lat[len(lat)*99/100],
	}
}

// BenchmarkOverhead compares a fast in-process upstream reached directly and
// through ctxpress: throughput with 16 concurrent clients, latency with one.
// Run: go test -run '^$' -bench Overhead -benchtime 1x ./proxy/
func BenchmarkOverhead(b *testing.B) {
	const phase = 2 * time.Second
	for _, size := range []int{1 << 10, 200 << 10} {
		b.Run(fmt.Sprintf("body=%dKiB", size>>10), func(b *testing.B) {
			upstream := startFastUpstream(b)
			p := startProxy(b, Config{Upstream: upstream})
			body := chatBody(size)
			for range b.N {
				runLoad(b, p.BaseURL(), body, 4, 200*time.Millisecond) // warm pools
				dT := runLoad(b, upstream, body, 16, phase)
				pT := runLoad(b, p.BaseURL(), body, 16, phase)
				dL := runLoad(b, upstream, body, 1, phase)
				pL := runLoad(b, p.BaseURL(), body, 1, phase)
				b.ReportMetric(dT.rps, "direct-req/s")
				b.ReportMetric(pT.rps, "proxy-req/s")
				b.ReportMetric(pT.rps/dT.rps, "ratio")
				b.ReportMetric(float64(pL.p50-dL.p50)/1e3, "added-p50-µs")
				b.ReportMetric(float64(pL.p99-dL.p99)/1e3, "added-p99-µs")
				b.Logf("%d KiB: direct %.0f req/s, through %.0f req/s (%.2fx); latency p50 %v -> %v, p99 %v -> %v",
					size>>10, dT.rps, pT.rps, pT.rps/dT.rps, dL.p50, pL.p50, dL.p99, pL.p99)
			}
		})
	}
}
