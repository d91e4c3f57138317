package proxy

import (
	"fmt"
	"github.com/ctxpress/ctxpress/admin"
	"time"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// A request that would overflow the model's window is never forwarded as
// it is, nor lost to an overflow answer ctxpress could have prevented:
// losing old turns beats losing the request.
//
//   - Before forwarding (fitTurn): a request whose calibrated estimate is
//     over the window, because compaction is backing off, its breaker is
//     open or it was not enough, is cut to fit (rewrite.Options.FitTokens).
//   - After an overflow answer, before any byte of it reached the client
//     (rescueHook): the line is compacted now (joining a compaction in
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
func fitLimit(api *api, window int, body []byte) int {
	reserve := 0
	for _, field := range api.outputCaps {
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

// fitTurn cuts c's request to fit the model's window when its calibrated
// estimate says it would not (compaction on only: that is the user's
// leave to rewrite history). why is the reason the cut falls back on.
func (s *Server) fitTurn(c *turnRun, why string) {
	if !c.plan.MayRewrite {
		return
	}
	if c.plan.Effective <= c.plan.Window/2 { // the window of c.res's model
		// fitLimit is over half the window whatever the body reserves for
		// the answer: no need to read the body for it.
		return
	}
	limit := fitLimit(c.api, c.plan.Window, c.res.Body)
	if c.plan.Effective <= limit { // the plan's estimate is of c.res, after any compaction
		return
	}
	switch {
	case why != "":
	case c.o.err != nil:
		why = c.o.err.Error()
	case c.o.compacted:
		why = "still over the window after compaction"
	default:
		why = "not compacted"
	}
	s.cutToFit(c, fitBudget(limit, c.nums), why)
}

// cutToFit rewrites c's request to count at most budget tokens by leaving
// its oldest turns out, and says so as an event. It reports whether it cut.
func (s *Server) cutToFit(c *turnRun, budget int, why string) bool {
	rec := c.rec
	if c.compactable {
		// A compaction of this turn (or one it joined) stored its summary.
		if fresh, ok, err := s.store.Get(c.t.key); err == nil && ok {
			rec = fresh
		}
	}
	opts := s.comp.options(rec, c.t.line.id)
	opts.FitTokens = budget
	res, ok := s.rewrite(c.parsed, opts)
	if !ok || !res.Understood || res.FitDropped == 0 || res.TokensAfter > budget {
		// A cut that still does not fit (one message alone is too big)
		// would change the request for nothing: it goes as it is.
		return false
	}
	s.events.Publish(admin.Event{Time: s.comp.now(), Conversation: c.t.id.ID, Model: res.Model, Trigger: eventFit, Result: "cut",
		Reason: fmt.Sprintf("%d messages left out to fit the model's window: %s", res.FitDropped, why), Covered: res.FitDropped,
		TokensBefore: c.nums.Calibration.Upstream(c.res.TokensAfter), TokensAfter: c.nums.Calibration.Upstream(res.TokensAfter)})
	c.res = res
	return true
}

// rescueHook is the retry hook of a conversation request: an answer that refuses
// it as longer than the model's window (wire.IsContextOverflow),
// before any of it was relayed, gets the request compacted now (or the
// compaction in flight joined), cut to fit when that is not enough, and
// sent once more. A llama.cpp 500 for a full shared KV cache (several
// slots, no sizes given) is sent once more as it is when nothing smaller
// can be made: what overlapped it is over by then. A body that now asks
// drop_block goes with its beta, on ctx's request the retry is built from.
func (s *Server) rescueHook(ctx *fasthttp.RequestCtx, c *turnRun) refusalHook {
	if !c.plan.MayRewrite {
		return nil
	}
	return func(status int, _ *fasthttp.ResponseHeader, answer []byte) ([]byte, bool) {
		if !wire.IsContextOverflow(status, answer) {
			return nil, false
		}
		start := time.Now()
		refused := c.res
		budget, window := rescueBudget(c.api, c.plan.Window, refused, status, answer, c.nums)
		if window > 0 {
			// The compaction below, and its summary call, size by it too.
			c.t.refusedWindow = window
			observeWindow(&c.nums, window)
		}
		if c.compactable {
			if res, o := s.comp.maybeCompact(c.input(refused), kindRescue); res.TokensAfter < refused.TokensAfter {
				c.res, c.o = res, o
				c.t.compacted = o.compacted && !o.joined
			}
		}
		if c.res.TokensAfter > budget {
			s.cutToFit(c, budget, "the upstream refused the request as too long")
		}
		if c.res.TokensAfter >= refused.TokensAfter && status < 500 {
			return nil, false
		}
		c.t.setResult(c.res, c.nums)
		if c.res.DropMismatched {
			addAnthropicBeta(&ctx.Request.Header, betaThinkingBinding)
		}
		out := c.res.Body
		if c.res.Stream {
			out, _ = s.askStreamUsage(c.api, out, c.res.Model)
		}
		s.log.Info().Str("conversation", c.t.id.ID).Int("status", status).
			Int("tokens_refused", c.nums.Calibration.Upstream(refused.TokensAfter)).Int("tokens_after", c.t.tokensAfter).
			Dur("rescue", time.Since(start)).Msg("the upstream refused the request as too long; sending it again compacted or cut to fit")
		return out, true
	}
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
func rescueBudget(api *api, window int, refused rewrite.Result, status int, answer []byte, nums state.Line) (budget, shown int) {
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

// firstHook asks a, then b: the first that retries wins. A nil hook is
// skipped.
func firstHook(a, b refusalHook) refusalHook {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(status int, h *fasthttp.ResponseHeader, body []byte) ([]byte, bool) {
		if next, ok := a(status, h, body); ok {
			return next, true
		}
		return b(status, h, body)
	}
}
