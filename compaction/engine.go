package compaction

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/internal/logline"
	"github.com/ctxpress/ctxpress/state/recorder"
	"github.com/ctxpress/ctxpress/wire"

	"github.com/rs/zerolog"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// Engine runs summaries: at most one per conversation at a time.
type Engine struct {
	cfg Config
	// policy is cfg's decisions (rewrite.Policy); its Enabled is the one
	// answer to "is compaction on?" (off without a pipeline or a store).
	policy rewrite.Policy
	store  state.Store
	// originals keeps the messages a compaction replaces (keep); nil:
	// they are not kept, and no block says they are.
	originals state.Originals
	pipeline  *rewrite.Pipeline
	sum       *Summarizer
	events    *admin.Bus
	log       zerolog.Logger
	// routes are each format's upstream (by API name): the summariser's
	// default, its key and gate.
	routes map[string]Route
	// observe: nothing is summarised; a compaction due stores a stand-in
	// of its summary's size (ObserveCompaction).
	observe bool

	cost rewrite.CostConfig // prices, for the economics of rewriting sent history
	now  func() time.Time   // the clock of backoff and branch times

	mu       sync.Mutex
	inflight map[state.LineKey]chan struct{} // guarded by mu; closed when the compaction ends
	// preparing is, for a line whose running compaction is a
	// precompaction, the line's request from which its summary is sent
	// (state.Branch.ApplyAt); guarded by mu.
	preparing map[state.LineKey]int
	bg        sync.WaitGroup // background precompactions
	bgCount   atomic.Int64   // background precompactions running
	// waiting counts the requests waiting for a compaction of their line
	// that another request (or a precompaction) started, for metrics.
	waiting atomic.Int64

	// storeFailedAt is when a store write of a compaction last failed
	// (unix nanos; 0: never): compactions pause after it
	// (rewrite.StorePaused).
	storeFailedAt atomic.Int64
	leaseWarn     logline.Limiter // the store's compaction lease failing (takeLease)
	// OnStoreFailure counts a failed store operation (metrics); nil: none.
	OnStoreFailure func(op string)
}

// Deps are what an Engine runs on besides its Config.
type Deps struct {
	Store    state.Store
	Pipeline *rewrite.Pipeline
	// Originals keeps the messages each compaction replaces, in the
	// conversation's namespace, for retrieval (expand.KindCompaction);
	// nil: they are not kept, and summary blocks say nothing of them.
	Originals state.Originals
	Events    *admin.Bus
	Log       zerolog.Logger
	// Routes are the conversations' upstreams by format (API name): each
	// is the default summariser of its format's conversations.
	Routes map[string]Route
	Cost   rewrite.CostConfig // prices, for the economics of rewriting sent history
	Clock  func() time.Time   // the clock of backoff and branch times
	// Observe: observe mode (ObserveCompaction).
	Observe bool
}

// Route is the upstream one format's conversations go to.
type Route struct {
	Upstream string // base URL
	APIKey   string // upstream_api_key, when set
	// Local: a local model server, priced by prefill, whose summary calls
	// and live requests Gate keeps apart.
	Local bool
	Gate  *Gate
}

// NewEngine returns the compaction engine of cfg; compaction is off
// without a pipeline or a store, whatever cfg says.
func NewEngine(cfg Config, d Deps) *Engine {
	c := &Engine{cfg: cfg, store: d.Store, originals: d.Originals, pipeline: d.Pipeline, sum: NewSummarizer(), events: d.Events, log: d.Log,
		routes: d.Routes, cost: d.Cost, now: d.Clock, observe: d.Observe,
		inflight: map[state.LineKey]chan struct{}{}, preparing: map[state.LineKey]int{}}
	if d.Pipeline == nil || d.Store == nil {
		c.cfg.Enabled = false
	}
	c.policy = c.cfg.policy()
	return c
}

// Plan is rewrite's plan of a turn with facts, now.
func (c *Engine) Plan(facts rewrite.TurnFacts) rewrite.Plan { return c.policy.PlanTurn(facts, c.now()) }

// Now is the time the engine decides by.
func (c *Engine) Now() time.Time { return c.now() }

// Trigger is the configured trigger (thresholds, windows).
func (c *Engine) Trigger() rewrite.TriggerConfig { return c.cfg.Trigger }

// Waiting reports how many requests wait now for a compaction of their
// line that another request or a precompaction started.
func (c *Engine) Waiting() int { return int(c.waiting.Load()) }

// Background reports how many summaries are being prepared in the
// background now.
func (c *Engine) Background() int { return int(c.bgCount.Load()) }

// errStoreFailing marks a compaction not attempted because the store
// failed a write within rewrite.StoreRetry.
var errStoreFailing = rewrite.ErrStoreFailing

func (c *Engine) storeFailed() {
	c.StoreFailing()
	c.countStoreFailure("write")
}

// StoreFailing pauses compactions for rewrite.StoreRetry: a store that
// failed a read or a write would lose the summary a call pays for.
func (c *Engine) StoreFailing() { c.storeFailedAt.Store(c.now().UnixNano()) }

func (c *Engine) countStoreFailure(op string) {
	if c.OnStoreFailure != nil {
		c.OnStoreFailure(op)
	}
}

// LastStoreFailure is when a store write of a compaction last failed; zero
// when none did.
func (c *Engine) LastStoreFailure() time.Time {
	if t := c.storeFailedAt.Load(); t != 0 {
		return time.Unix(0, t)
	}
	return time.Time{}
}

// On reports whether compaction is on.
func (c *Engine) On() bool { return c.policy.Enabled }

// Outcome is what a compaction attempt did to one request.
type Outcome struct {
	Compacted bool // a new summary was written for this request
	// Joined: that summary was written by the background compaction this
	// request waited for, which counted itself.
	Joined bool
	Event  admin.Event
	Err    error
}

// errSkipped marks a compaction that was not done although due or asked
// (rewrite.ErrSkipped): not a failure, no backoff.
var errSkipped = rewrite.ErrSkipped

// Options are the rewrite options for a request of line in the state rec:
// the conversation's summaries (not the prepared ones: promotingOptions),
// and the dedups and prunes the line's
// latest forwarded request made (none for a line rec does not have).
func (c *Engine) Options(rec state.Record, line state.ChainHash) rewrite.Options {
	return c.optionsWith(rec, line, false)
}

// promotingOptions are options with the prepared branches too, in
// rec.Branches' order (Result.Applied indexes rec.Branches): what the turn
// that crosses the trigger may send.
func (c *Engine) promotingOptions(rec state.Record, line state.ChainHash) rewrite.Options {
	return c.optionsWith(rec, line, true)
}

func (c *Engine) optionsWith(rec state.Record, line state.ChainHash, prepared bool) rewrite.Options {
	o := rewrite.Options{
		Placement:     c.cfg.SummaryPlacement,
		ConciseOutput: c.cfg.ConciseOutput,
		ForceCommand:  c.On(),
	}
	if !c.On() {
		o.MaxHistoryMessages = c.cfg.MaxHistoryMessages
	}
	// The pipeline applies a stored branch's summary (history.Branch), not
	// its parent or clocks.
	for _, b := range rec.Branches {
		if b.Observed != c.observe {
			// A stand-in is applied to observe mode's would-be requests
			// alone, and only stand-ins are: switching modes changes
			// nothing else.
			continue
		}
		if b.Prepared && !prepared {
			continue
		}
		o.Branches = append(o.Branches, b.Branch)
	}
	if l := rec.LineByID(line); l != nil {
		// The record's: the pipeline only reads them.
		o.PrevDedups, o.PrevPrunes = l.Dedups, l.Prunes
	}
	l := rec.LineByID(line)
	if l == nil {
		cur := rec.CurrentLine()
		l = &cur
	}
	o.Economics = c.economics(l.Numbers)
	return o
}

// CompactionEconomics is what times an automatic compaction: the cost
// model for a hosted provider; none for a local server, whose trigger is
// there to fit its window (priced by prefill, a compaction never pays
// there, and putting it off only brings the window nearer).
func (c *Engine) CompactionEconomics(api string, n history.Numbers) *rewrite.Economics {
	if c.routes[api].Local {
		return nil
	}
	return c.economics(n)
}

// SummariserIsOwn reports whether summaries of a conversation with model
// are written by its own upstream and model, so a summary call can send
// the forwarded history as the provider's cached prefix.
func (c *Engine) SummariserIsOwn(api, model string) bool {
	sc := c.cfg.Summarizer
	return (sc.BaseURL == "" || strings.TrimSuffix(sc.BaseURL, "/") == strings.TrimSuffix(c.routes[api].Upstream, "/")) &&
		(sc.Model == "" || sc.Model == model)
}

// economics is the cost model's view of a line with numbers n; nil for one
// that never reported usage (nothing of it is known to be cached).
func (c *Engine) economics(n history.Numbers) *rewrite.Economics {
	if n.Turns == 0 {
		return nil
	}
	e := rewrite.EconomicsFor(c.cost.PricesFor(n.Model), n.Turns, n.Cache)
	e.Growth = n.Growth
	return &e
}

// acquire starts a compaction of a line, or returns the channel of the one
// already running (mine false).
func (c *Engine) acquire(key state.LineKey) (done chan struct{}, mine bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := c.inflight[key]; ok {
		return ch, false
	}
	ch := make(chan struct{})
	c.inflight[key] = ch
	return ch, true
}

func (c *Engine) release(key state.LineKey, done chan struct{}) {
	c.mu.Lock()
	delete(c.inflight, key)
	delete(c.preparing, key)
	c.mu.Unlock()
	close(done)
}

// Input is what a compaction needs from the request.
type Input struct {
	// API names the request's format (APIChat, APIResponses,
	// APIMessages): a summary call to the conversation's own upstream
	// speaks it. Format reads its body.
	API    string
	Format wire.Format
	Key    state.Key
	Rec    state.Record
	Line   state.LineRef   // the line of history the request extends
	Nums   state.Line      // that line's numbers and breaker, as the request sees them
	Parsed *rewrite.Parsed // the request; only while its handler runs
	Body   []byte          // a copy of it, for a background compaction
	// Forwarded is a copy of the body forwarded at the turn, for a
	// background compaction's summary call to continue, and FitDropped
	// how many messages that body left out to fit (rewrite.Result.FitDropped).
	Forwarded  []byte
	FitDropped int
	Res        rewrite.Result
	Creds      Creds // the client's, for a summary call to its upstream
	Trigger    int
	Kind       string // auto | precompact | manual | rescue
	// ApplyAt is a precompaction's state.Branch.ApplyAt.
	ApplyAt int
	// Urgent: the request would not fit the model's window at all, so any
	// reclaim beats the minimum that protects the prompt cache.
	Urgent bool
}

func (ti *Input) lockKey() state.LineKey { return state.LineKey{Key: ti.Key, Line: ti.Line.ID} }

func (c *Engine) summaryTimeout() time.Duration {
	if c.cfg.Summarizer.Timeout > 0 {
		return c.cfg.Summarizer.Timeout
	}
	return DefaultSummaryTimeout
}

// run writes a summary for ti and stores it as a branch. Failures and skips
// are published as events here; success is published by the caller, which
// knows the tokens after.
func (c *Engine) run(ti Input) (state.Record, admin.Event, error) {
	start := time.Now()
	ev := admin.Event{Time: c.now(), Conversation: ti.Key.ID, Model: ti.Res.Model, Trigger: ti.Kind,
		TokensBefore: ti.Nums.Calibration.Upstream(ti.Res.TokensAfter)}
	fail := func(result string, err error) (state.Record, admin.Event, error) {
		ev.Result, ev.Reason, ev.DurationMS = result, err.Error(), time.Since(start).Milliseconds()
		c.events.Publish(ev)
		return ti.Rec, ev, err
	}
	cal := ti.Nums.Calibration.Scale()
	prop, size, err := c.size(ti)
	if err != nil {
		return fail("skipped", err)
	}
	maxTokens := size.MaxSummaryTokens
	model := c.cfg.Summarizer.Model
	if model == "" {
		model = ti.Res.Model
	}
	sum, err := c.summaryPrompt(ti, prop, model, maxTokens, cal)
	if err != nil {
		return fail("failed", err)
	}
	if r := c.routes[ti.API]; r.Gate != nil && c.summaryBase(ti.API) == r.Upstream {
		// A local server's slots share one KV cache: no live request
		// beside the summary call (see Gate).
		defer r.Gate.Summary()()
	}
	c.events.Started(ev) // a dashboard shows the compaction while the summary is written
	callStart := time.Now()
	// spent is what the summary calls cost (a fallback makes two), for the
	// record and the event.
	sr, spent, err := c.summarize(historyInput{ti: ti, prop: prop, call: c.summaryRequest(ti, model, maxTokens), cal: cal}, sum)
	ev.SummarizerMS = max(1, time.Since(callStart).Milliseconds()) // 0 means no call
	c.countSummary(ti, &ev, spent)
	if err != nil {
		c.backoff(ti)
		return fail("failed", err)
	}
	summary := compactor.Finish(sr.Text, prop.LatestUserAsk)
	now := c.now()
	kept := c.keep(ti, prop)
	summaryTokens := ti.Res.SummaryTokens(summary, kept.Note)
	newRec, err := c.storeSummary(ti, prop, history.Branch{Summary: summary, Kept: kept}, state.SummaryEntry{At: now, Summary: summary,
		CoveredMessages: prop.Covered, Kept: kept, TokensBefore: ev.TokensBefore, TokensAfter: ti.Nums.Calibration.Upstream(prop.KeptTokens + summaryTokens)})
	if err != nil {
		c.storeFailed()
		return fail("failed", fmt.Errorf("storing the summary: %w", err))
	}
	ev.Result, ev.Covered = "ok", prop.Covered
	ev.SummaryTokens = scaled(summaryTokens, cal)
	ev.TokensAfter = ti.Nums.Calibration.Upstream(prop.KeptTokens + summaryTokens)
	ev.DurationMS = time.Since(start).Milliseconds()
	if sr.Truncated {
		c.log.Warn().Str("conversation", ti.Key.ID).Msg("summary hit max_tokens and may be cut short")
	}
	return newRec, ev, nil
}

// size is rewrite's word on what a compaction of ti's kind covers and
// how long its summary may be.
func (c *Engine) size(ti Input) (rewrite.Compaction, rewrite.Sizing, error) {
	nums := ti.Nums.Numbers
	return c.policy.Size(ti.Res, rewrite.Plan{Kind: ti.Kind, Trigger: ti.Trigger, Urgent: ti.Urgent,
		Window:    c.policy.Trigger.WindowOf(ti.Res.Model, nums),
		Effective: nums.Calibration.Upstream(ti.Res.TokensAfter), Economics: c.CompactionEconomics(ti.API, nums),
		SummaryReusesCache: c.SummariserIsOwn(ti.API, ti.Res.Model)}, nums.Calibration)
}

// summaryWindow is the window of a summary call to model for ti's
// conversation: the one the conversation's line learnt from a refusal
// when the call goes to the same upstream and model, else the model's
// configured or known one.
func (c *Engine) summaryWindow(ti Input, model string) int {
	if model == ti.Res.Model && c.SummariserIsOwn(ti.API, model) {
		return c.cfg.Trigger.WindowOf(model, ti.Nums.Numbers)
	}
	return c.cfg.Trigger.ContextWindow(model)
}

// summaryPrompt is the prompt of ti's summary call to model, sized to its
// window in its own tokens (cal: the conversation's calibration).
func (c *Engine) summaryPrompt(ti Input, prop rewrite.Compaction, model string, maxTokens int, cal float64) (compactor.Summary, error) {
	// The summariser counts with its own tokenizer. When it is the
	// conversation's own upstream and model, the conversation's calibration
	// says how far off tiktoken is.
	scale := 1.0
	if c.cfg.Summarizer.BaseURL == "" && model == ti.Res.Model && cal > 1 {
		scale = cal
	}
	return compactor.NewSummary(compactor.SummaryInput{
		Messages: prop.Messages[prop.From:prop.Cut], PrevSummary: prop.PrevSummary,
		Window: c.summaryWindow(ti, model), MaxTokens: maxTokens,
		Count:         func(s string) int { return c.pipeline.Counter().CountText(model, s) },
		MessageTokens: prop.SummarisedTokens, Scale: scale,
	})
}

// storeSummary stores a compaction's summary (sum's Summary and Kept; prop
// gives the rest of the branch) as a branch of ti's record, with its
// history entry, and clears the line's failures (all of its breaker for a
// manual one, which also uses up a scheduled compaction).
func (c *Engine) storeSummary(ti Input, prop rewrite.Compaction, sum history.Branch, entry state.SummaryEntry) (state.Record, error) {
	now := entry.At
	sum.Covered, sum.Hash, sum.Since = prop.Covered, prop.Hash, prop.Since
	return c.store.Update(ti.Key, func(r *state.Record) error {
		r.PutBranch(state.Branch{Branch: sum, Parent: prop.Parent, Prepared: ti.Kind == kindPrecompact, ApplyAt: ti.ApplyAt, Observed: c.observe}, now)
		r.AddSummaryHistory(entry)
		r.UpdateLine(ti.Line, now, func(l *state.Line) {
			l.Breaker = rewrite.BreakerAfterSuccess(l.Breaker, ti.Kind)
			if l.Model == "" {
				l.Model = ti.Res.Model
			}
		})
		if ti.Kind == kindManual {
			r.ForceNext = false
		}
		if ti.Kind == kindPrecompact { // a sync compaction is counted with its turn
			r.Compactions++
		}
		return nil
	})
}

// backoff records a summariser failure: the next automatic compaction of the
// line waits (rewrite.BreakerAfterFailure).
func (c *Engine) backoff(ti Input) {
	now := c.now()
	_, err := c.store.Update(ti.Key, func(r *state.Record) error {
		r.UpdateLine(ti.Line, now, func(l *state.Line) {
			l.Breaker = rewrite.BreakerAfterFailure(l.Breaker, now)
		})
		return nil
	})
	if err != nil {
		c.storeFailed()
		c.log.Warn().Err(err).Msg("cannot record the summariser failure")
	}
}

func (c *Engine) clearForceNext(key state.Key) {
	if _, err := c.store.Update(key, func(r *state.Record) error {
		r.ForceNext = false
		return nil
	}); err != nil {
		c.storeFailed()
		c.log.Warn().Err(err).Msg("cannot clear the scheduled compaction")
	}
}

// IsCompacting reports whether a summary of key is being written now.
func (c *Engine) IsCompacting(key state.Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.inflight {
		if k.Key == key {
			return true
		}
	}
	return false
}

// Running reports how many compactions are in flight now.
func (c *Engine) Running() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inflight)
}

// summaryUsage is what a summary call's answer counts for: its usage, or
// an answer without usage as unreported; a refusal or no answer at all
// is not billed and counts for nothing.
func summaryUsage(sr SummaryResult) state.Usage {
	if sr.Status < 200 || sr.Status > 299 {
		return state.Usage{}
	}
	return recorder.CallUsage(sr.Usage)
}

// countSummary adds u, what ti's summary calls used, to ti's record and
// to its event ev: apart from the turn's, so a summary is never counted
// as a request of the agent's, and whether the summary is then stored or
// not (its tokens were spent either way).
func (c *Engine) countSummary(ti Input, ev *admin.Event, u state.Usage) {
	if u == (state.Usage{}) {
		return
	}
	info := admin.UsageInfoOf(u)
	ev.SummaryUsage = &info
	if _, err := c.store.Update(ti.Key, func(r *state.Record) error {
		r.Summary = r.Summary.Plus(u)
		return nil
	}); err != nil {
		// The store is failing: the compaction's own write says so (its
		// event and warning); one more warning would only repeat it.
		c.storeFailed()
		c.log.Debug().Err(err).Msg("cannot record the summary call's usage")
	}
}
