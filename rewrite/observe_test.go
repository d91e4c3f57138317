package rewrite

import (
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/history"
)

func TestObserveCalibration(t *testing.T) {
	anchored := history.Numbers{Model: "m", Calibration: history.Calibration{LastInput: 1000, LastEstimate: 500, Ratio: 2}}
	for _, tc := range []struct {
		rule  string
		line  history.Numbers
		obs   Observation
		want  history.Calibration
		model string
	}{
		{"no usage: nothing learnt", anchored, Observation{Model: "m", Raw: 800}, anchored.Calibration, "m"},
		{"usage: the request becomes the anchor and the ratio moves", history.Numbers{Model: "m"},
			Observation{Model: "m", Raw: 1000, UsageFound: true, InputTokens: 1500}, history.Calibration{LastInput: 1500, LastEstimate: 1000, Ratio: 1.5}, "m"},
		{"growth teaches the slope", anchored,
			Observation{Model: "m", Raw: 1500, UsageFound: true, InputTokens: 2500},
			history.Calibration{LastInput: 2500, LastEstimate: 1500, Ratio: 2500.0 / 1500, Slope: 1.5}, "m"},
		{"usage of 0 input: the anchor is what was reported, the ratios stay", anchored,
			Observation{Model: "m", Raw: 800, UsageFound: true}, history.Calibration{LastInput: 0, LastEstimate: 800, Ratio: 2}, "m"},
		{"another model: the line starts from that model's ratio", anchored,
			Observation{Model: "n", ModelRatio: 3, Raw: 800}, history.Calibration{Ratio: 3}, "n"},
		{"no model given: the line's stays", anchored, Observation{Raw: 800}, anchored.Calibration, "m"},
		{"a turn the server compacted: its input is the compacted context's, not the request's; nothing learnt", anchored,
			Observation{Model: "m", Raw: 15000, UsageFound: true, InputTokens: 108, ServerCompacted: true}, anchored.Calibration, "m"},
	} {
		got, opened := Observe(tc.line, tc.obs)
		if got.Calibration != tc.want || got.Model != tc.model || opened {
			t.Errorf("%s: %+v %q opened %v, want %+v %q", tc.rule, got.Calibration, got.Model, opened, tc.want, tc.model)
		}
	}
}

func TestObserveServerCompactionLeavesTheCacheEvidence(t *testing.T) {
	line := history.Numbers{Model: "m", Turns: 3, Cache: history.CacheEvidence{Uncached: 2}}
	// Large and uncached, it would be the third such prompt.
	got, _ := Observe(line, Observation{Model: "m", Raw: 15000, UsageFound: true, InputTokens: 15013, ServerCompacted: true})
	if got.Cache != line.Cache || got.Turns != line.Turns {
		t.Errorf("cache %+v turns %d, want %+v %d", got.Cache, got.Turns, line.Cache, line.Turns)
	}
}

func TestObserveWindow(t *testing.T) {
	shown := history.Numbers{Model: "m", Window: 8000}
	for _, tc := range []struct {
		rule string
		line history.Numbers
		obs  Observation
		want int
	}{
		{"a refusal shows a window: the line keeps it", history.Numbers{Model: "m"}, Observation{Model: "m", RefusedWindow: 8000}, 8000},
		{"a later one can lower it", shown, Observation{Model: "m", RefusedWindow: 7000}, 7000},
		{"but not raise it", shown, Observation{Model: "m", RefusedWindow: 9000, UsageFound: true, InputTokens: 100, Raw: 90}, 8000},
		{"a turn not refused keeps it", shown, Observation{Model: "m", UsageFound: true, InputTokens: 100, Raw: 90}, 8000},
		{"another model starts without it", shown, Observation{Model: "n"}, 0},
		{"or with its own", shown, Observation{Model: "n", RefusedWindow: 30000}, 30000},
	} {
		if got, _ := Observe(tc.line, tc.obs); got.Window != tc.want {
			t.Errorf("%s: window %d, want %d", tc.rule, got.Window, tc.want)
		}
	}
}

func TestObserveBreaker(t *testing.T) {
	over := Observation{Model: "m", Raw: 100, UsageFound: true, InputTokens: 5000, Compacted: true, Trigger: 4000}
	under := over
	under.InputTokens = 4000
	notCompacted := over
	notCompacted.Compacted = false
	noUsage := over
	noUsage.UsageFound = false
	serverCompacted := over
	serverCompacted.ServerCompacted = true
	once := history.Breaker{ConsecutiveOverTrigger: 1}
	for _, tc := range []struct {
		rule   string
		before history.Breaker
		obs    Observation
		after  history.Breaker
		opened bool
	}{
		{"a compaction still over the trigger counts one", history.Breaker{}, over, history.Breaker{ConsecutiveOverTrigger: 1}, false},
		{"two in a row open the breaker, and say why", once, over, history.Breaker{Tripped: true, ConsecutiveOverTrigger: 2,
			Reason: "upstream reported 5000 input tokens, over the trigger of 4000, after 2 compactions in a row"}, true},
		{"an open breaker opens only once", history.Breaker{Tripped: true, ConsecutiveOverTrigger: 2, Reason: "r"}, over,
			history.Breaker{Tripped: true, ConsecutiveOverTrigger: 3, Reason: "r"}, false},
		{"a compaction that gets under the trigger resets the count", once, under, history.Breaker{}, false},
		{"a turn that did not compact does not move it", once, notCompacted, once, false},
		{"nor one without usage", once, noUsage, once, false},
		{"nor one the server compacted", once, serverCompacted, once, false},
	} {
		got, opened := Observe(history.Numbers{Model: "m", Breaker: tc.before}, tc.obs)
		if got.Breaker != tc.after || opened != tc.opened {
			t.Errorf("%s: %+v opened %v, want %+v %v", tc.rule, got.Breaker, opened, tc.after, tc.opened)
		}
	}
}

func TestBackoffSchedule(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var b history.Breaker
	for i, want := range []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, 15 * time.Minute} {
		b = BreakerAfterFailure(b, now)
		if b.FailureCount != i+1 || !b.BackoffUntil.Equal(now.Add(want)) {
			t.Errorf("failure %d: %+v, want a wait of %v", i+1, b, want)
		}
	}
	if err := BreakerBlocks(b, now.Add(15*time.Minute-time.Second)); err == nil || !strings.Contains(err.Error(), "backoff until 12:15:00") {
		t.Errorf("during the backoff: %v", err)
	}
	if err := BreakerBlocks(b, now.Add(15*time.Minute)); err != nil {
		t.Errorf("once it is over: %v", err)
	}
}

func TestBreakerReset(t *testing.T) {
	failing := history.Breaker{Tripped: true, ConsecutiveOverTrigger: 2, Reason: "r", FailureCount: 2, BackoffUntil: time.Unix(100, 0)}
	for _, tc := range []struct {
		rule string
		kind string
		want history.Breaker
	}{
		{"an automatic compaction clears the failures, not the breaker", KindAuto,
			history.Breaker{Tripped: true, ConsecutiveOverTrigger: 2, Reason: "r"}},
		{"a precompaction too", KindPrecompact, history.Breaker{Tripped: true, ConsecutiveOverTrigger: 2, Reason: "r"}},
		{"a manual compaction (the user's word) closes the breaker", KindManual, history.Breaker{}},
	} {
		if got := BreakerAfterSuccess(failing, tc.kind); got != tc.want {
			t.Errorf("%s: %+v", tc.rule, got)
		}
	}
}

// A line's growth per turn follows its recent steps, not its first read of
// a big file, and a request that shrank does not teach it.
func TestGrowthFollowsTheRecentSteps(t *testing.T) {
	n := history.Numbers{}
	for _, step := range []struct{ input, growth int }{
		{20000, 0},     // the first count: no step yet
		{40000, 20000}, // one big read
		{40400, 10200},
		{40800, 5300},
		{41200, 2850},
		{30000, 2850}, // compacted: not a step
		{30300, 1575},
	} {
		n, _ = Observe(n, Observation{Model: "m", Raw: step.input, UsageFound: true, InputTokens: step.input})
		if n.Growth != step.growth {
			t.Fatalf("after %d: growth %d, want %d", step.input, n.Growth, step.growth)
		}
	}
	atTheDoor := Plan{Kind: KindPrecompact, Trigger: 40000, Effective: 36000,
		Economics: &Economics{Prices: DefaultPrices, TurnsSoFar: 7, TurnsAhead: 3, Growth: n.Growth}}
	if got := atTheDoor.turnsToTrigger(); got != 3 {
		t.Errorf("4,000 tokens from the trigger at %d a turn: %d turns, want 3", n.Growth, got)
	}
}
