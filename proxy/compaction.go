package proxy

import (
	"fmt"
	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/compaction"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
	"github.com/rs/zerolog"
)

// CompactionConfig says when and how conversations are compacted. The zero
// value is compaction off; zero numeric fields mean the default on them.
// The fields that decide when and how much are rewrite.Policy's (see
// policy), documented there.
type CompactionConfig struct {
	Enabled bool
	// Trigger: threshold_tokens, threshold_ratio, models, default_context_window.
	Trigger rewrite.TriggerConfig
	// TargetRatio: a compaction aims below this fraction of the trigger; 0
	// means DefaultTargetRatio.
	TargetRatio float64
	// MinReclaimTokens: below this reclaim an automatic compaction does not
	// rewrite history; 0 means min(4096, 20% of the trigger).
	MinReclaimTokens int
	// KeepRecent messages stay raw; 0 means DefaultKeepRecent.
	KeepRecent int
	// KeepRecentTokens of raw tail at least; 0 means 5% of the trigger.
	KeepRecentTokens int
	// Precompact prepares the summary in the background after a turn the
	// upstream counted at PrecompactRatio (0: 0.5 in front of a hosted
	// upstream, where the cost model decides whether it pays, 0.7 in front
	// of a local one) of the trigger or more (rewrite.Policy.Precompact).
	Precompact      bool
	PrecompactRatio float64
	// SummaryPlacement is "auto" (default, also ""), "system" or "user"
	// (rewrite.Options.Placement).
	SummaryPlacement string
	Summarizer       SummarizerConfig
	// MaxHistoryMessages, with compaction off, keeps the leading system
	// messages and the last N messages; 0 is off.
	MaxHistoryMessages int
	// ConciseOutput appends a terse-writing instruction to the system prompt.
	ConciseOutput bool
	// WebhookURL receives every compaction event as a JSON POST.
	WebhookURL string
}

// SummarizerConfig says where summaries are written; empty fields mean the
// request's own upstream, model and Authorization.
type SummarizerConfig struct {
	BaseURL string
	// API is the form of the summary call to BaseURL: "chat" (also ""),
	// "responses" or "messages" (Anthropic's, with APIKey as x-api-key).
	// Without BaseURL the call goes to the request's own upstream in the
	// request's own format, and API must be empty.
	API    string
	Model  string
	APIKey string
	// Timeout of one summary call; 0 means compaction.DefaultSummaryTimeout.
	Timeout time.Duration
	// MaxTokens of the summary; 0 means compactor.DefaultMaxTokens(trigger):
	// min(4000, 25% of the trigger).
	MaxTokens int
	// Reasoning says, by exact model name, whether a summary call for that
	// model (the request's own or Model) takes the reasoning parameter
	// rules (max_completion_tokens, no temperature) or the classic ones,
	// over wire.RulesFor's family table. Nil means the table alone.
	Reasoning map[string]bool
}

// reasoning is the config's word on model's parameter rules, nil when it
// has none.
func (c SummarizerConfig) reasoning(model string) *bool {
	if r, ok := c.Reasoning[model]; ok {
		return &r
	}
	return nil
}

// policy is c's decision part: what rewrite plans and sizes compactions by.
func (c CompactionConfig) policy() rewrite.Policy {
	return rewrite.Policy{Enabled: c.Enabled, Trigger: c.Trigger, TargetRatio: c.TargetRatio,
		MinReclaimTokens: c.MinReclaimTokens, KeepRecent: c.KeepRecent, KeepRecentTokens: c.KeepRecentTokens,
		Precompact: c.Precompact, PrecompactRatio: c.PrecompactRatio, MaxSummaryTokens: c.Summarizer.MaxTokens}
}

// Validate reports the first problem with c.
func (c CompactionConfig) Validate() error {
	switch c.SummaryPlacement {
	case "", rewrite.PlacementAuto, rewrite.PlacementSystem, rewrite.PlacementUser:
	default:
		return fmt.Errorf("compaction.summary_placement %q: want auto, system or user", c.SummaryPlacement)
	}
	for name, r := range map[string]float64{"threshold_ratio": c.Trigger.ThresholdRatio, "target_ratio": c.TargetRatio, "precompact_ratio": c.PrecompactRatio} {
		if r < 0 || r > 1 {
			return fmt.Errorf("compaction.%s %v: want a fraction between 0 and 1", name, r)
		}
	}
	if c.Summarizer.BaseURL != "" {
		if _, err := parseUpstream(c.Summarizer.BaseURL); err != nil {
			return fmt.Errorf("compaction.summarizer.base_url: %w", err)
		}
	}
	switch {
	case c.Summarizer.API != "" && c.Summarizer.BaseURL == "":
		return fmt.Errorf("compaction.summarizer.api %q: only with a base_url (without one, the summary call speaks the conversation's own API)", c.Summarizer.API)
	case c.Summarizer.API != "" && c.Summarizer.API != apiChat && c.Summarizer.API != apiResponses && c.Summarizer.API != apiMessages:
		return fmt.Errorf("compaction.summarizer.api %q: want chat, responses or messages", c.Summarizer.API)
	}
	return nil
}

// compactions runs summaries: at most one per conversation at a time.
type compactions struct {
	cfg CompactionConfig
	// policy is cfg's decisions (rewrite.Policy); its Enabled is the one
	// answer to "is compaction on?" (off without a pipeline or a store).
	policy   rewrite.Policy
	store    state.Store
	pipeline *rewrite.Pipeline
	sum      *compaction.Summarizer
	events   *admin.Bus
	log      zerolog.Logger
	upstream string // default summariser base URL
	apiKey   string // upstream_api_key, when set

	cost rewrite.CostConfig // prices, for the economics of rewriting sent history
	now  func() time.Time   // the clock of backoff and branch times
	gate *localGate         // nil unless the upstream is a local server

	mu       sync.Mutex
	inflight map[lineKey]chan struct{} // guarded by mu; closed when the compaction ends
	// preparing is, for a line whose running compaction is a
	// precompaction, the line's request from which its summary is sent
	// (state.Branch.ApplyAt); guarded by mu.
	preparing map[lineKey]int
	bg        sync.WaitGroup // background precompactions
	bgCount   atomic.Int64   // background precompactions running
	// waiting counts the requests waiting for a compaction of their line
	// that another request (or a precompaction) started, for metrics.
	waiting atomic.Int64

	// storeFailedAt is when a store write of a compaction last failed
	// (unix nanos; 0: never): compactions pause after it
	// (rewrite.StorePaused).
	storeFailedAt atomic.Int64
	leaseWarn     warnLimiter // the store's compaction lease failing (takeLease)
	// onStoreFailure counts a failed store operation (metrics); nil: none.
	onStoreFailure func(op string)
}

// errStoreFailing marks a compaction not attempted because the store
// failed a write within rewrite.StoreRetry.
var errStoreFailing = rewrite.ErrStoreFailing

func (c *compactions) storeFailed() {
	c.storeFailing()
	c.countStoreFailure("write")
}

// storeFailing pauses compactions for rewrite.StoreRetry: a store that
// failed a read or a write would lose the summary a call pays for.
func (c *compactions) storeFailing() { c.storeFailedAt.Store(c.now().UnixNano()) }

func (c *compactions) countStoreFailure(op string) {
	if c.onStoreFailure != nil {
		c.onStoreFailure(op)
	}
}

// lastStoreFailure is when a store write of a compaction last failed; zero
// when none did.
func (c *compactions) lastStoreFailure() time.Time {
	if t := c.storeFailedAt.Load(); t != 0 {
		return time.Unix(0, t)
	}
	return time.Time{}
}

// on reports whether compaction is on.
func (c *compactions) on() bool { return c.policy.Enabled }

// outcome is what a compaction attempt did to one request.
type outcome struct {
	compacted bool // a new summary was written for this request
	// joined: that summary was written by the background compaction this
	// request waited for, which counted itself.
	joined bool
	event  admin.Event
	err    error
}

// errSkipped marks a compaction that was not done although due or asked
// (rewrite.ErrSkipped): not a failure, no backoff.
var errSkipped = rewrite.ErrSkipped

// options are the rewrite options for a request of line in the state rec:
// the conversation's summaries (not the prepared ones: promotingOptions),
// and the dedups and prunes the line's
// latest forwarded request made (none for a line rec does not have).
func (c *compactions) options(rec state.Record, line state.ChainHash) rewrite.Options {
	return c.optionsWith(rec, line, false)
}

// promotingOptions are options with the prepared branches too, in
// rec.Branches' order (Result.Applied indexes rec.Branches): what the turn
// that crosses the trigger may send.
func (c *compactions) promotingOptions(rec state.Record, line state.ChainHash) rewrite.Options {
	return c.optionsWith(rec, line, true)
}

func (c *compactions) optionsWith(rec state.Record, line state.ChainHash, prepared bool) rewrite.Options {
	o := rewrite.Options{
		Placement:     c.cfg.SummaryPlacement,
		ConciseOutput: c.cfg.ConciseOutput,
		ForceCommand:  c.on(),
	}
	if !c.on() {
		o.MaxHistoryMessages = c.cfg.MaxHistoryMessages
	}
	// The pipeline applies a stored branch's summary (history.Branch), not
	// its parent or clocks.
	for _, b := range rec.Branches {
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

// compactionEconomics is what times an automatic compaction: the cost
// model for a hosted provider; none for a local server, whose trigger is
// there to fit its window (priced by prefill, a compaction never pays
// there, and putting it off only brings the window nearer).
func (c *compactions) compactionEconomics(n history.Numbers) *rewrite.Economics {
	if c.cost.Local {
		return nil
	}
	return c.economics(n)
}

// summariserIsOwn reports whether summaries of a conversation with model
// are written by its own upstream and model, so a summary call can send
// the forwarded history as the provider's cached prefix.
func (c *compactions) summariserIsOwn(model string) bool {
	sc := c.cfg.Summarizer
	return (sc.BaseURL == "" || strings.TrimSuffix(sc.BaseURL, "/") == strings.TrimSuffix(c.upstream, "/")) &&
		(sc.Model == "" || sc.Model == model)
}

// economics is the cost model's view of a line with numbers n; nil for one
// that never reported usage (nothing of it is known to be cached).
func (c *compactions) economics(n history.Numbers) *rewrite.Economics {
	if n.Turns == 0 {
		return nil
	}
	e := rewrite.EconomicsFor(c.cost.PricesFor(n.Model), n.Turns, n.Cache)
	e.Growth = n.Growth
	return &e
}

// acquire starts a compaction of a line, or returns the channel of the one
// already running (mine false).
func (c *compactions) acquire(key lineKey) (done chan struct{}, mine bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := c.inflight[key]; ok {
		return ch, false
	}
	ch := make(chan struct{})
	c.inflight[key] = ch
	return ch, true
}

func (c *compactions) release(key lineKey, done chan struct{}) {
	c.mu.Lock()
	delete(c.inflight, key)
	delete(c.preparing, key)
	c.mu.Unlock()
	close(done)
}

// turnInput is what a compaction needs from the request.
type turnInput struct {
	api    *api // the request's wire format
	key    state.Key
	rec    state.Record
	line   lineRef         // the line of history the request extends
	nums   state.Line      // that line's numbers and breaker, as the request sees them
	parsed *rewrite.Parsed // the request; only while its handler runs
	body   []byte          // a copy of it, for a background compaction
	// forwarded is a copy of the body forwarded at the turn, for a
	// background compaction's summary call to continue, and fitDropped
	// how many messages that body left out to fit (rewrite.Result.FitDropped).
	forwarded  []byte
	fitDropped int
	res        rewrite.Result
	creds      clientCreds // the client's, for a summary call to its upstream
	trigger    int
	kind       string // auto | precompact | manual
	// applyAt is a precompaction's state.Branch.ApplyAt.
	applyAt int
	// urgent: the request would not fit the model's window at all, so any
	// reclaim beats the minimum that protects the prompt cache.
	urgent bool
}

func (ti *turnInput) lockKey() lineKey { return lineKey{key: ti.key, line: ti.line.id} }

func (c *compactions) summaryTimeout() time.Duration {
	if c.cfg.Summarizer.Timeout > 0 {
		return c.cfg.Summarizer.Timeout
	}
	return compaction.DefaultSummaryTimeout
}

// run writes a summary for ti and stores it as a branch. Failures and skips
// are published as events here; success is published by the caller, which
// knows the tokens after.
func (c *compactions) run(ti turnInput) (state.Record, admin.Event, error) {
	start := time.Now()
	ev := admin.Event{Time: c.now(), Conversation: ti.key.ID, Model: ti.res.Model, Trigger: ti.kind,
		TokensBefore: ti.nums.Calibration.Upstream(ti.res.TokensAfter)}
	fail := func(result string, err error) (state.Record, admin.Event, error) {
		ev.Result, ev.Reason, ev.DurationMS = result, err.Error(), time.Since(start).Milliseconds()
		c.events.Publish(ev)
		return ti.rec, ev, err
	}
	cal := ti.nums.Calibration.Scale()
	nums := ti.nums.Numbers
	prop, size, err := c.policy.Size(ti.res, rewrite.Plan{Kind: ti.kind, Trigger: ti.trigger, Urgent: ti.urgent,
		Window:    c.policy.Trigger.WindowOf(ti.res.Model, nums),
		Effective: nums.Calibration.Upstream(ti.res.TokensAfter), Economics: c.compactionEconomics(nums),
		SummaryReusesCache: c.summariserIsOwn(ti.res.Model)}, nums.Calibration)
	if err != nil {
		return fail("skipped", err)
	}
	maxTokens := size.MaxSummaryTokens
	model := c.cfg.Summarizer.Model
	if model == "" {
		model = ti.res.Model
	}
	sum, err := c.summaryPrompt(ti, prop, model, maxTokens, cal)
	if err != nil {
		return fail("failed", err)
	}
	if c.gate != nil && c.summaryBase() == c.upstream {
		// A local server's slots share one KV cache: no live request
		// beside the summary call (see localGate).
		defer c.gate.summary()()
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
	summaryTokens := ti.res.SummaryTokens(summary)
	newRec, err := c.storeSummary(ti, prop, summary, state.SummaryEntry{At: now, Summary: summary, CoveredMessages: prop.Covered,
		TokensBefore: ev.TokensBefore, TokensAfter: ti.nums.Calibration.Upstream(prop.KeptTokens + summaryTokens)})
	if err != nil {
		c.storeFailed()
		return fail("failed", fmt.Errorf("storing the summary: %w", err))
	}
	ev.Result, ev.Covered = "ok", prop.Covered
	ev.SummaryTokens = scaled(summaryTokens, cal)
	ev.TokensAfter = ti.nums.Calibration.Upstream(prop.KeptTokens + summaryTokens)
	ev.DurationMS = time.Since(start).Milliseconds()
	if sr.Truncated {
		c.log.Warn().Str("conversation", ti.key.ID).Msg("summary hit max_tokens and may be cut short")
	}
	return newRec, ev, nil
}

// summaryWindow is the window of a summary call to model for ti's
// conversation: the one the conversation's line learnt from a refusal
// when the call goes to the same upstream and model, else the model's
// configured or known one.
func (c *compactions) summaryWindow(ti turnInput, model string) int {
	if model == ti.res.Model && c.summariserIsOwn(model) {
		return c.cfg.Trigger.WindowOf(model, ti.nums.Numbers)
	}
	return c.cfg.Trigger.ContextWindow(model)
}

// summaryPrompt is the prompt of ti's summary call to model, sized to its
// window in its own tokens (cal: the conversation's calibration).
func (c *compactions) summaryPrompt(ti turnInput, prop rewrite.Compaction, model string, maxTokens int, cal float64) (compactor.Summary, error) {
	// The summariser counts with its own tokenizer. When it is the
	// conversation's own upstream and model, the conversation's calibration
	// says how far off tiktoken is.
	scale := 1.0
	if c.cfg.Summarizer.BaseURL == "" && model == ti.res.Model && cal > 1 {
		scale = cal
	}
	return compactor.NewSummary(compactor.SummaryInput{
		Messages: prop.Messages[prop.From:prop.Cut], PrevSummary: prop.PrevSummary,
		Window: c.summaryWindow(ti, model), MaxTokens: maxTokens,
		Count:         func(s string) int { return c.pipeline.Counter().CountText(model, s) },
		MessageTokens: prop.SummarisedTokens, Scale: scale,
	})
}

// storeSummary stores a compaction's summary as a branch of ti's record,
// with its history entry, and clears the line's failures (all of its
// breaker for a manual one, which also uses up a scheduled compaction).
func (c *compactions) storeSummary(ti turnInput, prop rewrite.Compaction, summary string, entry state.SummaryEntry) (state.Record, error) {
	now := entry.At
	return c.store.Update(ti.key, func(r *state.Record) error {
		r.PutBranch(state.Branch{Branch: history.Branch{Summary: summary, Covered: prop.Covered, Hash: prop.Hash, Since: prop.Since},
			Parent: prop.Parent, Prepared: ti.kind == kindPrecompact, ApplyAt: ti.applyAt}, now)
		r.AddSummaryHistory(entry)
		updateLine(r, ti.line, now, func(l *state.Line) {
			l.Breaker = rewrite.BreakerAfterSuccess(l.Breaker, ti.kind)
			if l.Model == "" {
				l.Model = ti.res.Model
			}
		})
		if ti.kind == kindManual {
			r.ForceNext = false
		}
		if ti.kind == kindPrecompact { // a sync compaction is counted with its turn
			r.Compactions++
		}
		return nil
	})
}

// backoff records a summariser failure: the next automatic compaction of the
// line waits (rewrite.BreakerAfterFailure).
func (c *compactions) backoff(ti turnInput) {
	now := c.now()
	_, err := c.store.Update(ti.key, func(r *state.Record) error {
		updateLine(r, ti.line, now, func(l *state.Line) {
			l.Breaker = rewrite.BreakerAfterFailure(l.Breaker, now)
		})
		return nil
	})
	if err != nil {
		c.storeFailed()
		c.log.Warn().Err(err).Msg("cannot record the summariser failure")
	}
}

func (c *compactions) clearForceNext(key state.Key) {
	if _, err := c.store.Update(key, func(r *state.Record) error {
		r.ForceNext = false
		return nil
	}); err != nil {
		c.storeFailed()
		c.log.Warn().Err(err).Msg("cannot clear the scheduled compaction")
	}
}

// isCompacting reports whether a summary of key is being written now.
func (c *compactions) isCompacting(key state.Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.inflight {
		if k.key == key {
			return true
		}
	}
	return false
}

// running reports how many compactions are in flight now.
func (c *compactions) running() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inflight)
}
