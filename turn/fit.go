package turn

import (
	"fmt"
	"time"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
)

// A request that would overflow the model's window is never forwarded as
// it is, nor lost to an overflow answer ctxpress could have prevented:
// losing old turns beats losing the request.
//
//   - Before forwarding (fit): a request whose calibrated estimate is
//     over the window, because compaction is backing off, its breaker is
//     open or it was not enough, is cut to fit (rewrite.Options.FitTokens).
//   - After an overflow answer, before any byte of it reached the client
//     (Refused): the line is compacted now (joining a compaction in
//     flight), cut to fit when that is not enough, and the request is sent
//     once more.

// fitMargin is the share of the window a cut request aims at: the
// estimate is calibrated, not exact.
const fitMargin = 0.95

// eventFit marks a cut-to-fit event (Event.Trigger; Result is "cut").
const eventFit = "fit"

// fitLimit is the most a request may count upstream in a window of window
// tokens: the window less the room body (of api's format) asks for its
// answer.
func fitLimit(api *API, window int, body []byte) int {
	reserve := 0
	for _, field := range api.OutputCaps {
		if reserve = int(gjson.GetBytes(body, field).Int()); reserve > 0 {
			break
		}
	}
	if reserve <= 0 || reserve >= window/2 {
		return window
	}
	return window - reserve
}

// fitBudget turns a limit in the upstream's tokens into the tiktoken
// budget rewrite.Options.FitTokens takes, on a line whose calibration
// is in nums.
func fitBudget(limit int, nums state.Line) int {
	return nums.Calibration.Raw(int(float64(limit) * fitMargin))
}

// fit cuts the turn's request to fit the model's window when its
// calibrated estimate says it would not (compaction on only: that is the
// user's leave to rewrite history). why is the reason the cut falls back
// on.
func (t *Turn) fit(why string) {
	if !t.plan.MayRewrite {
		return
	}
	if t.plan.Effective <= t.plan.Window/2 { // the window of t.res's model
		// fitLimit is over half the window whatever the body reserves for
		// the answer: no need to read the body for it.
		return
	}
	limit := fitLimit(t.api, t.plan.Window, t.res.Body)
	if t.plan.Effective <= limit { // the plan's estimate is of t.res, after any compaction
		return
	}
	switch {
	case why != "":
	case t.o.Err != nil:
		why = t.o.Err.Error()
	case t.o.Compacted:
		why = "still over the window after compaction"
	default:
		why = "not compacted"
	}
	t.cutToFit(fitBudget(limit, t.nums), why)
}

// cutToFit rewrites the turn's request to count at most budget tokens by
// leaving its oldest turns out, and says so as an event. It reports
// whether it cut.
func (t *Turn) cutToFit(budget int, why string) bool {
	rec := t.rec
	if t.compactable {
		// A compaction of this turn (or one it joined) stored its summary.
		if fresh, ok, err := t.ts.Store.Get(t.rt.Key); err == nil && ok {
			rec = fresh
		}
	}
	opts := t.ts.Comp.Options(rec, t.rt.Line.ID)
	opts.FitTokens = budget
	res, ok := t.rewrite(opts)
	if !ok || !res.Understood || res.FitDropped == 0 || res.TokensAfter > budget {
		// A cut that still does not fit (one message alone is too big)
		// would change the request for nothing: it goes as it is.
		return false
	}
	t.ts.Events.Publish(admin.Event{Time: t.ts.Comp.Now(), Conversation: t.id.ID, Model: res.Model, Trigger: eventFit, Result: "cut",
		Reason: fmt.Sprintf("%d messages left out to fit the model's window: %s", res.FitDropped, why), Covered: res.FitDropped,
		TokensBefore: t.nums.Calibration.Upstream(t.res.TokensAfter), TokensAfter: t.nums.Calibration.Upstream(res.TokensAfter)})
	t.res = res
	return true
}

// Rescues reports whether a refusal of the turn's request may be rescued
// (Refused): only when its history may be rewritten.
func (t *Turn) Rescues() bool { return t.plan.MayRewrite && !t.ts.Observe }

// Refused is what to do with an answer that refuses the turn's request
// (status, body answer) before any of it was relayed: when it refuses it
// as longer than the model's window (wire.IsContextOverflow), the request
// is compacted now (or the compaction in flight joined), cut to fit when
// that is not enough, and body is what to send once more (ok). A
// llama.cpp 500 for a full shared KV cache (several slots, no sizes given)
// is sent once more as it is when nothing smaller can be made: what
// overlapped it is over by then.
func (t *Turn) Refused(status int, answer []byte) (body []byte, ok bool) {
	if !t.Rescues() || !wire.IsContextOverflow(status, answer) {
		return nil, false
	}
	start := time.Now()
	refused := t.res
	budget, window := rescueBudget(t.api, t.plan.Window, refused, status, answer, t.nums)
	if window > 0 {
		// The compaction below, and its summary call, size by it too.
		t.rt.RefusedWindow = window
		observeWindow(&t.nums, window)
	}
	if t.compactable {
		if res, o := t.ts.Comp.MaybeCompact(t.input(refused), rewrite.KindRescue); res.TokensAfter < refused.TokensAfter {
			t.res, t.o = res, o
			t.rt.Compacted = o.Compacted && !o.Joined
		}
	}
	if t.res.TokensAfter > budget {
		t.cutToFit(budget, "the upstream refused the request as too long")
	}
	if t.res.TokensAfter >= refused.TokensAfter && status < 500 {
		return nil, false
	}
	t.setResult(t.res)
	t.ts.Log.Info().Str("conversation", t.id.ID).Int("status", status).
		Int("tokens_refused", t.nums.Calibration.Upstream(refused.TokensAfter)).Int("tokens_after", t.rt.TokensAfter).
		Dur("rescue_ms", time.Since(start)).Msg("the upstream refused the request as too long; sending it again compacted or cut to fit")
	return t.Body(), true
}

// rescueBudget is the tiktoken budget a request refused for overflow
// (with status) must fit, on a line with numbers nums whose window is
// window, and the window (the upstream's tokens) the refusal showed; 0
// when it showed none:
//   - a refusal that names the window and the request's size: the request
//     scaled to that window, which it showed;
//   - else the window's budget, unless the request was within it already
//     and the refusal is a 4xx (a local server's smaller context, a model
//     ctxpress does not know): then refusedShare of the refused size, and
//     that is the window shown. A 5xx without sizes (llama.cpp's shared KV
//     cache, full while other requests run) shows no window: the request
//     may fit on its own.
func rescueBudget(api *API, window int, refused rewrite.Result, status int, answer []byte, nums state.Line) (budget, shown int) {
	if w, size, ok := wire.OverflowSize(answer); ok && size > w {
		return int(float64(refused.TokensAfter) * float64(w) / float64(size) * fitMargin), w
	}
	if known := fitBudget(fitLimit(api, window, refused.Body), nums); known < refused.TokensAfter || status >= 500 {
		return known, 0
	}
	budget = int(float64(refused.TokensAfter) * refusedShare)
	return budget, nums.Calibration.Upstream(budget)
}

// refusedShare is the share of a refused request's size its one retry is
// cut to when the upstream did not say how long a request may be and the
// refused one already fit the window ctxpress knows: requests grow by a
// turn at a time, so the refused one is seldom far over the real window.
const refusedShare = 0.75
