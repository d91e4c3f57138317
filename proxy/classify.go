package proxy

import (
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ctxpress/ctxpress/internal/localserver"
)

// DefaultProbeTimeout bounds the startup probe of an upstream.
const DefaultProbeTimeout = 1500 * time.Millisecond

// probe asks up's server localserver's probes at once, each bounded by
// timeout; one that failed has status 0.
func probe(up *upstreamClient, timeout time.Duration) map[string]localserver.Answer {
	out := map[string]localserver.Answer{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, path := range localserver.Paths(up.url.Base) {
		wg.Go(func() {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI(up.url.Scheme + "://" + up.url.Host + path)
			req.Header.SetMethod(fasthttp.MethodGet)
			req.Header.SetHost(up.url.Host)
			var a localserver.Answer
			if err := up.client.DoTimeout(req, resp, timeout); err == nil {
				a = localserver.Answer{Status: resp.StatusCode(), Server: string(resp.Header.Peek(fasthttp.HeaderServer)),
					Body: append([]byte(nil), resp.Body()...)}
			}
			mu.Lock()
			out[name] = a
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}
