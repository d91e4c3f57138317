package rewrite

import (
	"errors"
	"fmt"
	"time"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/history"
)

// Defaults of Policy's fields.
const (
	DefaultTargetRatio     = 0.5
	DefaultKeepRecent      = 6
	DefaultPrecompactRatio = 0.7
	// PrecompactLagTurns is how many turns after the one that starts it a
	// precompaction's summary is sent (or from the turn that crosses the
	// trigger, if sooner): a fixed count, not when its call happens to
	// end, so what is forwarded never depends on timing. A turn that comes
	// while the call still runs waits for it; live, an agent's turns take
	// seconds each, and most summaries are ready by then.
	PrecompactLagTurns = 3
	// DefaultCostedPrecompactRatio is the precompact ratio where the cost
	// model times compactions (TurnFacts.Economics: a hosted, caching
	// upstream): from half the trigger on, a summary is prepared when
	// compacting pays (chosen on the corpus replay: docs/replay.md).
	DefaultCostedPrecompactRatio = 0.5
	// DefaultKeepRecentShare is KeepRecentTokens' default, as a share of
	// the trigger: the kept raw tail is read fresh after every compaction,
	// and the smaller it is the longer to the next one.
	DefaultKeepRecentShare = 0.05
)

// Policy is the numbers every compaction decision is made by: when a turn
// compacts (trigger, manual force, precompact), and how much it summarises
// (hysteresis, min reclaim). Token numbers are the upstream's, as the
// calibrated estimate counts them. Zero fields mean the default on them.
type Policy struct {
	// Enabled: compaction is on. Off, no turn is compacted, rescued or cut
	// to fit.
	Enabled bool
	// Trigger: above it a turn compacts before it is forwarded.
	Trigger TriggerConfig
	// TargetRatio: a compaction aims below this fraction of the trigger
	// (hysteresis); 0 means DefaultTargetRatio.
	TargetRatio float64
	// MinReclaimTokens: below this reclaim an automatic compaction does not
	// rewrite history (the prompt cache is worth more); 0 means
	// min(4096, 20% of the trigger).
	MinReclaimTokens int
	// KeepRecent messages stay raw; 0 means DefaultKeepRecent.
	KeepRecent int
	// KeepRecentTokens of raw tail at least; 0 means
	// DefaultKeepRecentShare of the trigger.
	KeepRecentTokens int
	// Precompact prepares the summary in the background after a turn the
	// upstream counted at PrecompactRatio × trigger or more (0 means
	// DefaultCostedPrecompactRatio where the cost model times compactions,
	// else DefaultPrecompactRatio), so the turn that crosses the trigger finds
	// it ready.
	Precompact      bool
	PrecompactRatio float64
	// MaxSummaryTokens is the summary's max_tokens; 0 means
	// compactor.DefaultMaxTokens(trigger).
	MaxSummaryTokens int
}

// Compaction kinds: what made a turn compact.
const (
	KindAuto       = "auto"       // over its trigger
	KindPrecompact = "precompact" // in the background, near the trigger
	KindManual     = "manual"     // asked: header, admin API, /compact
	KindRescue     = "rescue"     // the upstream refused the request as too long
)

// Action is what a turn does about compaction.
type Action int

const (
	// ActNone forwards the turn as rewritten.
	ActNone Action = iota
	// ActNow compacts before forwarding (Plan.Kind: auto or manual).
	ActNow
	// ActBackground keeps the turn's body for a compaction in the
	// background, which starts once the upstream's count confirms it
	// (Plan.PrecompactAfter).
	ActBackground
	// ActRescue compacts now because the upstream refused the request as
	// longer than its window: any reclaim will do.
	ActRescue
)

func (a Action) String() string {
	switch a {
	case ActNow:
		return "now"
	case ActBackground:
		return "background"
	case ActRescue:
		return "rescue"
	}
	return "none"
}

// ErrSkipped marks a compaction not done although it was due or asked for
// (nothing to summarise, too little to reclaim, breaker, backoff, a failing
// store): not a summariser failure, so no backoff.
var ErrSkipped = errors.New("compaction skipped")

// ErrStoreFailing marks a compaction not attempted because a store write
// failed within StoreRetry.
var ErrStoreFailing = errors.New("the conversation store is failing")

// ErrServerHistory marks a turn not compacted because the provider keeps
// its history (previous_response_id): ctxpress sees only what it adds.
var ErrServerHistory = errors.New("the provider keeps this conversation's history (previous_response_id), which ctxpress cannot see")

// ErrProviderCompacts marks a turn not compacted because the client asked
// the provider to compact it (compaction_trigger, a compact edit).
var ErrProviderCompacts = errors.New("the client asked the provider to compact this request (compaction_trigger or a context_management compact edit)")

// StoreRetry is how long compactions pause after a failed store write: a
// summary that cannot be kept would cost every turn a summary call (and a
// failure in the log) for nothing.
const StoreRetry = 30 * time.Second

// precompactSlack: the body of a turn is kept for a background compaction
// when its calibrated estimate is at least this share of the precompact
// bar. The bar is on the upstream's count, known only once the answer is
// in and the body is gone; the estimate can fall a little short of it.
const precompactSlack = 0.9

// TurnFacts are what a turn's compaction is planned from.
type TurnFacts struct {
	Model string
	// Tokens is tiktoken's count of the request as it would be forwarded
	// (Result.TokensAfter).
	Tokens int
	// Line is what the turn's line of history has learnt.
	Line history.Numbers
	// Identified: the turn has a conversation, so a record a summary can be
	// stored in. Ephemeral: a side request, never compacted nor cut.
	Identified, Ephemeral bool
	// Manual: compaction asked for (header, admin API, /compact). Command:
	// the turn is a /compact that ctxpress answers itself.
	Manual, Command bool
	// Refused: the upstream answered this request as longer than its window.
	Refused bool
	// ServerHistory: the provider keeps the rest of the history
	// (Result.ServerHistory), so none of it may be compacted or cut.
	ServerHistory bool
	// ProviderCompacts: the client asked the provider to compact this
	// request (Result.ProviderCompacts): the client's compaction wins.
	ProviderCompacts bool
	// AfterNow: the turn's compaction before forwarding has run, and
	// Compacted says whether it wrote a summary; only a background one may
	// follow. Tokens is then the request as it is after it.
	AfterNow, Compacted bool
	// StoreFailedAt is when a store write of a compaction last failed;
	// zero: never.
	StoreFailedAt time.Time
	// Economics, when set, is the cost model's view of the conversation:
	// an automatic compaction is put off (up to maxDeferRatio × trigger)
	// while it costs more than it saves. SummaryReusesCache: the summary
	// call would send the forwarded history as a cached prefix (the
	// summariser is the conversation's own upstream and model).
	Economics          *Economics
	SummaryReusesCache bool
}

// Plan is what a turn does about compaction, and why.
type Plan struct {
	Action Action
	// Kind is the compaction's (KindAuto, …); "" with ActNone.
	Kind string
	// Why says why a compaction due or asked for is not done (breaker,
	// backoff, a failing store; wraps ErrSkipped); nil otherwise.
	Why error
	// MayRewrite: compaction is on and the turn is not ephemeral, so its
	// history may be compacted or cut to fit. Compactable: so may it be,
	// and the turn has a record to store a summary in.
	MayRewrite, Compactable bool
	// Trigger and Window are the model's; Effective is the calibrated
	// estimate of the request (what the upstream will most likely count).
	Trigger, Window, Effective int
	// Urgent: the request would not fit the window at all, so any reclaim
	// beats the minimum that protects the prompt cache.
	Urgent bool
	// precompactBar is the upstream's count at which ActBackground starts.
	precompactBar float64
	// Economics and SummaryReusesCache are TurnFacts', for Size: the cost
	// model times an automatic compaction (compactionPays).
	Economics          *Economics
	SummaryReusesCache bool
}

// PlanTurn decides what the turn t does about compaction at now. The rules,
// in order:
//   - compaction off, an ephemeral turn, or one with no conversation: none;
//   - a turn whose history the provider keeps: none, and why when asked;
//   - the upstream refused the request as too long: rescue, urgent;
//   - asked for (manual): now, breaker and backoff notwithstanding;
//   - calibrated estimate over the trigger: now, unless the line's breaker
//     is open or its summariser backs off (urgent when over the window);
//   - precompact on, the turn not a /compact and not compacted: background
//     when the estimate nears PrecompactRatio × trigger (precompactSlack);
//   - else none.
//
// No compaction starts within StoreRetry of a failed store write.
func (p Policy) PlanTurn(t TurnFacts, now time.Time) Plan {
	window := p.Trigger.WindowOf(t.Model, t.Line) // once: a table walk by prefix
	pl := Plan{Trigger: p.Trigger.triggerOf(window), Window: window,
		Effective: t.Line.Calibration.Upstream(t.Tokens), Economics: t.Economics, SummaryReusesCache: t.SummaryReusesCache}
	if t.Line.Window == window {
		// A trigger set in tokens cannot be over the window the upstream
		// showed: it would never be reached before the next refusal.
		pl.Trigger = min(pl.Trigger, p.Trigger.ratioTrigger(window))
	}
	pl.precompactBar = p.precompactRatio(t.Economics != nil) * float64(pl.Trigger)
	pl.MayRewrite = p.Enabled && !t.Ephemeral && !t.ServerHistory && !t.ProviderCompacts
	pl.Compactable = pl.MayRewrite && t.Identified
	if !pl.Compactable {
		switch {
		case !p.Enabled || t.Ephemeral || !t.Manual:
		case t.ServerHistory:
			pl.Why = fmt.Errorf("%w: %w", ErrSkipped, ErrServerHistory)
		case t.ProviderCompacts:
			pl.Why = fmt.Errorf("%w: %w", ErrSkipped, ErrProviderCompacts)
		}
		return pl
	}
	switch {
	case t.AfterNow:
	case t.Refused:
		pl.Action, pl.Kind, pl.Urgent = ActRescue, KindRescue, true
	case t.Manual:
		pl.Action, pl.Kind = ActNow, KindManual
	case pl.Effective > pl.Trigger:
		pl.Urgent = pl.Effective >= pl.Window
		if err := BreakerBlocks(t.Line.Breaker, now); err != nil {
			pl.Why = err
			return pl
		}
		pl.Action, pl.Kind = ActNow, KindAuto
	}
	if pl.Action == ActNone && p.Precompact && !t.Compacted && !t.Command &&
		float64(pl.Effective) >= precompactSlack*pl.precompactBar {
		pl.Action, pl.Kind = ActBackground, KindPrecompact
	}
	if err := StorePaused(t.StoreFailedAt, now); err != nil && pl.Action != ActNone {
		if pl.Action != ActBackground { // a turn not compacted says why; a precompaction just does not start
			pl.Why = err
		}
		pl.Action, pl.Kind = ActNone, ""
	}
	return pl
}

// PrecompactAfter reports whether a turn planned ActBackground starts its
// background compaction, given what the upstream reported: its count of
// the request reached PrecompactRatio × trigger. No usage, no precompaction.
func (pl Plan) PrecompactAfter(inputTokens int, usageFound bool) bool {
	return pl.Action == ActBackground && usageFound && float64(inputTokens) >= pl.precompactBar
}

// BreakerBlocks says why the breaker b stops an automatic compaction at
// now (open, or the summariser backing off; wraps ErrSkipped), nil when it
// does not.
func BreakerBlocks(b history.Breaker, now time.Time) error {
	if b.Tripped {
		return fmt.Errorf("%w: circuit breaker open (%s)", ErrSkipped, b.Reason)
	}
	if now.Before(b.BackoffUntil) {
		return fmt.Errorf("%w: summariser backoff until %s", ErrSkipped, b.BackoffUntil.Format(time.TimeOnly))
	}
	return nil
}

// StorePaused says why no compaction is attempted at now when a store
// write failed at failedAt (zero: never): within StoreRetry of it. nil
// when compactions may run.
func StorePaused(failedAt, now time.Time) error {
	if !failedAt.IsZero() && now.Sub(failedAt) < StoreRetry {
		return fmt.Errorf("%w: %w", ErrSkipped, ErrStoreFailing)
	}
	return nil
}

// Sizing is how a planned compaction is sized, in the upstream's tokens.
type Sizing struct {
	// MaxSummaryTokens is the summary call's max_tokens.
	MaxSummaryTokens int
	// Reclaim is what the compaction takes off the request, net of the
	// summary at its longest.
	Reclaim int
}

// Size picks what a compaction planned as pl summarises of res, the request
// on a line calibrated as cal: a cut that keeps KeepRecent messages and
// KeepRecentTokens raw (less for a manual or rescue compaction of a small
// conversation), moved on when the request would still be over TargetRatio
// of the trigger (hysteresis); and it refuses (ErrSkipped) a cut with
// nothing to summarise, or an automatic one that reclaims under the
// minimum. Result.Compaction is asked at most twice, here only.
func (p Policy) Size(res Result, pl Plan, cal history.Calibration) (Compaction, Sizing, error) {
	// The trigger, target and reclaim are in the upstream's tokens; the
	// pipeline counts with tiktoken. scale converts (upstream ≈ raw × scale).
	scale := cal.Scale()
	sz := Sizing{MaxSummaryTokens: p.maxSummaryTokens(pl.Trigger)}
	keepTokens := int(float64(p.keepRecentTokens(pl.Trigger)) / scale)
	if pl.Kind == KindManual || pl.Kind == KindRescue {
		// A manual compaction of a conversation far below its trigger, or
		// one the upstream refused under it (its real window is smaller
		// than ctxpress was told), keeps a tail in proportion to the
		// conversation, not to the trigger.
		keepTokens = min(keepTokens, res.TokensAfter/5)
	}
	prop, ok := res.Compaction(p.keepRecent(), keepTokens)
	if !ok {
		return prop, sz, fmt.Errorf("%w: nothing to summarise outside the last %d messages", ErrSkipped, p.keepRecent())
	}
	if shorter, ok := p.shorterTail(prop.KeptTokens, keepTokens, pl.Trigger, sz.MaxSummaryTokens, scale); ok {
		if p2, ok := res.Compaction(p.keepRecent(), shorter); ok && p2.Cut > prop.Cut {
			prop = p2
		}
	}
	// An update replaces the previous summary's block too.
	replaced := prop.SummarisedTokens
	if prop.PrevSummary != "" {
		replaced += res.SummaryTokens(prop.PrevSummary, prop.PrevKept)
	}
	var err error
	if sz.Reclaim, err = p.worthIt(replaced, pl, sz.MaxSummaryTokens, scale); err == nil {
		err = pl.compactionPays(replaced, prop.KeptTokens, sz, scale)
	}
	return prop, sz, err
}

// shorterTail is the hysteresis: when a cut keeping keepTokens raw leaves
// the request (keptTokens, tiktoken's, plus the summary at its longest)
// over TargetRatio of the trigger, it returns the shorter raw tail, in
// tiktoken's tokens, that gets it there (never negative; keep_recent
// messages stay raw whatever it says), and true.
func (p Policy) shorterTail(keptTokens, keepTokens, trigger, maxSummary int, scale float64) (int, bool) {
	target := int(p.targetRatio() * float64(trigger))
	over := int(float64(keptTokens)*scale) + maxSummary - target
	if over <= 0 || keepTokens <= 0 {
		return keepTokens, false
	}
	return max(keepTokens-int(float64(over)/scale), 0), true
}

// worthIt returns what a compaction that replaces replaced tokens
// (tiktoken's) reclaims, net of a summary of maxSummary, and refuses
// (ErrSkipped) an automatic one under the minimum reclaim: 1 when urgent,
// none for a manual one (the user's call).
func (p Policy) worthIt(replaced int, pl Plan, maxSummary int, scale float64) (int, error) {
	reclaim := int(float64(replaced)*scale) - maxSummary
	minimum := p.minReclaim(pl.Trigger)
	if pl.Urgent {
		minimum = 1
	}
	if pl.Kind != KindManual && reclaim < minimum {
		return reclaim, fmt.Errorf("%w: would reclaim %d tokens, under the minimum %d", ErrSkipped, max(reclaim, 0), minimum)
	}
	return reclaim, nil
}

func (p Policy) targetRatio() float64 {
	if p.TargetRatio > 0 {
		return p.TargetRatio
	}
	return DefaultTargetRatio
}

func (p Policy) keepRecent() int {
	if p.KeepRecent > 0 {
		return p.KeepRecent
	}
	return DefaultKeepRecent
}

func (p Policy) keepRecentTokens(trigger int) int {
	if p.KeepRecentTokens > 0 {
		return p.KeepRecentTokens
	}
	return int(DefaultKeepRecentShare * float64(trigger))
}

func (p Policy) minReclaim(trigger int) int {
	if p.MinReclaimTokens > 0 {
		return p.MinReclaimTokens
	}
	return min(4096, trigger/5)
}

func (p Policy) precompactRatio(costed bool) float64 {
	switch {
	case p.PrecompactRatio > 0:
		return p.PrecompactRatio
	case costed:
		return DefaultCostedPrecompactRatio
	}
	return DefaultPrecompactRatio
}

func (p Policy) maxSummaryTokens(trigger int) int {
	if p.MaxSummaryTokens > 0 {
		return p.MaxSummaryTokens
	}
	return compactor.DefaultMaxTokens(trigger)
}
