package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxpress/ctxpress/internal/hop"
	"github.com/ctxpress/ctxpress/internal/upstreamerr"
	"github.com/ctxpress/ctxpress/wire/chat"

	"github.com/valyala/fasthttp"
)

// relayMode is how forward relays an upstream answer.
type relayMode int

const (
	// relayPass copies the body to the client as it arrives, unread.
	relayPass relayMode = iota
	// relayStream copies it read by read, flushing after each, so that no
	// event is held back; a conversation stream is read for usage on its
	// way.
	relayStream
	// relayWhole reads the body whole (bounded), for its usage, then
	// relays it.
	relayWhole
)

// relayModeOf decides how an answer is relayed from its Content-Type, its
// length (negative: unknown, chunked or until close), whether it answers a
// conversation request (a chat completion, a Responses request: the
// answers ctxpress reads usage from) and whether that request asked for a
// stream. A missing length alone never makes a conversation answer a
// stream: a JSON answer sent chunked is one document.
func relayModeOf(contentType []byte, contentLength int, turn, requestStream bool) relayMode {
	switch {
	case hasMediaType(contentType, "text/event-stream"):
		return relayStream
	case !turn && contentLength < 0:
		return relayStream // may be a stream by another name: never held back
	case !turn:
		return relayPass
	case isJSONMediaType(contentType):
		return relayWhole // an answer, or an error, even to a stream request
	case requestStream:
		return relayStream // an event stream under another name (or none)
	default:
		return relayWhole
	}
}

// isJSONMediaType reports whether the Content-Type value is application/json
// or a +json type (application/problem+json).
func isJSONMediaType(contentType []byte) bool {
	if hasMediaType(contentType, "application/json") {
		return true
	}
	ct := contentType
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = bytes.ToLower(hop.TrimOWS(ct))
	return bytes.HasPrefix(ct, []byte("application/")) && bytes.HasSuffix(ct, []byte("+json"))
}

// hasMediaType reports whether the Content-Type value names media type mt,
// ignoring case and parameters.
func hasMediaType(contentType []byte, mt string) bool {
	ct := hop.TrimOWS(contentType)
	for i, c := range ct {
		if c == ';' {
			ct = hop.TrimOWS(ct[:i])
			break
		}
	}
	if len(ct) != len(mt) {
		return false
	}
	for i := range ct {
		c := ct[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != mt[i] {
			return false
		}
	}
	return true
}

var relayBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// relay copies a streamed upstream body to the client, flushing after every
// read so an event is never held back, while a watchdog cuts the upstream when
// it stalls past idle or when the client goes away.
type relay struct {
	body       fasthttp.ReadCloserWithError
	idle       time.Duration
	clientConn net.Conn               // for noticing a client that left during a stall; may be nil
	observe    func(p []byte)         // side copy for usage; may be nil
	strip      *chat.UsageChunkFilter // drops the usage chunk ctxpress asked for; may be nil
	done       func(relayResult)      // called once, when the relay ends
}

type relayResult struct {
	bytesOut int64
	// upstreamErr is set when the upstream failed or stalled mid-stream;
	// clientErr when the client went away.
	upstreamErr, clientErr error
}

// pollEvery is how often the watchdog checks for a stall or a departed
// client: the longest a cancelled client keeps an upstream request alive.
const pollEvery = 200 * time.Millisecond

func (r *relay) writeTo(w *bufio.Writer) {
	var res relayResult
	var lastRead atomic.Int64
	lastRead.Store(time.Now().UnixNano())
	var cause atomic.Value // error that made the watchdog close the body
	stop := make(chan struct{})
	watchdogDone := make(chan struct{})
	go func() {
		defer close(watchdogDone)
		t := time.NewTicker(min(pollEvery, r.idle/2+1))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				var err error
				switch {
				case now.UnixNano()-lastRead.Load() > int64(r.idle):
					err = upstreamerr.ErrIdleTimeout
				case r.clientConn != nil && peerClosed(r.clientConn):
					err = errClientGone
				}
				if err != nil {
					cause.Store(err)
					_ = r.body.CloseWithError(err)
					return
				}
			}
		}
	}()

	bufp := relayBufPool.Get().(*[]byte)
	buf := *bufp
	var filtered []byte
	for {
		n, err := r.body.Read(buf)
		out := buf[:n]
		if r.strip != nil {
			filtered = r.strip.Filter(filtered[:0], out)
			if err != nil {
				filtered = r.strip.Flush(filtered)
			}
			out = filtered
		}
		if n > 0 {
			lastRead.Store(time.Now().UnixNano())
			if r.observe != nil {
				r.observe(buf[:n])
			}
		}
		if len(out) > 0 {
			if _, werr := w.Write(out); werr != nil {
				res.clientErr = werr
				break
			}
			if ferr := w.Flush(); ferr != nil {
				res.clientErr = ferr
				break
			}
			res.bytesOut += int64(len(out))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			if c, ok := cause.Load().(error); ok {
				err = c
			}
			if errors.Is(err, errClientGone) {
				res.clientErr = err
			} else {
				res.upstreamErr = err
			}
			break
		}
	}
	relayBufPool.Put(bufp)
	close(stop)
	<-watchdogDone
	_ = r.body.CloseWithError(res.clientErr)
	if res.upstreamErr != nil && r.clientConn != nil {
		// The answer is cut short: end the client's connection instead of
		// letting fasthttp finish the chunked body, so the client sees a
		// truncated stream, not a complete one.
		_ = r.clientConn.Close()
	}
	r.done(res)
}
