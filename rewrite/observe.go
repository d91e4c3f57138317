package rewrite

import (
	"fmt"
	"time"

	"github.com/ctxpress/ctxpress/history"
)

// BreakerTrips is how many compactions in a row may leave the upstream's
// reported input over the trigger before auto-compaction of the line stops.
const BreakerTrips = 2

// FailureBackoff is how long automatic compaction of a line waits after
// its first, second, and third and later summariser failures in a row.
var FailureBackoff = []time.Duration{60 * time.Second, 300 * time.Second, 900 * time.Second}

// NumbersForModel returns n for a request of model: n itself when the
// line's model is model, else the breaker alone with calibration ratio
// modelRatio (where the record's other lines of model are; 0 when none).
func NumbersForModel(n history.Numbers, model string, modelRatio float64) history.Numbers {
	if n.Model == model {
		return n
	}
	return history.Numbers{Model: model, Calibration: history.Calibration{Ratio: modelRatio}, Breaker: n.Breaker, Turns: n.Turns, Growth: n.Growth}
}

// Observation is what one forwarded turn of a line tells its numbers.
type Observation struct {
	// Model is the turn's; ModelRatio the record's calibration ratio for it
	// (NumbersForModel), where a line whose model changes starts.
	Model      string
	ModelRatio float64
	// Raw is tiktoken's count of the request forwarded.
	Raw int
	// UsageFound: the answer reported usage; InputTokens is its input.
	UsageFound  bool
	InputTokens int
	// CachedTokens and CacheWriteTokens are the parts of InputTokens the
	// upstream read from and wrote to its prompt cache.
	CachedTokens, CacheWriteTokens int
	// Compacted: the turn compacted before it was forwarded, over Trigger
	// (the upstream's tokens): only such a turn moves the breaker.
	Compacted bool
	Trigger   int
	// RefusedWindow is the window the upstream showed by refusing the
	// turn's request as too long before it was sent again (its tokens;
	// 0: not refused).
	RefusedWindow int
	// ServerCompacted: the upstream compacted the request itself before
	// answering (Anthropic's usage.iterations). Its usage then counts the
	// context after that compaction, not the request forwarded, and
	// teaches the line nothing: no calibration, cache evidence or breaker.
	ServerCompacted bool
}

// SmallerWindow is the window a line keeps when it had have and a refusal
// showed shown (either 0: none): the smaller of those it has.
func SmallerWindow(have, shown int) int {
	if shown > 0 && (have == 0 || shown < have) {
		return shown
	}
	return have
}

// Observe returns a line's numbers after the turn o: the request the
// upstream counted becomes the calibration's anchor, and a compacted turn
// the upstream still counted over the trigger moves the breaker toward
// open (BreakerTrips in a row open it), one under resets the count. It
// reports whether the breaker opened. A turn the server compacted
// (ServerCompacted) changes none of these.
func Observe(n history.Numbers, o Observation) (next history.Numbers, opened bool) {
	if o.Model != "" {
		n = NumbersForModel(n, o.Model, o.ModelRatio)
	}
	n.Window = SmallerWindow(n.Window, o.RefusedWindow)
	if !o.UsageFound || o.ServerCompacted {
		return n, false
	}
	n.Turns++
	n.Cache = nextCacheEvidence(n.Cache, Usage{Input: o.InputTokens, Cached: o.CachedTokens, CacheWrite: o.CacheWriteTokens})
	n.Growth = nextGrowth(n.Growth, n.Calibration.LastInput, o.InputTokens)
	c := nextCalibration(n.Calibration, o.Raw, o.InputTokens)
	if o.InputTokens <= 0 || o.Raw <= 0 {
		// Nothing to learn a ratio from; the anchor is what was reported.
		c.LastInput, c.LastEstimate = o.InputTokens, o.Raw
	}
	n.Calibration = c
	if !o.Compacted || o.Trigger <= 0 {
		return n, false
	}
	b := &n.Breaker
	if o.InputTokens <= o.Trigger {
		b.ConsecutiveOverTrigger = 0
		return n, false
	}
	b.ConsecutiveOverTrigger++
	if b.ConsecutiveOverTrigger >= BreakerTrips && !b.Tripped {
		b.Tripped = true
		b.Reason = fmt.Sprintf("upstream reported %d input tokens, over the trigger of %d, after %d compactions in a row",
			o.InputTokens, o.Trigger, b.ConsecutiveOverTrigger)
		return n, true
	}
	return n, false
}

// BreakerAfterFailure returns b after a summariser failure at now: the
// next automatic compaction waits FailureBackoff's next step.
func BreakerAfterFailure(b history.Breaker, now time.Time) history.Breaker {
	d := FailureBackoff[min(b.FailureCount, len(FailureBackoff)-1)]
	b.FailureCount++
	b.BackoffUntil = now.Add(d)
	return b
}

// BreakerAfterSuccess returns b after a compaction of kind stored its
// summary: the failures and backoff are cleared, and a manual compaction
// (the user's word) closes the breaker too.
func BreakerAfterSuccess(b history.Breaker, kind string) history.Breaker {
	if kind == KindManual {
		return history.Breaker{}
	}
	b.FailureCount, b.BackoffUntil = 0, time.Time{}
	return b
}

// nextGrowth folds the step from a request the upstream counted last to
// one it counts input into growth, the average of the recent steps (each
// turn weighs half). A request that shrank (compacted, or edited) says
// nothing of how the history grows.
func nextGrowth(growth, last, input int) int {
	if last <= 0 || input <= last {
		return growth
	}
	if growth == 0 {
		return input - last
	}
	return (growth + input - last) / 2
}
