package proxy

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ctxpress/ctxpress/internal/baseurl"
	"github.com/ctxpress/ctxpress/internal/envproxy"
	"github.com/ctxpress/ctxpress/internal/upstreamerr"
)

// hopHeaders are hop-by-hop headers (RFC 9110 section 7.6.1, plus the older
// ones net/http/httputil also drops): they describe one connection and are
// never forwarded. Headers named in a Connection header are dropped too.
var hopHeaders = [...]string{
	"Connection",
	"Proxy-Connection",
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
}

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
// replaces the client's credential: as "Authorization: Bearer", or on the
// Messages API as Anthropic's x-api-key (with the client's Authorization
// removed, so the upstream sees one credential, ctxpress's).
func (u *upstreamClient) buildUpstreamRequest(ctx *fasthttp.RequestCtx, req *fasthttp.Request, body []byte, apiKey string) {
	ctx.Request.Header.CopyTo(&req.Header)
	removeHops(&req.Header, clientHops(&ctx.Request.Header))
	switch {
	case apiKey == "":
	case messagesPath(ctx.Path()):
		req.Header.Del(fasthttp.HeaderAuthorization)
		req.Header.Set(HeaderAPIKey, apiKey)
	default:
		req.Header.Set(fasthttp.HeaderAuthorization, "Bearer "+apiKey)
	}
	uri := ctx.Request.URI()
	var scratch [512]byte
	req.SetRequestURIBytes(u.url.Target(scratch[:0], uri.PathOriginal(), uri.QueryString()))
	// The Host header follows the upstream URL, as in any reverse proxy.
	req.Header.SetHost(u.url.Host)
	req.SetBodyRaw(body)
}

// hopSet is a set of hopHeaders, bit i for hopHeaders[i].
type hopSet uint16

// allHops is every hop-by-hop header: what a header that cannot be read
// ahead may hold.
const allHops = hopSet(1)<<len(hopHeaders) - 1

// headerDeleter is a request's or an answer's header.
type headerDeleter interface {
	Peek(string) []byte
	Del(string)
	DelBytes([]byte)
}

// removeHops drops the hop-by-hop headers of set, and those a Connection
// header names when set holds Connection. Deleting an absent header costs
// as much as deleting a present one (a key normalised, the fields
// scanned), so the caller passes the ones present (clientHops, answerHops).
func removeHops(h headerDeleter, set hopSet) {
	if set&1 != 0 { // hopHeaders[0]: Connection
		if c := h.Peek(fasthttp.HeaderConnection); len(c) > 0 {
			// Read in place, no copies: deleting other headers leaves the
			// Connection value's bytes where they are.
			for rest := c; len(rest) > 0; {
				var name []byte
				name, rest, _ = bytes.Cut(rest, []byte(","))
				if name = trimSpace(name); len(name) > 0 {
					h.DelBytes(name)
				}
			}
		}
	}
	for i, name := range hopHeaders {
		if set&(1<<i) != 0 {
			h.Del(name)
		}
	}
}

// clientHops is the set of hop-by-hop headers in the client's request h,
// read from the raw header block it was parsed from: Connection too when
// the connection is to close without one (HTTP/1.0), and all of them when
// the block is gone or a trailer may follow (a body of unknown length).
func clientHops(h *fasthttp.RequestHeader) hopSet {
	raw := h.RawHeaders()
	if len(raw) == 0 || h.ContentLength() < 0 {
		return allHops
	}
	var set hopSet
	if h.ConnectionClose() {
		set |= 1
	}
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		// A folded line's continuation (a space or tab first) names nothing.
		if len(line) == 0 || line[0] == ' ' || line[0] == '\t' {
			continue
		}
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			set |= hopOf(trimSpace(line[:i]))
		}
	}
	return set
}

// answerHops is clientHops for an upstream answer's headers, which keep no
// raw block: their fields are visited instead.
func answerHops(h *fasthttp.ResponseHeader) hopSet {
	if h.ContentLength() < 0 {
		return allHops
	}
	var set hopSet
	if h.ConnectionClose() {
		set |= 1
	}
	for name := range h.All() {
		set |= hopOf(name)
	}
	return set
}

// hopOf is the set of the one hop-by-hop header called name (any case), or
// the empty set.
func hopOf(name []byte) hopSet {
	switch len(name) {
	case 2, 7, 10, 16, 17, 18, 19: // the lengths of hopHeaders' names
	default:
		return 0
	}
	for i, h := range hopHeaders {
		if equalFold(name, h) {
			return 1 << i
		}
	}
	return 0
}

// equalFold is strings.EqualFold for ASCII names.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c, d := b[i], s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}
