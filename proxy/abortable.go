package proxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// A chat request can run for minutes before the upstream sends a byte:
// prompt processing of a long history, or a whole non-streamed answer. When
// its client gives up meanwhile, the upstream should stop too (llama.cpp,
// LM Studio and vLLM stop generating when the connection closes), but
// fasthttp's pooled Client cannot abort one request. So conversation requests
// go through abortable clients: single-connection clients that keep their connection
// alive between requests like the pool does, and that know which
// connection to close.

// abortableClient is one single-connection upstream client, used by one request at a
// time.
type abortableClient struct {
	hc      *fasthttp.HostClient
	mu      sync.Mutex
	conn    net.Conn // the connection hc holds, guarded by mu
	aborted bool     // guarded by mu: no new connection may be dialled
}

// abort closes the client's connection, failing the request on it.
func (l *abortableClient) abort() {
	l.mu.Lock()
	l.aborted = true
	c := l.conn
	l.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// abortablePool hands out abortable clients, keeping idle ones for reuse, most recently used
// first: its connection is the likeliest to be still open (a TLS handshake
// with a hosted provider costs a round trip or two).
type abortablePool struct {
	mu     sync.Mutex
	idle   []*abortableClient // guarded by mu; a stack
	active atomic.Int64
	limit  int64 // at most this many out at once; beyond it, the shared pool
	newHC  func(dial fasthttp.DialFunc) *fasthttp.HostClient
	dial   fasthttp.DialFunc
}

func newAbortablePool(limit int, dial fasthttp.DialFunc, newHC func(fasthttp.DialFunc) *fasthttp.HostClient) *abortablePool {
	return &abortablePool{limit: int64(limit), newHC: newHC, dial: dial}
}

// idleCount is how many clients wait for reuse.
func (ls *abortablePool) idleCount() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.idle)
}

// get returns a client, or nil when as many are out as the upstream may
// have connections (the caller then uses the shared pool, uncancellable).
func (ls *abortablePool) get() *abortableClient {
	if ls.active.Add(1) > ls.limit {
		ls.active.Add(-1)
		return nil
	}
	ls.mu.Lock()
	if n := len(ls.idle); n > 0 {
		l := ls.idle[n-1]
		ls.idle[n-1] = nil
		ls.idle = ls.idle[:n-1]
		ls.mu.Unlock()
		return l
	}
	ls.mu.Unlock()
	l := &abortableClient{}
	l.hc = ls.newHC(func(addr string) (net.Conn, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.aborted {
			return nil, errClientGone
		}
		c, err := ls.dial(addr)
		if err == nil {
			l.conn = c
		}
		return c, err
	})
	return l
}

// put returns l once its response is fully read or abandoned.
func (ls *abortablePool) put(l *abortableClient) {
	ls.active.Add(-1)
	l.mu.Lock()
	aborted := l.aborted
	l.mu.Unlock()
	if aborted {
		l.hc.CloseIdleConnections()
		return
	}
	ls.mu.Lock()
	if int64(len(ls.idle)) < ls.limit {
		ls.idle = append(ls.idle, l)
		l = nil
	}
	ls.mu.Unlock()
	if l != nil {
		l.hc.CloseIdleConnections()
	}
}

// closeIdle closes the connections of the idle clients.
func (ls *abortablePool) closeIdle() {
	ls.mu.Lock()
	idle := ls.idle
	ls.idle = nil
	ls.mu.Unlock()
	for _, l := range idle {
		l.hc.CloseIdleConnections()
	}
}

// clientWatch looks, every interval, at the clients of the requests
// waiting for an upstream's headers, and aborts the client of any whose
// client has closed its connection: one ticker for every waiting request
// instead of a timer each. It runs only while a request waits, so a quick
// request costs a registration and no look at all.
type clientWatch struct {
	every   time.Duration
	mu      sync.Mutex
	waiting []*clientWaiter // guarded by mu; each knows its index
	running bool            // guarded by mu: the ticker's goroutine is on
}

// clientWaiter is one request waiting for its upstream's headers.
type clientWaiter struct {
	conn net.Conn
	l    *abortableClient
	at   int // its index in waiting, guarded by the watch's mu
	// mu is held through a look and the abort it leads to: stop waits for
	// it, so the look never reads a connection the handler reads again.
	mu      sync.Mutex
	stopped bool // guarded by mu
	gone    bool // guarded by mu
}

func newClientWatch(every time.Duration) *clientWatch {
	return &clientWatch{every: every}
}

// watch watches the client behind conn until its waiter's stop is
// called, aborting l if it goes.
func (cw *clientWatch) watch(conn net.Conn, l *abortableClient) *clientWaiter {
	w := &clientWaiter{conn: conn, l: l}
	cw.mu.Lock()
	w.at = len(cw.waiting)
	cw.waiting = append(cw.waiting, w)
	if !cw.running {
		cw.running = true
		go cw.run()
	}
	cw.mu.Unlock()
	return w
}

// stop ends w's watch by cw and reports whether its client went. A
// second call changes nothing and reports the same.
func (w *clientWaiter) stop(cw *clientWatch) bool {
	w.mu.Lock()
	again := w.stopped
	w.stopped = true
	gone := w.gone
	w.mu.Unlock()
	if again {
		return gone
	}
	cw.mu.Lock()
	last := len(cw.waiting) - 1
	cw.waiting[w.at], cw.waiting[last].at = cw.waiting[last], w.at
	cw.waiting[last] = nil
	cw.waiting = cw.waiting[:last]
	cw.mu.Unlock()
	return gone
}

// run looks at every waiting request's client once per interval, until
// none waits.
func (cw *clientWatch) run() {
	t := time.NewTicker(cw.every)
	defer t.Stop()
	var look []*clientWaiter
	for range t.C {
		cw.mu.Lock()
		if len(cw.waiting) == 0 {
			cw.running = false
			cw.mu.Unlock()
			return
		}
		look = append(look[:0], cw.waiting...)
		cw.mu.Unlock()
		for i, w := range look {
			w.look()
			look[i] = nil
		}
	}
}

// look aborts w's client if its client has gone.
func (w *clientWaiter) look() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.gone {
		return
	}
	if peerClosed(w.conn) {
		w.gone = true
		w.l.abort()
	}
}
