package compaction

import (
	"fmt"
	"strings"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// ObserveCompaction is what observe mode does where a compaction is due
// (kind): no summary call (it would cost the user), but a stand-in of the
// summary's expected size, stored as an Observed branch, so that this and
// later would-be requests count what ctxpress would have sent; its event
// says "observed". It returns the request rewritten with it.
func (c *Engine) ObserveCompaction(ti Input, kind string) (rewrite.Result, Outcome) {
	ti.Kind = kind
	ev := admin.Event{Time: c.now(), Conversation: ti.Key.ID, Model: ti.Res.Model, Trigger: kind,
		TokensBefore: ti.Nums.Calibration.Upstream(ti.Res.TokensAfter)}
	prop, size, err := c.size(ti)
	if err != nil {
		ev.Result, ev.Reason = "skipped", err.Error()
		c.events.Publish(ev)
		return ti.Res, Outcome{Event: ev, Err: err}
	}
	summary := compactor.Finish(standIn(prop.Covered, size.MaxSummaryTokens/2), prop.LatestUserAsk)
	summaryTokens := ti.Res.SummaryTokens(summary, "")
	after := ti.Nums.Calibration.Upstream(prop.KeptTokens + summaryTokens)
	newRec, err := c.storeSummary(ti, prop, history.Branch{Summary: summary}, state.SummaryEntry{At: ev.Time, Summary: summary, CoveredMessages: prop.Covered,
		TokensBefore: ev.TokensBefore, TokensAfter: after})
	if err != nil {
		c.storeFailed()
		ev.Result, ev.Reason = "failed", fmt.Sprintf("storing the stand-in: %v", err)
		c.events.Publish(ev)
		return ti.Res, Outcome{Event: ev, Err: err}
	}
	// The summary call it would have made is billed as an estimate: the
	// request as sent for input (the previous one's part cached, when the
	// call would continue the conversation at its own upstream) and the
	// stand-in's size for output.
	call := state.Usage{Calls: 1, Input: int64(ev.TokensBefore), Output: int64(scaled(summaryTokens, ti.Nums.Calibration.Scale()))}
	if c.SummariserIsOwn(ti.API, ti.Res.Model) {
		call.Cached = int64(min(ti.Nums.LastSent, ev.TokensBefore))
	}
	c.countSummary(ti, &ev, call)
	res := c.pipeline.RewriteParsed(ti.Parsed, c.Options(newRec, ti.Line.ID))
	ev.Result, ev.Covered = "observed", prop.Covered
	ev.Reason = "observe mode: no summary call was made; its size and cost are estimated"
	ev.SummaryTokens, ev.TokensAfter = scaled(summaryTokens, ti.Nums.Calibration.Scale()), ti.Nums.Calibration.Upstream(res.TokensAfter)
	c.events.Publish(ev)
	return res, Outcome{Compacted: true, Event: ev}
}

// standIn is observe mode's placeholder for a summary of covered
// messages: about tokens long, as a summary written to half its cap
// would be.
func standIn(covered, tokens int) string {
	head := fmt.Sprintf("(observe mode: the summary of %d earlier messages would stand here.)", covered)
	return head + strings.Repeat(" …", max(0, tokens-len(head)/4))
}
