package admin

import (
	"bufio"
	"cmp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// PathMetrics is where the metrics are served, outside /ctxpress/.
const PathMetrics = "/metrics"

// Metrics are a server's Prometheus collectors, on a registry of its own:
// two servers in one process (tests, embedders) never share or clash, and
// nothing is registered globally.
type Metrics struct {
	// Reg is the registry; a server registers its own gauges on it.
	Reg     *prometheus.Registry
	handler fasthttp.RequestHandler

	requests        *prometheus.CounterVec   // path, status
	upstreamLatency *prometheus.HistogramVec // path
	// paths are requests' and upstreamLatency's series of each path
	// label (pathLabels' order), looked up once each.
	paths         [len(pathLabels)]pathSeries
	activeStreams prometheus.Gauge

	tokensBefore, tokensAfter, tokensSaved prometheus.Counter
	reqTokensBefore, reqTokensAfter        prometheus.Histogram
	reqTokensSaved                         prometheus.Histogram

	squashed       *prometheus.CounterVec // shape
	squashSaved    *prometheus.CounterVec // shape
	dedupHits      prometheus.Counter
	dedupSaved     prometheus.Counter
	pruneHits      prometheus.Counter
	pruneSaved     prometheus.Counter
	compactions    *prometheus.CounterVec   // trigger, result
	summarizer     *prometheus.HistogramVec // result
	breakerTrips   prometheus.Counter
	recordedTurns  prometheus.Counter
	compactionsNow prometheus.GaugeFunc
	upstreamTokens *prometheus.CounterVec // kind
	summaryTokens  *prometheus.CounterVec // kind
	cost           *prometheus.CounterVec // kind
	storeFailures  *prometheus.CounterVec // op
	retrieved      *prometheus.CounterVec // kind, tool, way
	// agentTokens and agentCost are upstreamTokens' and cost's series of
	// conversation requests, summaryTokenSeries and summaryCost
	// summaryTokens' and cost's of summary calls: looked up once, not on
	// every answer.
	agentTokens, summaryTokenSeries tokenSeries
	agentCost, summaryCost          lazySeries
	// retrievals counts Retrieved's calls, retrievedBy by kind, tool and
	// way (Count 0 in the key), for the stats.
	retrievals  atomic.Int64
	retrievedMu sync.Mutex
	retrievedBy map[Retrieval]int64
	// Pricing prices the cost counter; set before the server serves.
	Pricing Pricing
}

// tokenBuckets span a one-line request to a 1M-token context.
var tokenBuckets = prometheus.ExponentialBuckets(256, 2, 13) // 256 … 1,048,576

// NewMetrics registers every collector. inflight reports the compactions
// running now; store, when it implements state.Sizer, gives the db size;
// pipeline, when not nil, its cache's fill.
func NewMetrics(inflight func() int, store state.Store, pipeline *rewrite.Pipeline) *Metrics {
	reg := prometheus.NewRegistry()
	f := factory{reg}
	m := &Metrics{
		Reg: reg,
		requests: f.counterVec("ctxpress_requests_total",
			"Proxied requests by path (known OpenAI endpoints, else \"other\") and answer status.", "path", "status"),
		upstreamLatency: f.histogramVec("ctxpress_upstream_latency_seconds",
			"Time from sending a request upstream to its response headers (a whole non-streamed completion).",
			prometheus.ExponentialBuckets(0.005, 2.5, 12), "path"),
		activeStreams: f.gauge("ctxpress_active_streams", "Streamed answers being relayed now."),
		tokensBefore: f.counter("ctxpress_tokens_before_total",
			"Estimated input tokens of answered conversation requests (chat, Responses, Messages) as the client sent them."),
		tokensAfter: f.counter("ctxpress_tokens_after_total",
			"Estimated input tokens of answered conversation requests (chat, Responses, Messages) as ctxpress forwarded them."),
		tokensSaved: f.counter("ctxpress_tokens_saved_total",
			"Input tokens ctxpress saved on answered conversation requests (chat, Responses, Messages): max(0, before-after) per request."),
		reqTokensBefore: f.histogram("ctxpress_request_tokens_before", "Estimated input tokens per conversation request as sent.", tokenBuckets),
		reqTokensAfter:  f.histogram("ctxpress_request_tokens_after", "Estimated input tokens per conversation request as forwarded.", tokenBuckets),
		reqTokensSaved: f.histogram("ctxpress_request_tokens_saved", "Input tokens saved per conversation request.",
			prometheus.ExponentialBuckets(16, 2, 17)),
		squashed: f.counterVec("ctxpress_squashed_outputs_total",
			"Tool outputs squashed, counted once per forwarded request that carries them, by shape.", "shape"),
		squashSaved: f.counterVec("ctxpress_squash_saved_tokens_total",
			"Tokens squashing saved, per forwarded request, by shape of the tool output.", "shape"),
		dedupHits:     f.counter("ctxpress_dedup_hits_total", "Superseded tool results replaced by a placeholder, per forwarded request."),
		dedupSaved:    f.counter("ctxpress_dedup_saved_tokens_total", "Tokens dedup saved, per forwarded request."),
		pruneHits:     f.counter("ctxpress_prune_hits_total", "Tool results of earlier user turns sent as their pruned line, per forwarded request."),
		pruneSaved:    f.counter("ctxpress_prune_saved_tokens_total", "Tokens pruning saved, per forwarded request."),
		compactions:   f.counterVec("ctxpress_compactions_total", "Compactions by trigger (auto, precompact, manual) and result (ok, skipped, failed).", "trigger", "result"),
		summarizer:    f.histogramVec("ctxpress_summarizer_duration_seconds", "Duration of summary calls by result (ok, failed).", prometheus.ExponentialBuckets(0.05, 2, 14), "result"),
		breakerTrips:  f.counter("ctxpress_breaker_trips_total", "Conversations whose compaction circuit breaker opened."),
		recordedTurns: f.counter("ctxpress_recorded_turns_total", "Conversation turns written to the conversation store."),
		upstreamTokens: f.counterVec("ctxpress_upstream_tokens_total",
			"Tokens the upstream reported for answered conversation requests, by kind: input (the whole prompt), cache_read and cache_write (the parts of it read from and written to the prompt cache), output.", "kind"),
		summaryTokens: f.counterVec("ctxpress_summary_tokens_total",
			"Tokens the summariser reported for ctxpress's own summary calls, by kind: input, cache_read, cache_write, output.", "kind"),
		cost: f.counterVec("ctxpress_cost_dollars_total",
			"What the reported usage cost at per-model prices, by kind: agent (conversation requests) or summary (ctxpress's summary calls). A local upstream is priced in millions of prefill-token equivalents instead.", "kind"),
		storeFailures: f.counterVec("ctxpress_store_failures_total",
			"Failed operations on the conversation store (a Redis down or slow, a full disk), by op: read, write (turn records, summaries, admin edits), lease (the compaction lease across replicas). Logged once per interval; requests go on without the record.", "op"),
		retrieved: f.counterVec("ctxpress_originals_retrieved_total",
			"Originals brought back, by the step that replaced them (kind: squash, prune, dedup, compaction), the tool whose output it was, and the way (file: the agent read the file a marker named; http; tool: the ctxpress_expand tool; cli). Each one means a marker hid something an agent or its user needed: the fidelity signal, live.", "kind", "tool", "way"),
	}
	for i := range m.paths {
		m.paths[i].label = pathLabels[i]
	}
	m.compactionsNow = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ctxpress_compactions_in_flight",
		Help: "Compactions (summary calls) running now."}, func() float64 { return float64(inflight()) })
	reg.MustRegister(m.compactionsNow,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if pipeline != nil {
		cacheGauge := func(name, help string, v func(entries int, bytes, limit int64) float64) {
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
				func() float64 { return v(pipeline.CacheStats()) }))
		}
		cacheGauge("ctxpress_rewrite_cache_bytes", "Bytes held by the rewrite cache (token counts, squash results, per-message facts).",
			func(_ int, bytes, _ int64) float64 { return float64(bytes) })
		cacheGauge("ctxpress_rewrite_cache_limit_bytes", "The rewrite cache's bound (cache_bytes); it evicts the least recently used entries beyond it.",
			func(_ int, _, limit int64) float64 { return float64(limit) })
		cacheGauge("ctxpress_rewrite_cache_entries", "Entries in the rewrite cache.",
			func(entries int, _, _ int64) float64 { return float64(entries) })
	}
	if sz, ok := store.(state.Sizer); ok {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ctxpress_db_size_bytes",
			Help: "Size of the conversation db file."}, func() float64 {
			n, err := sz.Size()
			if err != nil {
				return -1 // a scrape must not fail because the file is gone; -1 says so
			}
			return float64(n)
		}))
	}
	if mp, ok := store.(state.Mapper); ok {
		mapping := func(v func(state.Mapping) int64) func() float64 {
			return func() float64 {
				m, err := mp.Mapping()
				if err != nil {
					return -1 // not readable here (only Linux says), or the store is closed
				}
				return float64(v(m))
			}
		}
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ctxpress_db_mapped_bytes",
			Help: "Address space of the conversation db file's memory map (the file rounded up to bbolt's next mmap step)."},
			mapping(func(m state.Mapping) int64 { return m.Mapped })))
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ctxpress_db_resident_bytes",
			Help: "Pages of the db file's map in ctxpress's RSS: page cache the kernel can reclaim, at most the file's size."},
			mapping(func(m state.Mapping) int64 { return m.Resident })))
	}
	m.handler = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		Registry: reg, ErrorHandling: promhttp.ContinueOnError,
	}))
	return m
}

// factory creates collectors and registers them on one registry.
type factory struct{ reg *prometheus.Registry }

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}

func (f factory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}

// pathLabels are the path label values of ctxpress_requests_total and
// ctxpress_upstream_latency_seconds: /v1/<endpoint> for the first path
// segments (after /v1) that get their own, "other" for anything else, so
// a client cannot grow the label set without bound.
var pathLabels = [...]string{
	"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/models", "/v1/responses",
	"/v1/moderations", "/v1/images", "/v1/audio", "/v1/files", "/v1/batches",
	"/v1/messages", "/v1/rerank", "/v1/tokenize", "/v1/health",
	// Gemini's turns, whatever the model the path names.
	"/v1beta/models:generateContent", "/v1beta/models:streamGenerateContent", "other",
}

// Indexes in pathLabels.
const (
	pathChatIndex         = 0
	pathGeminiIndex       = len(pathLabels) - 3
	pathGeminiStreamIndex = len(pathLabels) - 2
	pathOtherIndex        = len(pathLabels) - 1
)

// endpointIndex maps a known first segment to its label's index; chat is
// known only as /chat/completions.
var endpointIndex = func() map[string]int {
	m := make(map[string]int, len(pathLabels))
	for i, label := range pathLabels[1:pathGeminiIndex] {
		m[strings.TrimPrefix(label, "/v1/")] = i + 1
	}
	return m
}()

// KnownPath is p when it is one of the paths the metrics name (the agents'
// API paths among them, with /v1 as clients send it), as a string made
// once.
func KnownPath(p []byte) (string, bool) {
	for _, known := range pathLabels[:pathOtherIndex] {
		if string(p) == known {
			return known, true
		}
	}
	return "", false
}

// MetricPath is the path label of a proxied request: /v1/<endpoint> for a
// known endpoint (with or without the client's /v1), "other" else.
func MetricPath(path string) string { return pathLabels[metricPathIndex(path)] }

// metricPathIndex is metricPath's index in pathLabels.
func metricPathIndex(path string) int {
	if strings.Contains(path, "/models/") {
		switch {
		case strings.HasSuffix(path, ":generateContent"):
			return pathGeminiIndex
		case strings.HasSuffix(path, ":streamGenerateContent"):
			return pathGeminiStreamIndex
		}
	}
	p := strings.TrimPrefix(path, "/v1")
	if p == "/chat/completions" {
		return pathChatIndex
	}
	seg, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	if i, ok := endpointIndex[seg]; ok {
		return i
	}
	return pathOtherIndex
}

// Exchange is one proxied request as the metrics count it.
type Exchange struct {
	Path   string
	Status int
	// Upstream is the time to the upstream's response headers; 0 when
	// none was sent.
	Upstream time.Duration
	// Turn is what the rewrite of an understood conversation request did,
	// when the upstream answered it 2xx; nil otherwise.
	Turn *Turn
}

// Turn is one answered conversation request's rewrite and usage.
type Turn struct {
	Model                     string
	TokensBefore, TokensAfter int
	Squashed                  []rewrite.SquashStat
	Deduped, DedupSaved       int
	Pruned, PruneSaved        int
	// Usage is what the upstream billed (found: UsageFound).
	Usage      state.Usage
	UsageFound bool
}

// Exchange counts one proxied request once its answer is sent, and what
// the rewrite of an understood conversation request did when the upstream
// answered it 2xx (the rule of the conversation record, so the dashboard
// and these counters agree; they differ only by turns no record keeps:
// ephemeral ones and those without a conversation id).
func (m *Metrics) Exchange(x Exchange) {
	ps := &m.paths[metricPathIndex(x.Path)]
	ps.counter(m.requests, x.Status).Inc()
	if x.Upstream > 0 {
		ps.latency.get(m.upstreamLatency, ps.label).Observe(x.Upstream.Seconds())
	}
	if t := x.Turn; t != nil {
		m.turn(t)
		if t.UsageFound {
			m.agentTokens.add(m.upstreamTokens, t.Usage)
			m.agentCost.get(m.cost, "agent").Add(m.Pricing.Agent.PricesFor(t.Model).Cost(Billable(t.Usage)))
		}
	}
}

// pathSeries are one path label's series, each looked up on its first use
// (when WithLabelValues creates it, so that /metrics shows only series
// that counted something) and then kept: the vectors' own lookups hash the
// label values on every request.
type pathSeries struct {
	label   string
	latency lazyObserver
	// byStatus holds the request counters of statuses 0-599 (every HTTP
	// status); another one (an upstream may send any three digits) is
	// looked up in the vector each time.
	byStatus [600]atomic.Pointer[prometheus.Counter]
}

// counter is the series of ps's path and status in vec.
func (ps *pathSeries) counter(vec *prometheus.CounterVec, status int) prometheus.Counter {
	if status < 0 || status >= len(ps.byStatus) {
		return vec.WithLabelValues(ps.label, strconv.Itoa(status))
	}
	slot := &ps.byStatus[status]
	if c := slot.Load(); c != nil {
		return *c
	}
	// Two first requests may both look it up: WithLabelValues gives both
	// the same series.
	c := vec.WithLabelValues(ps.label, strconv.Itoa(status))
	slot.Store(&c)
	return c
}

// lazyObserver is one series of a histogram vector, looked up on its first
// use and then kept.
type lazyObserver struct {
	once sync.Once
	o    prometheus.Observer
}

func (l *lazyObserver) get(vec *prometheus.HistogramVec, label string) prometheus.Observer {
	l.once.Do(func() { l.o = vec.WithLabelValues(label) })
	return l.o
}

// turn counts the tokens and savings of one answered conversation turn.
func (m *Metrics) turn(t *Turn) {
	before, after := t.TokensBefore, t.TokensAfter
	saved := max(0, before-after)
	m.tokensBefore.Add(float64(before))
	m.tokensAfter.Add(float64(after))
	m.tokensSaved.Add(float64(saved))
	m.reqTokensBefore.Observe(float64(before))
	m.reqTokensAfter.Observe(float64(after))
	m.reqTokensSaved.Observe(float64(saved))
	for _, st := range t.Squashed {
		shape := st.Shape
		if shape == "" {
			shape = "unknown"
		}
		m.squashed.WithLabelValues(shape).Inc()
		m.squashSaved.WithLabelValues(shape).Add(float64(max(0, st.TokensBefore-st.TokensAfter)))
	}
	if t.Deduped > 0 {
		m.dedupHits.Add(float64(t.Deduped))
		m.dedupSaved.Add(float64(t.DedupSaved))
	}
	if t.Pruned > 0 {
		m.pruneHits.Add(float64(t.Pruned))
		m.pruneSaved.Add(float64(t.PruneSaved))
	}
}

// lazySeries is one series of a counter vector, looked up on its first use
// (when WithLabelValues would create it) and then kept.
type lazySeries struct {
	once sync.Once
	c    prometheus.Counter
}

func (l *lazySeries) get(vec *prometheus.CounterVec, labels ...string) prometheus.Counter {
	l.once.Do(func() { l.c = vec.WithLabelValues(labels...) })
	return l.c
}

// tokenSeries are the series of a counter of tokens by kind, looked up
// once.
type tokenSeries struct {
	input, cacheRead, cacheWrite, output lazySeries
}

// add adds u to vec, by kind.
func (t *tokenSeries) add(vec *prometheus.CounterVec, u state.Usage) {
	t.input.get(vec, "input").Add(float64(u.Input))
	t.cacheRead.get(vec, "cache_read").Add(float64(u.Cached))
	t.cacheWrite.get(vec, "cache_write").Add(float64(u.CacheWrite))
	t.output.get(vec, "output").Add(float64(u.Output))
}

// Compaction counts a compaction event (not a start), and what its
// summary calls cost.
func (m *Metrics) Compaction(e Event) {
	m.compactions.WithLabelValues(e.Trigger, e.Result).Inc()
	if u := e.SummaryUsage; u != nil {
		su := state.Usage{Input: u.InputTokens, Cached: u.CachedTokens, CacheWrite: u.CacheWriteTokens, Output: u.OutputTokens}
		m.summaryTokenSeries.add(m.summaryTokens, su)
		m.summaryCost.get(m.cost, "summary").Add(m.Pricing.SummaryPrices(e.Model).Cost(Billable(su)))
	}
	if e.SummarizerMS > 0 {
		m.summarizer.WithLabelValues(e.Result).Observe(float64(e.SummarizerMS) / 1000)
	}
}

// Recorded counts a turn written to the store, and a breaker it opened.
func (m *Metrics) Recorded(tripped bool) {
	if tripped {
		m.breakerTrips.Inc()
	}
	m.recordedTurns.Inc() // last: a scrape that counts the turn counts its trip
}

// StoreFailed counts a failed store operation of op (read, write, lease).
func (m *Metrics) StoreFailed(op string) { m.storeFailures.WithLabelValues(op).Inc() }

// Retrieved counts one original brought back (turn.Keeper.Retrieved). A
// tool's name is the agent's to choose: it is cut so that a label stays
// short.
func (m *Metrics) Retrieved(kind, tool, way string) {
	if len(tool) > 64 {
		tool = tool[:64]
	}
	m.retrieved.WithLabelValues(kind, tool, way).Inc()
	m.retrievals.Add(1)
	m.retrievedMu.Lock()
	defer m.retrievedMu.Unlock()
	if m.retrievedBy == nil {
		m.retrievedBy = map[Retrieval]int64{}
	}
	if _, ok := m.retrievedBy[Retrieval{kind, tool, way, 0}]; ok || len(m.retrievedBy) < maxRetrievalRows {
		m.retrievedBy[Retrieval{kind, tool, way, 0}]++
	}
}

// maxRetrievalRows bounds the stats' retrieval table: tool names are the
// agents' to choose.
const maxRetrievalRows = 64

// Retrieval is how often originals of one kind, from one tool's output,
// were brought back one way (Stats.Retrieved).
type Retrieval struct {
	Kind  string `json:"kind"`
	Tool  string `json:"tool"`
	Way   string `json:"way"`
	Count int64  `json:"count"`
}

// retrievedRows is the retrieval table, most retrieved first.
func (m *Metrics) retrievedRows() []Retrieval {
	m.retrievedMu.Lock()
	defer m.retrievedMu.Unlock()
	rows := make([]Retrieval, 0, len(m.retrievedBy))
	for k, n := range m.retrievedBy {
		k.Count = n
		rows = append(rows, k)
	}
	slices.SortFunc(rows, func(a, b Retrieval) int {
		if a.Count != b.Count {
			return cmp.Compare(b.Count, a.Count)
		}
		return cmp.Compare(a.Kind+a.Tool+a.Way, b.Kind+b.Tool+b.Way)
	})
	return rows
}

// CountStream wraps a stream writer so the gauge counts it while it runs.
func (m *Metrics) CountStream(w fasthttp.StreamWriter) fasthttp.StreamWriter {
	return func(bw *bufio.Writer) {
		m.activeStreams.Inc()
		defer m.activeStreams.Dec()
		w(bw)
	}
}

// serveMetrics serves /metrics in the Prometheus text format. It follows
// the admin rule (admin token, else loopback) unless metrics are public.
func (a *Admin) ServeMetrics(ctx *fasthttp.RequestCtx) {
	if !a.cfg.MetricsPublic && !a.Allowed(ctx) {
		writeError(ctx, fasthttp.StatusUnauthorized, "admin_unauthorized",
			"/metrics needs the admin token (Authorization: Bearer …; admin_token, env CTXPRESS_ADMIN_TOKEN), or a loopback client when none is set; or set metrics.public")
		return
	}
	if !ctx.IsGet() && !ctx.IsHead() {
		writeError(ctx, fasthttp.StatusMethodNotAllowed, "method_not_allowed", "/metrics answers GET")
		return
	}
	a.metrics.handler(ctx)
}

// Recorded is the recorder's callback: a turn is in the store. It counts
// it and tells the events' subscribers.
func (a *Admin) Recorded(rec state.Record, tripped bool) {
	a.metrics.Recorded(tripped)
	e := TurnEvent{Time: rec.UpdatedAt, Conversation: rec.Key.ID, Namespace: rec.Key.Namespace,
		Model: rec.Model, Requests: rec.Requests}
	if n := len(rec.Turns); n > 0 {
		t := rec.Turns[n-1]
		e.TokensBefore, e.TokensAfter, e.InputTokens, e.Compacted = t.TokensBefore, t.TokensAfter, t.InputTokens, t.Compacted
		e.CachedTokens, e.CacheWriteTokens = t.CachedTokens, t.CacheWriteTokens
		e.ServerCompactionInputTokens, e.ServerCompactionOutputTokens = t.ServerCompactionInput, t.ServerCompactionOutput
	}
	a.events.Turn(e)
}
