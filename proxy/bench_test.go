package proxy

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ctxpress/ctxpress/compaction"
	"github.com/ctxpress/ctxpress/rewrite"
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

// BenchmarkChatTurn is the chat path's cost per request: identified turns
// (X-Session-ID over 64 conversations, as deploy/bench-passthrough.sh
// sends them) through the real pipeline, recorder and a bbolt store, to
// a fast upstream on 127.0.0.1, with compaction on as by default. Its
// allocs/op and B/op count the whole process (client and upstream too),
// the same in every version, so compare them between versions.
// Run: go test -run '^$' -bench ChatTurn -benchmem ./proxy/
func BenchmarkChatTurn(b *testing.B) {
	upstream := startFastUpstream(b)
	deps, _ := chatDeps(b)
	cfg := Config{Upstream: upstream, Compaction: compaction.Config{Enabled: true,
		Trigger:     rewrite.TriggerConfig{ThresholdRatio: rewrite.DefaultThresholdRatio, DefaultContextWindow: rewrite.DefaultContextWindow},
		TargetRatio: DefaultTargetRatio, KeepRecent: DefaultKeepRecent, Precompact: true}}
	p := startProxyWith(b, cfg, deps)
	unit := "The build fails in pkg/server with undefined: handler. "
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"system","content":"You are a coding agent."},{"role":"user","content":"` +
		strings.Repeat(unit, 16) + `"}]}`)
	client := &fasthttp.Client{MaxConnsPerHost: 64, ReadBufferSize: 64 << 10}
	url := p.URL + "/v1/chat/completions"
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(4)
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		for pb.Next() {
			req.SetRequestURI(url)
			req.Header.SetMethod(fasthttp.MethodPost)
			req.Header.SetContentType("application/json")
			req.Header.Set("Authorization", "Bearer sk-bench")
			req.Header.Set("X-Session-ID", fmt.Sprintf("bench-%d", n.Add(1)%64))
			req.SetBodyRaw(body)
			if err := client.Do(req, resp); err != nil || resp.StatusCode() != 200 {
				b.Errorf("chat turn: %v %d", err, resp.StatusCode())
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/1e3/float64(b.N), "cpu-µs/op")
}
