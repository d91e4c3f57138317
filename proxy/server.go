package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/compaction"
	"github.com/ctxpress/ctxpress/state/recorder"
	"github.com/ctxpress/ctxpress/turn"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"github.com/ctxpress/ctxpress/internal/logline"
	"github.com/ctxpress/ctxpress/internal/upstreamerr"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
)

// Server is the ctxpress HTTP front. Create it with New; it is safe for
// concurrent use by the fasthttp worker pool.
type Server struct {
	cfg     Config
	log     zerolog.Logger
	routes  map[string]*route // each format's upstream (Config.Routes)
	srv     *fasthttp.Server
	turns   *turn.Turns        // the conversation requests' turns
	comp    *compaction.Engine // always set; compaction itself may be off
	rec     *recorder.Recorder // nil without a store
	events  *admin.Bus
	metrics *admin.Metrics // private registry behind /metrics
	admin   *admin.Admin   // /ctxpress/ and /metrics
	// namespace is cfg.Namespace, parsed.
	namespace  namespaceMode
	namespaces namespaceMemo
	warn       logline.Limiter // store failures on the request path
	// noV1Hint: the upstream hint for a base URL without /v1 is given once.
	noV1Hint sync.Once
	// noStreamOptions: models whose streams go without the stream_options
	// ctxpress adds, because the upstream refused it.
	noStreamOptions modelSet
}

// Deps are the parts the turns run on; a nil one turns its step off.
type Deps struct {
	// Pipeline rewrites conversation bodies of every format (squash,
	// dedup, prune, token counts); nil forwards them as sent.
	Pipeline *rewrite.Pipeline
	// Store keeps a record per conversation. The Server writes to it from
	// one background goroutine, so a slow disk never delays an answer; the
	// caller closes it after Shutdown.
	Store state.Store
	// Files is where originals are written for an agent on this machine
	// (nil: nowhere); the store keeps them whatever it is.
	Files *state.OriginalFiles
}

// New validates cfg and builds a Server; it does not listen yet.
func New(cfg Config, log zerolog.Logger, deps Deps) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	routes, err := newRoutes(cfg)
	if err != nil {
		return nil, err
	}
	if err := cfg.Compaction.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, routes: routes}
	s.namespace, _ = parseNamespace(cfg.Namespace) // Validate checked it
	s.cfg.Cost.Local = allLocal(routes)
	s.logRoutes()
	s.events = admin.NewBus(log, cfg.Compaction.WebhookURL, cfg.Replica)
	if deps.Store != nil {
		s.rec = recorder.New(deps.Store, log, cfg.Clock, func(rec state.Record, tripped bool) { s.admin.Recorded(rec, tripped) })
	}
	keeper := &turn.Keeper{Store: originalsOf(deps.Store), Files: deps.Files,
		Failed: func(err error) { s.storeFailed("keep", "cannot keep an original", err) }}
	var originals state.Originals // a compaction's messages are kept as the turns' originals are
	if keeper.Store != nil {
		originals = keeper
	}
	s.comp = compaction.NewEngine(cfg.Compaction, compaction.Deps{Store: deps.Store, Pipeline: deps.Pipeline, Events: s.events,
		Originals: originals, Log: log, Routes: compactionRoutes(routes), Cost: s.cfg.Cost, Clock: cfg.Clock, Observe: cfg.Mode == ModeObserve})
	s.turns = &turn.Turns{Pipeline: deps.Pipeline, Store: deps.Store, Recorder: s.rec, Comp: s.comp, Events: s.events, Log: log,
		StoreFailed: s.storeFailed, Observe: cfg.Mode == ModeObserve, ExpandTool: cfg.ExpandTool, Keeper: keeper,
		Paused: func(err error) {
			s.warn.Warn(s.cfg.Clock(), s.log, "compaction paused while the conversation store fails", err)
		}}
	s.metrics = admin.NewMetrics(s.comp.Running, deps.Store, deps.Pipeline)
	s.metrics.Pricing = s.pricing()
	s.turns.Keeper.Retrieved = s.metrics.Retrieved
	s.metrics.Reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ctxpress_local_gate_waiting",
		Help: "Conversation requests (chat, Responses, Messages, Gemini) to a local upstream waiting for a summary call to it to end (see local_upstream)."},
		func() float64 { return float64(s.gateWaiting()) }))
	s.metrics.Reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ctxpress_compaction_waiting",
		Help: "Conversation requests waiting for a compaction of their conversation that another request started."},
		func() float64 { return float64(s.comp.Waiting()) }))
	s.events.OnCompaction = s.metrics.Compaction
	s.comp.OnStoreFailure = s.metrics.StoreFailed
	if s.rec != nil {
		s.rec.OnStoreFailure = s.metrics.StoreFailed
	}
	if bc, ok := deps.Store.(state.Broadcaster); ok { // replicas see each other's events
		s.events.Join(bc)
		admin.RegisterSharedEventMetrics(s.metrics.Reg, bc)
	}
	s.admin = admin.New(admin.Config{Token: cfg.AdminToken, MetricsPublic: cfg.MetricsPublic, Pprof: cfg.Pprof, UI: cfg.UI, Clock: cfg.Clock, Mode: cfg.Mode},
		admin.Deps{Store: deps.Store, Pricing: s.pricing(), Compacting: s.comp.IsCompacting, Running: s.comp.Running,
			Events: s.events, Metrics: s.metrics, StoreFailed: s.storeFailed})
	s.srv = &fasthttp.Server{
		Handler:            s.handle,
		ErrorHandler:       s.handleReadError,
		MaxRequestBodySize: cfg.MaxBodyBytes,
		ReadBufferSize:     64 << 10, // also the request-header size limit
		WriteBufferSize:    32 << 10,
		IdleTimeout:        2 * time.Minute,
		// Transparent: the upstream's own Server, Date and Content-Type
		// headers go through; ctxpress adds none.
		NoDefaultServerHeader:        true,
		NoDefaultDate:                true,
		NoDefaultContentType:         true,
		DisablePreParseMultipartForm: true,
		CloseOnShutdown:              true,
		Logger:                       fasthttpLogger{log},
	}
	return s, nil
}

// Handler returns the request handler, for serving on a listener of the
// caller's choosing.
func (s *Server) Handler() fasthttp.RequestHandler { return s.handle }

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.srv.Serve(ln) }

// WaitIdle blocks until the background work started so far has ended
// (summaries prepared ahead of the trigger, turns queued for the store). A
// replay waits for it between turns, so every run finds each turn in the
// same state.
func (s *Server) WaitIdle() {
	s.comp.Wait()
	if s.rec != nil {
		s.rec.Wait()
	}
}

// WaitRecorded blocks until the turns answered so far are recorded; unlike
// WaitIdle, it does not wait for summaries prepared in the background.
func (s *Server) WaitRecorded() {
	if s.rec != nil {
		s.rec.Wait()
	}
}

// Background reports how many summaries are being prepared in the
// background now.
func (s *Server) Background() int { return s.comp.Background() }

// Waiting reports how many requests are waiting now for a compaction of
// their conversation that another request or a precompaction started.
func (s *Server) Waiting() int { return s.comp.Waiting() }

// Shutdown stops accepting, lets in-flight requests and streams finish until
// ctx is done, then closes idle upstream connections. It returns ctx.Err()
// when the drain did not complete in time.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.ShutdownWithContext(ctx)
	for _, r := range s.routes {
		r.up.closeIdle() // a shared client twice: closing idle connections again is a no-op
	}
	s.comp.Wait() // a summary being written in the background is kept
	if s.rec != nil {
		s.rec.Close() // writes what is queued; later turns are not recorded
	}
	s.events.Leave() // before the caller closes the store
	return err
}

// exchange is what the access log says about one request; it is filled while
// the request runs and logged once when the answer has been sent.
type exchange struct {
	method, path string
	start        time.Time
	bytesIn      int
	status       int
	upstream     time.Duration // until the upstream's response headers (of each try, summed)
	bytesOut     int64
	stream       bool
	usage        wire.Usage
	err          error
	turn         *turn.Turn       // conversation requests ctxpress understood
	upClient     *abortableClient // its own upstream client, put back once the answer is done (releaseUpstreamClient)
	gate         func()           // returns the local gate's share (see compaction.Gate), once the answer is done
	route        *route           // where it goes (routeOf its path)
	finished     bool             // finish ran
	body         bodyCloser       // the answer's body, when relayed as it arrives (relayRest)
	// credential names the client's conversation namespace: its
	// Authorization header, or its ctxpress key (see authenticate). It
	// starts in credentialBuf, which holds the usual key without an
	// allocation of its own.
	credential    []byte
	credentialBuf [192]byte
}

// newExchange starts the exchange of ctx's request, routed by its path.
func (s *Server) newExchange(ctx *fasthttp.RequestCtx) *exchange {
	// fasthttp read the clock as the request came in: the same start, one
	// clock reading fewer.
	start := ctx.Time()
	if start.IsZero() { // a ctx no fasthttp server made
		start = time.Now()
	}
	x := &exchange{
		method:  methodName(ctx.Method()),
		path:    pathName(ctx.Path()),
		start:   start,
		bytesIn: len(ctx.Request.Body()),
		route:   s.routeOf(ctx.Path()),
	}
	x.credential = x.credentialBuf[:0]
	return x
}

// pathName is the request's path as a string, without an allocation for
// the endpoints the metrics name (admin.KnownPath).
func pathName(p []byte) string {
	if known, ok := admin.KnownPath(p); ok {
		return known
	}
	return string(p)
}

// releaseUpstreamClient puts x's upstream client back, once.
func (s *Server) releaseUpstreamClient(x *exchange) {
	if x.upClient != nil {
		x.route.up.abortable.put(x.upClient)
		x.upClient = nil
	}
}

// methodName is the request's method as a string, without an allocation
// for the usual ones.
func methodName(m []byte) string {
	switch string(m) {
	case fasthttp.MethodPost:
		return fasthttp.MethodPost
	case fasthttp.MethodGet:
		return fasthttp.MethodGet
	}
	return string(m)
}

var (
	pathHealthz         = "/ctxpress/healthz"
	pathChatCompletions = "/chat/completions"
	pathResponses       = "/responses"
	pathMessages        = "/messages"
)

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	var x *exchange
	defer func() {
		// fasthttp does not recover panics: one would take the process down.
		if p := recover(); p != nil {
			s.log.Error().Str("panic", fmt.Sprint(p)).Str("path", string(ctx.Path())).Msg("handler panic")
			writeClientError(ctx, fasthttp.StatusInternalServerError, "internal_error", "internal error")
			// A request ends through finish, a panicking one too: its log
			// line, its count, its upstream client and gate share back.
			if x != nil && !x.finished {
				x.status, x.err = fasthttp.StatusInternalServerError, fmt.Errorf("handler panic: %v", p)
				s.finish(x)
			}
		}
	}()
	path := ctx.Path()
	if string(path) == admin.PathMetrics {
		s.admin.ServeMetrics(ctx) // ctxpress's own, never the upstream's
		return
	}
	if admin.IsExpand(path) { // under the key of the client's conversations, not the admin rule
		if x = s.newExchange(ctx); s.authenticate(ctx, x) {
			x.status = s.admin.ServeExpand(ctx, s.namespaces.of(x.credential))
			s.finish(x)
		}
		return
	}
	if len(path) >= len(admin.Prefix) && string(path[:len(admin.Prefix)]) == admin.Prefix {
		s.admin.Serve(ctx)
		return
	}
	x = s.newExchange(ctx)
	if !s.authenticate(ctx, x) {
		return
	}
	if a := apiOf(path); a != nil && ctx.IsPost() {
		s.handleTurn(ctx, x, a)
		return
	}
	s.forward(ctx, x, ctx.Request.Body(), forwardOpts{})
}

// clientGone ends a request whose client left before the upstream answered
// (the upstream request was aborted): nobody reads an answer, so the
// connection is closed; the log and metrics say 499, as nginx does.
func (s *Server) clientGone(ctx *fasthttp.RequestCtx, x *exchange) {
	ctx.Response.Reset()
	ctx.SetConnectionClose()
	x.status, x.err = statusClientClosed, errClientGone
	s.finish(x)
}

// statusClientClosed is nginx's 499, "client closed request": only ever
// logged, never sent.
const statusClientClosed = 499

// fail answers a proxy fault in the client's error shape and logs it.
func (s *Server) fail(ctx *fasthttp.RequestCtx, x *exchange, err error) {
	status, code := upstreamerr.Fault(err)
	writeClientError(ctx, status, code, "upstream request failed: "+upstreamerr.Describe(err))
	x.status, x.err = status, err
	s.finish(x)
}

// handleReadError answers requests fasthttp could not read: a body over
// max_body_bytes is 413, anything else 400, both in the error shape of the
// path when its headers were read (an Anthropic client gets Anthropic's).
func (s *Server) handleReadError(ctx *fasthttp.RequestCtx, err error) {
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		writeClientError(ctx, fasthttp.StatusRequestEntityTooLarge, codeBodyTooLarge,
			fmt.Sprintf("request body exceeds max_body_bytes (%d)", s.cfg.MaxBodyBytes))
	} else {
		writeClientError(ctx, fasthttp.StatusBadRequest, codeBadRequest, "malformed HTTP request")
	}
	s.log.Warn().Err(err).Int("status", ctx.Response.StatusCode()).Msg("rejected request")
}

// logExchange writes the one access-log line of a request. Headers are
// never logged: they carry the client's keys.
func (s *Server) logExchange(x *exchange) {
	lvl := zerolog.InfoLevel
	if x.err != nil {
		lvl = zerolog.WarnLevel
	}
	ev := s.log.WithLevel(lvl)
	if ev == nil {
		s.hintMissingV1(x) // the level is off
		return
	}
	ev = ev.Str("method", x.method).
		Str("path", x.path).
		Int("status", x.status)
	ev = logline.Dur(ev, "dur_ms", time.Since(x.start))
	ev = logline.Dur(ev, "upstream_ms", x.upstream).
		Int("bytes_in", x.bytesIn).
		Int64("bytes_out", x.bytesOut)
	if x.stream {
		ev = ev.Bool("stream", true)
	}
	if t := x.turn; t != nil {
		ev = t.Log(ev)
	}
	if u := x.usage; u.Found {
		ev = ev.Int("input_tokens", u.InputTokens).Int("output_tokens", u.OutputTokens)
		if u.CachedTokens > 0 || u.CacheWriteTokens > 0 {
			ev = ev.Int("cached_tokens", u.CachedTokens).Int("cache_write_tokens", u.CacheWriteTokens)
		}
		if u.ServerCompacted {
			ev = ev.Int("server_compaction_input_tokens", u.ServerCompaction.InputTokens).
				Int("server_compaction_output_tokens", u.ServerCompaction.OutputTokens)
		}
	}
	if x.err != nil {
		ev = ev.AnErr("error", x.err)
	}
	ev.Msg("request")
	s.hintMissingV1(x)
}

// hintMissingV1 says, once, what a 404 on a conversation endpoint (chat
// completions, Responses) from an upstream configured without a path most
// likely means: `--upstream http://localhost:1234` where the server's
// OpenAI API is under /v1 (LM Studio, llama-server, Ollama, vLLM all put
// it there).
func (s *Server) hintMissingV1(x *exchange) {
	if x.status != fasthttp.StatusNotFound || x.route.up.url.Base != "" || apiOf([]byte(x.path)) == nil || x.route.name == RouteGemini {
		return
	}
	base := x.route.base
	s.noV1Hint.Do(func() {
		s.log.Warn().Str("upstream", base).
			Str("try", strings.TrimRight(base, "/")+"/v1").
			Msg("the upstream answered 404 to " + strings.TrimPrefix(x.path, "/v1") + "; its OpenAI API is most likely under /v1 (set upstream to the base URL a client would use)")
	})
}

// fasthttpLogger sends fasthttp's own connection-level messages (a client
// that hung up, a malformed request) to the debug log: they are the peer's
// doing, and the access log already says what each request got.
type fasthttpLogger struct{ log zerolog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Debug().Msgf(format, args...)
}

// storeFailed reports a store failure on the request path, once per
// interval: the request itself goes on without the record.
func (s *Server) storeFailed(op, msg string, err error) {
	s.metrics.StoreFailed(op)
	s.warn.Warn(s.cfg.Clock(), s.log, msg, err)
}

// originalsOf is the store's originals (nil without a store).
func originalsOf(st state.Store) state.Originals {
	if st == nil {
		return nil
	}
	return st
}
