package proxy

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ctxpress/ctxpress/internal/hop"
	"github.com/ctxpress/ctxpress/wire/chat"
)

// forwardOpts say what the turn handler needs from forward.
type forwardOpts struct {
	// api, when set, is the format of a conversation request (a chat
	// completion, a Responses request). A JSON answer is read whole for
	// its usage; a stream is asked for uncompressed and read for usage on
	// its way (chat: its usage-only chunk stripped when ctxpress, not the
	// client, asked for it). nil: a request passed through, unread.
	api *api
	// headers adds ctxpress's own headers to the answer.
	headers func(h *fasthttp.ResponseHeader)
	// cancellable: a client that leaves before the upstream answers aborts
	// the upstream request (a chat completion can take minutes to start).
	cancellable bool
	// retry, given for a request ctxpress changed, sees a non-2xx answer
	// before any of it is relayed and may send another body instead.
	retry refusalHook
	// unstreamed: the body is known to ask for no stream (its parse said
	// so, api.parseSeesStream).
	unstreamed bool
	// answered, when set, is given a 2xx answer read whole (streamed too)
	// and may send another body instead (turn.Turn.Answered).
	answered func(sent, answer []byte) (next []byte, again bool)
}

// refusalHook is given a non-2xx answer to a request ctxpress changed, read
// whole (up to maxRefusalBody) before any of it is relayed: the status, the
// headers as the upstream sent them, and the body decoded from its
// Content-Encoding (as sent when it cannot be decoded); neither may be kept
// past the call. It returns retry
// true with the body to send instead, or false to have the answer relayed
// to the client exactly as the upstream sent it. forward calls it at most
// once per request; the retried request's answer is relayed, whatever it is.
type refusalHook func(status int, header *fasthttp.ResponseHeader, body []byte) (retryBody []byte, retry bool)

const (
	// maxWholeAnswer bounds a non-streamed conversation answer read whole
	// for its usage; a larger one is relayed as it arrives, its usage unread.
	maxWholeAnswer = 8 << 20
	// maxRefusalBody bounds a non-2xx answer read for the retry hook: an
	// error is small, and a larger answer is relayed without asking it.
	maxRefusalBody = 1 << 20
)

// forward sends the request upstream with body and relays the answer.
func (s *Server) forward(ctx *fasthttp.RequestCtx, x *exchange, body []byte, o forwardOpts) {
	a := asks{turn: true}
	if !o.unstreamed {
		a = answerAsks(ctx, body, o.api)
	}
	resp, ok := s.roundTrip(ctx, x, body, a, o.cancellable)
	if !ok {
		return
	}
	stream, _ := resp.BodyStream().(fasthttp.ReadCloserWithError)
	status := resp.StatusCode()
	if (o.retry == nil && o.answered == nil) || stream == nil {
		s.relayAnswer(ctx, x, resp, stream, a, o)
		return
	}
	if status >= 200 && status < 300 {
		if start := streamStartOf(o.api, a, resp); start != nil && o.retry != nil {
			held, err := readStreamStart(stream, start)
			if refusal := start.Refusal(); (err == nil || err == io.EOF) && refusal != nil &&
				s.retryRefused(ctx, x, resp, stream, fasthttp.StatusBadRequest, refusal, o.retry, o) {
				return
			}
			stream = &heldStream{held: held, err: err, ReadCloserWithError: stream}
		}
		if o.answered != nil {
			held, whole, err := readBounded(stream, resp.Header.ContentLength(), maxWholeAnswer, nil)
			plain, derr := decodeBody(held, resp.Header.ContentEncoding(), maxDecodedAnswer)
			again := func(_ int, _ *fasthttp.ResponseHeader, answer []byte) ([]byte, bool) { return o.answered(body, answer) }
			if err == nil && whole && derr == nil && s.retryRefused(ctx, x, resp, stream, status, plain, again, o) {
				return
			}
			stream = &heldStream{held: held, err: err, ReadCloserWithError: stream}
		}
		s.relayAnswer(ctx, x, resp, stream, a, o)
		return
	}
	held, whole, err := readBounded(stream, resp.Header.ContentLength(), maxRefusalBody, nil)
	if err == nil && whole && o.retry != nil {
		plain, derr := decodeBody(held, resp.Header.ContentEncoding(), maxRefusalBody)
		if derr != nil {
			plain = held
		}
		if s.retryRefused(ctx, x, resp, stream, status, plain, o.retry, o) {
			return
		}
	}
	s.answerHeaders(ctx, x, resp, o)
	s.relayHeld(ctx, x, resp, stream, held, whole, err, o.api)
}

// retryRefused shows hook (o.retry, or o.answered for a 2xx answer) a
// refusal (status, and the refused answer's body or, for a stream that
// failed, its error as one) and, when the hook says so, sends the body it
// gives instead, without o.retry, and relays that answer; false: the
// refused answer is the client's, still unread past what the caller read
// of it.
func (s *Server) retryRefused(ctx *fasthttp.RequestCtx, x *exchange, resp *fasthttp.Response, stream fasthttp.ReadCloserWithError,
	status int, refusal []byte, hook refusalHook, o forwardOpts) bool {
	if x.gate != nil {
		// The hook may compact: a summary call to a local upstream
		// waits for this request's share.
		x.gate()
		x.gate = nil
	}
	next, again := hook(status, &resp.Header, refusal)
	if !again {
		return false
	}
	_ = stream.CloseWithError(nil) // not read to its end: its connection is closed
	fasthttp.ReleaseResponse(resp)
	s.releaseUpstreamClient(x)
	o.retry = nil // once
	s.forward(ctx, x, next, o)
	return true
}

// maxStreamStart bounds the start of a stream held back for a refusal
// inside it: the events before any output echo the request's
// instructions and tools (tens of kilobytes for codex).
const maxStreamStart = 1 << 20

// streamStartOf is a reader of resp's first events when it is an event
// stream of api's format, whose upstreams may refuse a request inside a
// 200 stream (api.streamStart); nil otherwise.
func streamStartOf(api *api, a asks, resp *fasthttp.Response) streamStarter {
	if api == nil || api.streamStart == nil || !a.stream || !hasMediaType(resp.Header.ContentType(), "text/event-stream") {
		return nil
	}
	if ce := resp.Header.ContentEncoding(); len(ce) > 0 && !bytes.EqualFold(ce, []byte("identity")) {
		return nil // compressed despite being asked not to: its events cannot be read, so none is held
	}
	return api.streamStart()
}

// readStreamStart reads stream until start has decided (or the stream
// ends, fails, or passes maxStreamStart) and returns what it read, to be
// relayed first, and the error of the read that ended it (io.EOF: the
// stream's end). It holds back only what comes before the first output:
// the time to it is the upstream's, not ctxpress's.
func readStreamStart(stream io.Reader, start streamStarter) ([]byte, error) {
	held := make([]byte, 0, 16<<10)
	for !start.Decided() && len(held) < maxStreamStart {
		if len(held) == cap(held) {
			held = append(held, 0)[:len(held)]
		}
		n, err := stream.Read(held[len(held):cap(held)])
		start.Feed(held[len(held) : len(held)+n])
		held = held[:len(held)+n]
		if err != nil {
			return held, err
		}
	}
	return held, nil
}

// heldStream is a stream of which held (and then err, when the read
// that ended the hold ended the stream or failed) was read ahead: the
// relay reads them first.
type heldStream struct {
	held []byte
	err  error
	fasthttp.ReadCloserWithError
}

func (h *heldStream) Read(p []byte) (int, error) {
	if len(h.held) > 0 {
		n := copy(p, h.held)
		h.held = h.held[n:]
		return n, nil
	}
	if h.err != nil {
		return 0, h.err
	}
	return h.ReadCloserWithError.Read(p)
}

// asks is what a forwarded conversation body asks of its answer.
type asks struct {
	turn   bool // a conversation request: it takes the local gate's share
	stream bool
	// addedUsage: the body asks for the stream's usage chunk and the
	// client's own request did not, so ctxpress asked for it: the chunk is
	// stripped on the way.
	addedUsage bool
}

// answerAsks compares body with the client's own request; only
// conversation requests (of a format, api) are read.
func answerAsks(ctx *fasthttp.RequestCtx, body []byte, api *api) asks {
	if api == nil {
		return asks{}
	}
	stream, usage := api.streamAsks(ctx.Path(), body)
	a := asks{turn: true, stream: stream}
	if usage {
		_, clientAsked := api.streamAsks(ctx.Path(), ctx.Request.Body())
		a.addedUsage = !clientAsked
	}
	return a
}

// roundTrip sends body upstream as the client's request and waits for the
// answer's headers. ok false: the client has been answered already (a
// fault, or a client that left).
func (s *Server) roundTrip(ctx *fasthttp.RequestCtx, x *exchange, body []byte, a asks, cancellable bool) (resp *fasthttp.Response, ok bool) {
	req := fasthttp.AcquireRequest()
	rt := x.route
	rt.up.buildUpstreamRequest(ctx, req, body, rt.apiKey)
	// The whole body is already here; an Expect header would make the
	// upstream wait for a 100 Continue nobody sends.
	req.Header.Del("Expect")
	if a.stream {
		// A conversation stream is read on its way, for its usage (and to
		// strip the usage chunk ctxpress asked for): compressed, neither is
		// possible.
		// The client still gets what it accepts: identity always is.
		req.Header.Set(fasthttp.HeaderAcceptEncoding, "identity")
	}
	if a.turn && x.gate == nil {
		x.gate = rt.gate.Live()
	}
	resp = fasthttp.AcquireResponse()
	t0 := time.Now()
	var err error
	if cancellable {
		var gone bool
		x.upClient, gone, err = rt.up.doCancellable(req, resp, ctx.Conn(), t0)
		if gone {
			fasthttp.ReleaseRequest(req)
			fasthttp.ReleaseResponse(resp)
			x.upstream += time.Since(t0)
			s.clientGone(ctx, x)
			return nil, false
		}
	} else {
		err = rt.up.do(req, resp, t0)
	}
	x.upstream += time.Since(t0)
	fasthttp.ReleaseRequest(req)
	if err != nil {
		fasthttp.ReleaseResponse(resp)
		s.fail(ctx, x, err)
		return nil, false
	}
	return resp, true
}

// answerHeaders copies the upstream's status and headers to the client's
// answer, adding ctxpress's own.
func (s *Server) answerHeaders(ctx *fasthttp.RequestCtx, x *exchange, resp *fasthttp.Response, o forwardOpts) {
	resp.Header.CopyTo(&ctx.Response.Header)
	hop.Remove(&ctx.Response.Header, hop.OfAnswer(&resp.Header))
	if o.headers != nil {
		o.headers(&ctx.Response.Header)
	}
	x.status = resp.StatusCode()
}

// relayAnswer relays resp, whose headers are in, as relayModeOf says.
func (s *Server) relayAnswer(ctx *fasthttp.RequestCtx, x *exchange, resp *fasthttp.Response, stream fasthttp.ReadCloserWithError, a asks, o forwardOpts) {
	s.answerHeaders(ctx, x, resp, o)
	if stream == nil { // no body (HEAD, 204, 304)
		ctx.Response.SetBody(resp.Body())
		fasthttp.ReleaseResponse(resp)
		s.finish(x)
		return
	}
	contentLength := resp.Header.ContentLength()
	mode := relayModeOf(resp.Header.ContentType(), contentLength, o.api != nil, a.stream)
	if mode == relayWhole && a.stream && o.api != nil && o.api.arrayReply != nil && resp.StatusCode() < 300 {
		mode = relayStream // a stream as one JSON array (Gemini without alt=sse), relayed as it arrives
	}
	switch mode {
	case relayStream:
		s.relayStream(ctx, x, resp, stream, a, o.api)
	case relayWhole:
		// Read into the client's answer's own body buffer, which fasthttp
		// pools and takes back once the answer is written (relayHeld).
		held, whole, err := readBounded(stream, contentLength, maxWholeAnswer, ctx.Response.SwapBody(nil))
		s.relayHeld(ctx, x, resp, stream, held, whole, err, o.api)
	default:
		s.relayRest(ctx, x, resp, stream, nil)
	}
}

// relayStream copies an event stream to the client as it arrives, reading
// a conversation stream (of api's format) on the way: for its usage, and
// for whether it ended as a whole answer (a Responses stream must end with
// response.completed). A stream that did not is relayed as the upstream
// ended it, and its turn is not recorded.
func (s *Server) relayStream(ctx *fasthttp.RequestCtx, x *exchange, resp *fasthttp.Response, stream fasthttp.ReadCloserWithError, a asks, api *api) {
	x.stream = true
	x.route.up.releaseDeadline(resp)
	var watch streamWatch
	r := &relay{body: stream, idle: s.cfg.StreamIdleTimeout, clientConn: ctx.Conn()}
	switch {
	case a.addedUsage:
		r.strip = &chat.UsageChunkFilter{}
	case api != nil:
		watch = api.watch()
		r.observe = watch.Observe
	}
	r.done = func(res relayResult) {
		x.bytesOut = res.bytesOut
		x.err = res.upstreamErr
		if res.upstreamErr == nil && res.clientErr != nil {
			x.err = res.clientErr
		}
		if watch != nil {
			x.usage = watch.Usage()
			if x.err == nil {
				x.err = watch.unfinished()
			}
		}
		if r.strip != nil {
			x.usage = r.strip.Usage()
		}
		fasthttp.ReleaseResponse(resp)
		s.finish(x)
	}
	ctx.SetBodyStreamWriter(s.metrics.CountStream(r.writeTo))
}

// relayHeld relays an answer of which held was read ahead: all of it when
// whole (its usage read, as api's format, when api is set), else held and
// then the rest as it arrives, its usage unread. A read that failed is a
// proxy fault.
func (s *Server) relayHeld(ctx *fasthttp.RequestCtx, x *exchange, resp *fasthttp.Response, stream fasthttp.ReadCloserWithError,
	held []byte, whole bool, err error, api *api) {
	if err != nil {
		_ = stream.CloseWithError(err)
		fasthttp.ReleaseResponse(resp)
		s.fail(ctx, x, fmt.Errorf("reading upstream body: %w", err))
		return
	}
	if !whole {
		s.relayRest(ctx, x, resp, stream, held)
		return
	}
	_ = stream.CloseWithError(nil)
	fasthttp.ReleaseResponse(resp)
	if api != nil {
		x.usage = usageFromBody(api, held, ctx.Response.Header.ContentEncoding())
	}
	x.bytesOut = int64(len(held))
	// The answer's body buffer from now on, back in fasthttp's pool once
	// the answer is written; held is not read after this.
	ctx.Response.SwapBody(held)
	s.finish(x)
}

// relayRest passes held and then the rest of the body to the client as it
// arrives, at its own pace (fasthttp copies it after the handler returns).
// The body is the exchange's own (x.body): no allocation of its own.
func (s *Server) relayRest(ctx *fasthttp.RequestCtx, x *exchange, resp *fasthttp.Response, stream fasthttp.ReadCloserWithError, held []byte) {
	x.body = bodyCloser{body: heldStream{held: held, ReadCloserWithError: stream}, s: s, x: x, resp: resp}
	ctx.Response.SetBodyStream(&x.body, resp.Header.ContentLength())
}

// bodyCloser is an upstream body being copied to the client: held (read
// ahead) and then the rest. It counts what the client got and releases the
// upstream response once fasthttp has copied the body (fasthttp closes a
// body stream after writing it, through Close and CloseWithError both).
type bodyCloser struct {
	body heldStream // a value: no allocation of its own
	n    int64
	once bool
	// Once closed: x gets the count, resp is released, and s finishes x.
	s    *Server
	x    *exchange
	resp *fasthttp.Response
}

func (b *bodyCloser) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.n += int64(n)
	return n, err
}

// CloseWithError passes on why fasthttp stopped (a client gone, a write
// that failed), so that a body not read to its end closes its upstream
// connection instead of returning it to the pool.
func (b *bodyCloser) CloseWithError(err error) error {
	if b.once {
		return nil
	}
	b.once = true
	cerr := b.body.CloseWithError(err)
	b.x.bytesOut = b.n
	fasthttp.ReleaseResponse(b.resp)
	b.s.finish(b.x)
	return cerr
}

// readBounded reads a body of contentLength bytes (negative: unknown) to
// its end, if it is at most limit bytes: whole reports it was. Over the
// limit, it returns what it has read so far (nothing when the length said so
// at once), and the rest is still in r. It reads into buf's room when it has
// enough (buf's bytes are overwritten).
func readBounded(r io.Reader, contentLength, limit int, buf []byte) (_ []byte, whole bool, err error) {
	if contentLength > limit {
		return nil, false, nil
	}
	if want := max(contentLength, 4<<10); cap(buf) < want {
		buf = make([]byte, 0, want)
	}
	buf = buf[:0]
	for {
		if len(buf) > limit {
			return buf, false, nil
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, rerr := r.Read(buf[len(buf):min(cap(buf), limit+1)])
		buf = buf[:len(buf)+n]
		switch {
		case rerr == io.EOF:
			if contentLength >= 0 && len(buf) < contentLength {
				return buf, false, io.ErrUnexpectedEOF
			}
			return buf, true, nil
		case rerr != nil:
			return buf, false, rerr
		}
	}
}
