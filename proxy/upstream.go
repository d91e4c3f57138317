package proxy

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ctxpress/ctxpress/internal/baseurl"
	"github.com/ctxpress/ctxpress/internal/envproxy"
	"github.com/ctxpress/ctxpress/internal/geminipath"
	"github.com/ctxpress/ctxpress/internal/hop"
	"github.com/ctxpress/ctxpress/internal/upstreamerr"
)

// upstreamClient sends requests to one upstream over pooled connections.
type upstreamClient struct {
	url       baseurl.URL
	client    *fasthttp.HostClient
	abortable *abortablePool // for requests a gone client should cancel
	watch     *clientWatch
	conns     *connRegistry
	timeout   time.Duration // response-header timeout
}

func newUpstreamClient(cfg Config, base string) (*upstreamClient, error) {
	u, err := baseurl.Parse(base)
	if err != nil {
		return nil, err
	}
	conns := &connRegistry{byLocal: map[string]net.Conn{}}
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	dial := func(addr string) (net.Conn, error) { return dialer.Dial("tcp", addr) }
	// An outbound proxy from the environment (HTTPS_PROXY, ...), as a
	// net/http client would use; fasthttp alone ignores it.
	proxied, err := envproxy.Dial(u.Scheme, cfg.ConnectTimeout)
	if err != nil {
		return nil, fmt.Errorf("outbound proxy from the environment: %w", err)
	}
	if proxied != nil {
		dial = proxied
	}
	tracked := func(addr string) (net.Conn, error) {
		c, err := dial(addr)
		if err != nil {
			return nil, err
		}
		return conns.track(c), nil
	}
	isTLS := u.Scheme == "https"
	addr := fasthttp.AddMissingPort(u.Host, isTLS)
	newHC := func(dial fasthttp.DialFunc, maxConns int) *fasthttp.HostClient {
		return &fasthttp.HostClient{
			Addr: addr, IsTLS: isTLS, MaxConns: maxConns,
			// Stream every answer: Do returns once headers are in, so SSE
			// can be relayed as it arrives.
			StreamResponseBody:       true,
			NoDefaultUserAgentHeader: true, // the client's own User-Agent goes through
			DisablePathNormalizing:   true, // forward the path byte-exact
			// Shorter than the usual upstream keep-alive (LM Studio, nginx:
			// 5s+), so a pooled connection is rarely one the upstream
			// already closed.
			MaxIdleConnDuration: idleConnDuration,
			ReadBufferSize:      upstreamBufferSize, // also the response-header size limit
			WriteBufferSize:     upstreamBufferSize,
			Dial:                dial,
			RetryIfErr:          retryStale,
		}
	}
	// One upstream, one host client: a fasthttp.Client would look it up
	// by the request's host on every request (a shared lock, a map).
	c := newHC(tracked, cfg.MaxConnsPerHost)
	return &upstreamClient{url: u, client: c, conns: conns, timeout: cfg.UpstreamTimeout, watch: newClientWatch(clientWatchInterval),
		abortable: newAbortablePool(max(cfg.MaxConnsPerHost, 1), tracked, func(dial fasthttp.DialFunc) *fasthttp.HostClient { return newHC(dial, 1) })}, nil
}

const (
	idleConnDuration   = 4 * time.Second
	upstreamBufferSize = 64 << 10
)

// retryStale: a pooled connection the upstream closed before answering
// gets one more try on a fresh connection, whatever the method: the request
// was never answered, and losing it would be worse than a retry.
func retryStale(_ *fasthttp.Request, attempts int, err error) (bool, bool) {
	return false, attempts < 2 && upstreamerr.IsStaleConn(err)
}

// do sends req and waits for the response headers, at most the header
// timeout from sent (the caller's clock reading, shared: one fewer).
// The body of resp is left streaming; the caller closes it.
func (u *upstreamClient) do(req *fasthttp.Request, resp *fasthttp.Response, sent time.Time) error {
	return u.client.DoDeadline(req, resp, sent.Add(u.timeout))
}

// releaseDeadline lifts the header deadline from the connection resp arrived
// on, so a long stream is bounded by the relay's idle timeout instead.
// fasthttp leaves the read deadline of DoDeadline on the connection while its
// body streams.
func (u *upstreamClient) releaseDeadline(resp *fasthttp.Response) {
	if addr := resp.LocalAddr(); addr != nil {
		if c := u.conns.lookup(addr.String()); c != nil {
			_ = c.SetReadDeadline(time.Time{})
		}
	}
}

// doCancellable is do on an abortable client of its own, so that the request is
// aborted, its upstream connection closed, when the client behind
// clientConn goes away before the headers come. The client (nil: none)
// must be put back (abortable.put) once resp's body is read or abandoned.
// gone reports an abort; without a free client (or a client connection) it
// is plain do.
func (u *upstreamClient) doCancellable(req *fasthttp.Request, resp *fasthttp.Response, clientConn net.Conn, sent time.Time) (l *abortableClient, gone bool, err error) {
	if clientConn != nil {
		l = u.abortable.get()
	}
	if l == nil {
		return nil, false, u.do(req, resp, sent)
	}
	w := u.watch.watch(clientConn, l)
	err = l.hc.DoDeadline(req, resp, sent.Add(u.timeout))
	gone = w.stop(u.watch)
	return l, gone, err
}

// clientWatchInterval is how often a waiting chat request checks that its
// client is still there.
const clientWatchInterval = 250 * time.Millisecond

func (u *upstreamClient) closeIdle() {
	u.client.CloseIdleConnections()
	u.abortable.closeIdle()
}

// connRegistry finds an upstream connection by its local address, the one
// handle fasthttp gives back (Response.LocalAddr) after a request.
type connRegistry struct {
	mu      sync.Mutex
	byLocal map[string]net.Conn // guarded by mu
}

func (r *connRegistry) track(c net.Conn) net.Conn {
	tc := &trackedConn{Conn: c, reg: r, key: c.LocalAddr().String()}
	r.mu.Lock()
	r.byLocal[tc.key] = c
	r.mu.Unlock()
	return tc
}

func (r *connRegistry) lookup(local string) net.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byLocal[local]
}

type trackedConn struct {
	net.Conn
	reg  *connRegistry
	key  string
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.reg.mu.Lock()
		delete(c.reg.byLocal, c.key)
		c.reg.mu.Unlock()
	})
	return c.Conn.Close()
}

// buildUpstreamRequest fills req from the client's request: method, headers
// minus hop-by-hop ones, in the client's order, the mapped URL, and body
// (not copied; req must not outlive ctx's request). apiKey, when set,
// replaces the client's credential: as "Authorization: Bearer", on the
// Messages API as Anthropic's x-api-key, on Gemini's where the client put
// its key (geminiKey); in the last two with the client's Authorization
// removed, so the upstream sees one credential, ctxpress's. Gemini's paths
// carry their version: they go to the upstream's host as they are
// (baseurl.URL.TargetVersioned).
func (u *upstreamClient) buildUpstreamRequest(ctx *fasthttp.RequestCtx, req *fasthttp.Request, body []byte, apiKey string) {
	ctx.Request.Header.CopyTo(&req.Header)
	hop.Remove(&req.Header, hop.OfRequest(&ctx.Request.Header))
	uri := ctx.Request.URI()
	path, query := uri.PathOriginal(), uri.QueryString()
	gemini := geminipath.Is(ctx.Path())
	switch {
	case apiKey == "":
	case gemini:
		query = geminiKey(&req.Header, query, apiKey)
	case messagesPath(ctx.Path()):
		req.Header.Del(fasthttp.HeaderAuthorization)
		req.Header.Set(HeaderAPIKey, apiKey)
	default:
		req.Header.Set(fasthttp.HeaderAuthorization, "Bearer "+apiKey)
	}
	var scratch [512]byte
	if gemini {
		req.SetRequestURIBytes(u.url.TargetVersioned(scratch[:0], path, query))
	} else {
		req.SetRequestURIBytes(u.url.Target(scratch[:0], path, query))
	}
	// The Host header follows the upstream URL, as in any reverse proxy.
	req.Header.SetHost(u.url.Host)
	req.SetBodyRaw(body)
}

// geminiKey puts apiKey where a Gemini client put its own: in the key=
// query parameter (the query returned has it), and in x-goog-api-key when
// the client sent that or no key at all.
func geminiKey(h *fasthttp.RequestHeader, query []byte, apiKey string) []byte {
	h.Del(fasthttp.HeaderAuthorization)
	_, inQuery := geminipath.QueryKey(query)
	if inQuery {
		query = geminipath.WithKey(nil, query, apiKey)
	}
	if !inQuery || len(h.Peek(geminipath.HeaderAPIKey)) > 0 {
		h.Set(geminipath.HeaderAPIKey, apiKey)
	}
	return query
}
