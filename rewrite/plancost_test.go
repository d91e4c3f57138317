package rewrite

import (
	"errors"
	"testing"
)

// When an automatic compaction is taken: the cost model weighs the cached
// reads it saves over the turns expected against the kept tail read fresh
// again, the summary sent fresh and the summary call itself.
func TestCompactionTimingAsksTheCostModel(t *testing.T) {
	gpt5 := &Economics{Prices: DefaultPrices, TurnsAhead: 30}
	early := &Economics{Prices: DefaultPrices, TurnsAhead: 2}
	noCache := &Economics{Prices: DefaultPrices, Uncached: true, TurnsAhead: 3}
	sz := Sizing{MaxSummaryTokens: 4000}
	for _, tc := range []struct {
		name           string
		pl             Plan
		replaced, kept int
		pays           bool
	}{
		{"no cost model: the trigger alone decides", Plan{Kind: KindAuto, Trigger: 32000, Effective: 33000}, 20000, 13000, true},
		{"many turns ahead: removing 18k pays for the rebuilt 13k tail and the call", Plan{Kind: KindAuto, Trigger: 32000, Effective: 33000, Economics: gpt5, SummaryReusesCache: true}, 20000, 13000, true},
		{"two turns ahead: it does not, yet", Plan{Kind: KindAuto, Trigger: 32000, Effective: 33000, Economics: early, SummaryReusesCache: true}, 20000, 13000, false},
		{"past 1.25x the trigger it compacts whatever it costs", Plan{Kind: KindAuto, Trigger: 32000, Effective: 40000, Economics: early, SummaryReusesCache: true}, 27000, 13000, true},
		{"and past halfway to the window when that is nearer", Plan{Kind: KindAuto, Trigger: 102400, Window: 128000, Effective: 115300, Economics: early, SummaryReusesCache: true}, 80000, 13000, true},
		{"below both it may wait", Plan{Kind: KindAuto, Trigger: 102400, Window: 128000, Effective: 115100, Economics: early, SummaryReusesCache: true}, 20000, 90000, false},
		{"urgent (over the window): compacts", Plan{Kind: KindAuto, Trigger: 32000, Effective: 33000, Urgent: true, Economics: early}, 20000, 13000, true},
		{"manual: the user asked", Plan{Kind: KindManual, Trigger: 32000, Effective: 33000, Economics: early}, 20000, 13000, true},
		{"rescue: the upstream refused it", Plan{Kind: KindRescue, Trigger: 32000, Effective: 33000, Economics: early}, 20000, 13000, true},
		{"an upstream that does not cache: removing tokens pays at full price", Plan{Kind: KindAuto, Trigger: 32000, Effective: 33000, Economics: noCache}, 20000, 13000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.pl.compactionPays(tc.replaced, tc.kept, sz, 1)
			if (err == nil) != tc.pays {
				t.Errorf("compactionPays = %v, want pays %v", err, tc.pays)
			}
			if err != nil && !errors.Is(err, ErrSkipped) {
				t.Errorf("a put-off compaction is skipped, not failed: %v", err)
			}
		})
	}
	// The cache-reusing summary call is what makes an early compaction pay:
	// the same compaction with a fresh transcript costs more.
	mid := &Economics{Prices: DefaultPrices, TurnsAhead: 25}
	reusing := Plan{Kind: KindAuto, Trigger: 32000, Effective: 33000, Economics: mid, SummaryReusesCache: true}
	transcript := reusing
	transcript.SummaryReusesCache = false
	if reusing.compactionPays(20000, 13000, sz, 1) != nil || transcript.compactionPays(20000, 13000, sz, 1) == nil {
		t.Errorf("at 25 turns ahead a cache-reusing summary should pay and a transcript not: %v / %v",
			reusing.compactionPays(20000, 13000, sz, 1), transcript.compactionPays(20000, 13000, sz, 1))
	}
}
