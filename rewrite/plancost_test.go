package rewrite

import (
	"errors"
	"strings"
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

// A precompaction's summary is sent PrecompactLagTurns turns on (or from
// the turn that crosses the trigger, if sooner), so it saves only over the
// turns expected after that one, and the history grown until then is
// rebuilt beside it.
func TestPrecompactionWeighsTheTurnsBeforeItIsSent(t *testing.T) {
	sz := Sizing{MaxSummaryTokens: 4000}
	at := func(kind string, effective, turnsSoFar, turnsAhead, growth int) Plan {
		return Plan{Kind: kind, Trigger: 40000, Effective: effective, SummaryReusesCache: true,
			Economics: &Economics{Prices: DefaultPrices, TurnsSoFar: turnsSoFar, TurnsAhead: turnsAhead, Growth: growth}}
	}
	for _, tc := range []struct {
		name string
		pl   Plan
		lag  int
	}{
		{"at the trigger's door, 950 tokens a turn on average: 3 turns", at(KindPrecompact, 38000, 40, 50, 0), 3},
		{"1,000 tokens a turn lately: 2", at(KindPrecompact, 38000, 40, 50, 1000), 2},
		{"far from it: the lag", at(KindPrecompact, 20000, 40, 50, 0), PrecompactLagTurns},
		{"a compaction at the trigger: none", at(KindAuto, 41000, 40, 50, 0), 0},
	} {
		if got := min(tc.pl.turnsToTrigger(), PrecompactLagTurns); tc.pl.Kind == KindPrecompact && got != tc.lag || tc.pl.Kind != KindPrecompact && tc.pl.turnsToTrigger() != 0 {
			t.Errorf("%s: sent %d turns on, want %d", tc.name, got, tc.lag)
		}
	}
	// The turns ahead from which a compaction pays: a precompaction needs
	// exactly its lag more than the same compaction at the trigger.
	paysFrom := func(kind string) int {
		for ahead := 1; ahead < 200; ahead++ {
			if at(kind, 30000, 60, ahead, 0).compactionPays(24000, 6000, sz, 1) == nil {
				return ahead
			}
		}
		return -1
	}
	if auto, pre := paysFrom(KindAuto), paysFrom(KindPrecompact); auto < 2 || pre != auto+PrecompactLagTurns {
		t.Errorf("pays from %d turns ahead at the trigger and %d prepared early, want %d more", auto, pre, PrecompactLagTurns)
	}
	// Fewer turns expected than the lag: its summary would never be sent.
	err := at(KindPrecompact, 30000, 60, PrecompactLagTurns, 0).compactionPays(24000, 6000, sz, 1)
	if !errors.Is(err, ErrSkipped) || !strings.Contains(err.Error(), "sent 3 turns on, past the 3 turns expected") {
		t.Errorf("with 3 turns expected: %v", err)
	}
}
