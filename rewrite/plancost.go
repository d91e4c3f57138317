package rewrite

import (
	"fmt"
	"math"
)

// maxDeferRatio bounds how far past its trigger the cost model may put an
// automatic compaction off: at this many times the trigger, or halfway
// from the trigger to the window if that is nearer, it compacts whatever
// it costs, so the trigger a user set still bounds the prompt and a
// request never nears the window waiting for a compaction to pay.
const maxDeferRatio = 1.25

// deferCeiling is where pl's compaction stops waiting for it to pay.
func (pl Plan) deferCeiling() float64 {
	c := maxDeferRatio * float64(pl.Trigger)
	if pl.Window > pl.Trigger {
		c = min(c, float64(pl.Trigger+pl.Window)/2)
	}
	return c
}

// summaryPromptTokens is about what the summary instruction and template
// add to a summary call's prompt.
const summaryPromptTokens = 600

// compactionPays asks the cost model (pl.Economics) whether an automatic
// compaction sized as sz, replacing replaced tiktoken tokens and keeping
// kept raw, pays for itself over the turns expected: the cached reads it
// saves against the kept tail the provider must read fresh again, the
// summary sent fresh, and the summary call (the history as a cached prefix
// when the summariser reuses it, pl.SummaryReusesCache, else a fresh transcript of what
// is summarised; an answer of half the summary budget). nil when it pays,
// when there is no model, for a manual or rescue compaction, for an urgent
// one, and from maxDeferRatio × trigger on; else ErrSkipped with the sums.
func (pl Plan) compactionPays(replaced, kept int, sz Sizing, scale float64) error {
	e := pl.Economics
	if e == nil || pl.Urgent || (pl.Kind != KindAuto && pl.Kind != KindPrecompact) ||
		float64(pl.Effective) >= pl.deferCeiling() {
		return nil
	}
	summary := sz.MaxSummaryTokens / 2
	summarised := int(float64(replaced) * scale)
	removed := summarised - summary
	// A precompaction's summary is sent PrecompactLagTurns turns on, or
	// from the turn that crosses the trigger if sooner: it saves from then
	// on, and the history that grows until then is kept raw beside it.
	lag, grown := pl.turnsToTrigger(), 0
	if pl.Kind == KindPrecompact {
		lag = min(lag, PrecompactLagTurns)
		if e.Growth > 0 {
			grown = min(lag*e.Growth, max(0, pl.Trigger-pl.Effective))
		}
		if e.TurnsAhead <= lag {
			return fmt.Errorf("%w: its summary would be sent %d turns on, past the %d turns expected", ErrSkipped, lag, e.TurnsAhead)
		}
		ahead := *e
		ahead.TurnsAhead -= lag
		e = &ahead
	}
	call := Usage{Input: summarised + summaryPromptTokens, Output: summary}
	if pl.SummaryReusesCache {
		call = Usage{Input: pl.Effective + summaryPromptTokens, Output: summary}
		if !e.Uncached {
			call.Cached = pl.Effective
		}
	}
	change := PrefixChange{
		Removed: removed,
		Rebuilt: int(float64(kept)*scale) + grown,
		Extra:   e.Prices.Cost(call) + float64(summary)*e.Prices.CacheWrite/1e6,
	}
	if e.Pays(change) {
		return nil
	}
	return fmt.Errorf("%w: compacting now costs $%.4f more than it saves over the %d turns expected", ErrSkipped, -e.Saving(change), e.TurnsAhead)
}

// turnsToTrigger is how many turns a precompaction planned as pl waits
// before the request crosses the trigger, at the line's recent growth per
// turn (else its average so far); 0 for any other compaction, or with no
// turns to average.
func (pl Plan) turnsToTrigger() int {
	e := pl.Economics
	if pl.Kind != KindPrecompact || e == nil || e.TurnsSoFar <= 0 || pl.Effective <= 0 || pl.Effective >= pl.Trigger {
		return 0
	}
	perTurn := float64(pl.Effective) / float64(e.TurnsSoFar)
	if e.Growth > 0 {
		perTurn = float64(e.Growth)
	}
	return int(math.Ceil(float64(pl.Trigger-pl.Effective) / perTurn))
}
