package rewrite

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/history"
)

// planPolicy: trigger 10000 on a 128000 window (gpt-4o), precompact from
// 0.7 × 10000 = 7000, whose estimate bar is 0.9 × 7000 = 6300.
var planPolicy = Policy{Enabled: true, Trigger: TriggerConfig{ThresholdTokens: 10000}, Precompact: true}

var planNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func TestPlanTurn(t *testing.T) {
	off := planPolicy
	off.Enabled = false
	noPre := planPolicy
	noPre.Precompact = false
	highTrigger := noPre
	highTrigger.Trigger.ThresholdTokens = 120000 // over 80% of gpt-4o's 128k, as a user may set it
	tripped := history.Numbers{Breaker: history.Breaker{Tripped: true, Reason: "over the trigger twice"}}
	backingOff := history.Numbers{Breaker: history.Breaker{FailureCount: 1, BackoffUntil: planNow.Add(time.Minute)}}
	backedOff := history.Numbers{Breaker: history.Breaker{FailureCount: 1, BackoffUntil: planNow.Add(-time.Second)}}
	doubling := history.Numbers{Calibration: history.Calibration{Ratio: 2}}
	for _, tc := range []struct {
		rule   string
		policy Policy
		facts  TurnFacts
		action Action
		kind   string
		why    string // a substring of Plan.Why; "" for none
		urgent bool
	}{
		{rule: "compaction off: nothing, however big", policy: off,
			facts: TurnFacts{Tokens: 50000, Identified: true}, action: ActNone},
		{rule: "an ephemeral request is never compacted, even when asked",
			facts: TurnFacts{Tokens: 50000, Identified: true, Ephemeral: true, Manual: true}, action: ActNone},
		{rule: "a request with no conversation is not compacted",
			facts: TurnFacts{Tokens: 50000}, action: ActNone},
		{rule: "a request whose history the provider keeps (previous_response_id) is never compacted, however big",
			facts: TurnFacts{Tokens: 50000, Identified: true, ServerHistory: true}, action: ActNone},
		{rule: "nor when asked, and it says why",
			facts: TurnFacts{Tokens: 100, Identified: true, ServerHistory: true, Manual: true}, action: ActNone,
			why: "the provider keeps this conversation's history (previous_response_id)"},
		{rule: "nor rescued when the upstream refuses it as too long",
			facts: TurnFacts{Tokens: 3000, Identified: true, ServerHistory: true, Refused: true}, action: ActNone},
		{rule: "nor precompacted near the bar",
			facts: TurnFacts{Tokens: 9000, Identified: true, ServerHistory: true}, action: ActNone},
		{rule: "far under the trigger: nothing",
			facts: TurnFacts{Tokens: 5000, Identified: true}, action: ActNone},
		{rule: "over the trigger: now", policy: noPre,
			facts: TurnFacts{Tokens: 10001, Identified: true}, action: ActNow, kind: KindAuto},
		{rule: "at the trigger exactly is not over it", policy: noPre,
			facts: TurnFacts{Tokens: 10000, Identified: true}, action: ActNone},
		{rule: "the trigger is on the calibrated estimate",
			facts: TurnFacts{Tokens: 6000, Identified: true, Line: doubling}, action: ActNow, kind: KindAuto},
		{rule: "over the window: now, and any reclaim will do",
			facts: TurnFacts{Model: "gpt-4o", Tokens: 128000, Identified: true}, action: ActNow, kind: KindAuto, urgent: true},
		{rule: "a window the upstream showed by a refusal lowers the trigger (a set one over it would come too late)", policy: noPre,
			facts: TurnFacts{Tokens: 8001, Identified: true, Line: history.Numbers{Window: 10000}}, action: ActNow, kind: KindAuto},
		{rule: "under that trigger: nothing", policy: noPre,
			facts: TurnFacts{Tokens: 8000, Identified: true, Line: history.Numbers{Window: 10000}}, action: ActNone},
		{rule: "over the window shown: now, and any reclaim will do",
			facts: TurnFacts{Tokens: 10000, Identified: true, Line: history.Numbers{Window: 10000}}, action: ActNow, kind: KindAuto, urgent: true},
		{rule: "a window shown larger than the model's known one changes nothing", policy: noPre,
			facts: TurnFacts{Model: "gpt-4o", Tokens: 9000, Identified: true, Line: history.Numbers{Window: 200000}}, action: ActNone},
		{rule: "nor caps a trigger set in tokens", policy: highTrigger,
			facts: TurnFacts{Model: "gpt-4o", Tokens: 110000, Identified: true, Line: history.Numbers{Window: 200000}}, action: ActNone},
		{rule: "over the trigger with the breaker open: nothing, and why",
			facts: TurnFacts{Tokens: 20000, Identified: true, Line: tripped}, action: ActNone, why: "circuit breaker open (over the trigger twice)"},
		{rule: "over the trigger while the summariser backs off: nothing, and why",
			facts: TurnFacts{Tokens: 20000, Identified: true, Line: backingOff}, action: ActNone, why: "summariser backoff until 12:01:00"},
		{rule: "over the trigger once the backoff is over: now",
			facts: TurnFacts{Tokens: 20000, Identified: true, Line: backedOff}, action: ActNow, kind: KindAuto},
		{rule: "asked for: now, under the trigger and breaker notwithstanding",
			facts: TurnFacts{Tokens: 100, Identified: true, Manual: true, Line: tripped}, action: ActNow, kind: KindManual},
		{rule: "asked for while backing off: now",
			facts: TurnFacts{Tokens: 100, Identified: true, Manual: true, Line: backingOff}, action: ActNow, kind: KindManual},
		{rule: "refused by the upstream as too long: rescue, urgent, breaker notwithstanding",
			facts: TurnFacts{Tokens: 3000, Identified: true, Refused: true, Line: tripped}, action: ActRescue, kind: KindRescue, urgent: true},
		{rule: "a store write failed 10 s ago: nothing, and why",
			facts: TurnFacts{Tokens: 20000, Identified: true, StoreFailedAt: planNow.Add(-10 * time.Second)}, action: ActNone,
			why: "compaction skipped: the conversation store is failing"},
		{rule: "a store write failed 10 s ago: a manual compaction waits too",
			facts: TurnFacts{Tokens: 20000, Identified: true, Manual: true, StoreFailedAt: planNow.Add(-10 * time.Second)}, action: ActNone,
			why: "the conversation store is failing"},
		{rule: "a store write failed 30 s ago: now",
			facts: TurnFacts{Tokens: 20000, Identified: true, StoreFailedAt: planNow.Add(-StoreRetry)}, action: ActNow, kind: KindAuto},
		{rule: "near the precompact bar (estimate at 90% of it): background",
			facts: TurnFacts{Tokens: 6300, Identified: true}, action: ActBackground, kind: KindPrecompact},
		{rule: "just under 90% of the precompact bar: nothing",
			facts: TurnFacts{Tokens: 6299, Identified: true}, action: ActNone},
		{rule: "precompact off: nothing near the trigger", policy: noPre,
			facts: TurnFacts{Tokens: 9000, Identified: true}, action: ActNone},
		{rule: "near the bar while the store fails: no background, and nothing to say",
			facts: TurnFacts{Tokens: 9000, Identified: true, StoreFailedAt: planNow.Add(-time.Second)}, action: ActNone},
		{rule: "after a compaction now that wrote a summary: no background",
			facts: TurnFacts{Tokens: 9000, Identified: true, AfterNow: true, Compacted: true}, action: ActNone},
		{rule: "after a compaction now that did not: background, however big",
			facts: TurnFacts{Tokens: 20000, Identified: true, AfterNow: true}, action: ActBackground, kind: KindPrecompact},
		{rule: "a /compact turn is never precompacted",
			facts: TurnFacts{Tokens: 9000, Identified: true, Manual: true, Command: true, AfterNow: true}, action: ActNone},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			p := tc.policy
			if !p.Enabled && tc.policy.Trigger.ThresholdTokens == 0 {
				p = planPolicy
			}
			pl := p.PlanTurn(tc.facts, planNow)
			if pl.Action != tc.action || pl.Kind != tc.kind || pl.Urgent != tc.urgent {
				t.Errorf("action %v kind %q urgent %v, want %v %q %v", pl.Action, pl.Kind, pl.Urgent, tc.action, tc.kind, tc.urgent)
			}
			switch {
			case tc.why == "" && pl.Why != nil:
				t.Errorf("why %q, want none", pl.Why)
			case tc.why != "" && (pl.Why == nil || !strings.Contains(pl.Why.Error(), tc.why) || !errors.Is(pl.Why, ErrSkipped)):
				t.Errorf("why %v, want %q (ErrSkipped)", pl.Why, tc.why)
			}
		})
	}
}

func TestPlanSaysWhetherHistoryMayBeRewritten(t *testing.T) {
	for _, tc := range []struct {
		rule                    string
		enabled                 bool
		facts                   TurnFacts
		mayRewrite, compactable bool
	}{
		{"compaction on, a conversation: compact or cut", true, TurnFacts{Identified: true}, true, true},
		{"compaction on, no conversation: cut to fit only", true, TurnFacts{}, true, false},
		{"an ephemeral request: neither", true, TurnFacts{Identified: true, Ephemeral: true}, false, false},
		{"history the provider keeps: neither, not even a cut to fit", true, TurnFacts{Identified: true, ServerHistory: true}, false, false},
		{"compaction off: neither", false, TurnFacts{Identified: true}, false, false},
	} {
		p := planPolicy
		p.Enabled = tc.enabled
		if pl := p.PlanTurn(tc.facts, planNow); pl.MayRewrite != tc.mayRewrite || pl.Compactable != tc.compactable {
			t.Errorf("%s: may rewrite %v, compactable %v", tc.rule, pl.MayRewrite, pl.Compactable)
		}
	}
}

func TestPrecompactAfter(t *testing.T) {
	background := planPolicy.PlanTurn(TurnFacts{Tokens: 6500, Identified: true}, planNow)
	none := planPolicy.PlanTurn(TurnFacts{Tokens: 100, Identified: true}, planNow)
	for _, tc := range []struct {
		rule  string
		plan  Plan
		input int
		found bool
		want  bool
	}{
		{"the upstream counted the bar (0.7 × trigger): start", background, 7000, true, true},
		{"the upstream counted under it: do not", background, 6999, true, false},
		{"no usage reported: do not", background, 9000, false, false},
		{"a turn not planned for it: do not, whatever the count", none, 9000, true, false},
	} {
		if got := tc.plan.PrecompactAfter(tc.input, tc.found); got != tc.want {
			t.Errorf("%s: %v", tc.rule, got)
		}
	}
}

func TestHysteresisShortensTheTail(t *testing.T) {
	p := Policy{Trigger: TriggerConfig{ThresholdTokens: 10000}} // target 0.5 × 10000 = 5000
	for _, tc := range []struct {
		rule                   string
		kept, keep, maxSummary int
		scale                  float64
		want                   int
		shorter                bool
	}{
		{"kept plus summary under the target: the cut stands", 3000, 2000, 1000, 1, 2000, false},
		{"exactly at the target: the cut stands", 4000, 2000, 1000, 1, 2000, false},
		{"over the target: the tail loses the excess", 5000, 2000, 1000, 1, 1000, true},
		{"over by more than the tail: no raw tail beyond keep_recent", 9000, 2000, 1000, 1, 0, true},
		{"the excess is in the upstream's tokens: halved for a doubling upstream", 3000, 2000, 1000, 2, 1000, true},
		{"no tail to shorten: the cut stands", 9000, 0, 1000, 1, 0, false},
	} {
		got, shorter := p.shorterTail(tc.kept, tc.keep, 10000, tc.maxSummary, tc.scale)
		if got != tc.want || shorter != tc.shorter {
			t.Errorf("%s: %d %v, want %d %v", tc.rule, got, shorter, tc.want, tc.shorter)
		}
	}
}

func TestMinReclaim(t *testing.T) {
	p := Policy{Trigger: TriggerConfig{ThresholdTokens: 10000}} // minimum min(4096, 2000) = 2000
	custom := Policy{MinReclaimTokens: 100}
	for _, tc := range []struct {
		rule     string
		policy   Policy
		replaced int
		plan     Plan
		reclaim  int
		skipped  string
	}{
		{"an automatic compaction reclaiming the minimum runs", p, 3000, Plan{Kind: KindAuto, Trigger: 10000}, 2000, ""},
		{"one reclaiming less is skipped", p, 2999, Plan{Kind: KindAuto, Trigger: 10000}, 1999,
			"compaction skipped: would reclaim 1999 tokens, under the minimum 2000"},
		{"a precompaction too", p, 2999, Plan{Kind: KindPrecompact, Trigger: 10000}, 1999, "under the minimum 2000"},
		{"the summary's cost is counted: a loss is reported as 0", p, 500, Plan{Kind: KindAuto, Trigger: 10000}, -500,
			"would reclaim 0 tokens"},
		{"urgent (over the window): any reclaim will do", p, 1001, Plan{Kind: KindAuto, Trigger: 10000, Urgent: true}, 1, ""},
		{"urgent, reclaiming nothing: skipped", p, 1000, Plan{Kind: KindRescue, Trigger: 10000, Urgent: true}, 0, "under the minimum 1"},
		{"manual: the user's call, whatever it reclaims", p, 10, Plan{Kind: KindManual, Trigger: 10000}, -990, ""},
		{"min_reclaim_tokens set: that minimum", custom, 1100, Plan{Kind: KindAuto, Trigger: 10000}, 100, ""},
		{"a small trigger: 20% of it", p, 1300, Plan{Kind: KindAuto, Trigger: 1000}, 300, ""},
		{"a huge trigger: at most 4096", p, 5095, Plan{Kind: KindAuto, Trigger: 1000000}, 4095, "under the minimum 4096"},
	} {
		reclaim, err := tc.policy.worthIt(tc.replaced, tc.plan, 1000, 1)
		switch {
		case reclaim != tc.reclaim:
			t.Errorf("%s: reclaim %d, want %d", tc.rule, reclaim, tc.reclaim)
		case tc.skipped == "" && err != nil:
			t.Errorf("%s: %v", tc.rule, err)
		case tc.skipped != "" && (err == nil || !errors.Is(err, ErrSkipped) || !strings.Contains(err.Error(), tc.skipped)):
			t.Errorf("%s: %v, want %q", tc.rule, err, tc.skipped)
		}
	}
}

// Size on a real request: what a compaction summarises and when it refuses.
func TestSize(t *testing.T) {
	res := New(Config{Format: chatFormat}).RewriteWith(chat("gpt-4o", agentTurns(40)...), Options{})
	small := New(Config{Format: chatFormat}).RewriteWith(chat("gpt-4o", agentTurns(1)...), Options{})
	trigger := res.TokensAfter / 2
	p := Policy{Trigger: TriggerConfig{ThresholdTokens: trigger}}
	demanding := p
	demanding.MinReclaimTokens = res.TokensAfter
	for _, tc := range []struct {
		rule    string
		policy  Policy
		res     Result
		plan    Plan
		skipped string
	}{
		{"over the trigger: a cut, under the target once summarised", p, res, Plan{Kind: KindAuto, Trigger: trigger}, ""},
		{"nothing outside keep_recent: skipped", p, small, Plan{Kind: KindManual, Trigger: trigger},
			"nothing to summarise outside the last 6 messages"},
		{"a reclaim under min_reclaim_tokens: skipped", demanding, res, Plan{Kind: KindAuto, Trigger: trigger}, "under the minimum"},
		{"manual, far under its trigger: compacted all the same", p, res, Plan{Kind: KindManual, Trigger: 100 * res.TokensAfter}, ""},
	} {
		prop, sz, err := tc.policy.Size(tc.res, tc.plan, history.Calibration{})
		switch {
		case tc.skipped != "":
			if err == nil || !errors.Is(err, ErrSkipped) || !strings.Contains(err.Error(), tc.skipped) {
				t.Errorf("%s: %v, want %q", tc.rule, err, tc.skipped)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.rule, err)
		case prop.Cut <= prop.From || sz.MaxSummaryTokens <= 0:
			t.Errorf("%s: cut [%d, %d), summary %d", tc.rule, prop.From, prop.Cut, sz.MaxSummaryTokens)
		case tc.plan.Kind == KindAuto && prop.KeptTokens+sz.MaxSummaryTokens > trigger/2+trigger/10:
			t.Errorf("%s: %d kept + %d summary, target %d", tc.rule, prop.KeptTokens, sz.MaxSummaryTokens, trigger/2)
		}
	}
}
