package turn

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ctxpress/ctxpress/rewrite"
)

// compact compacts the request when its plan says now, and prepares a
// background compaction when the plan (made again after a compaction now)
// says so; body is the client's, copied for a background one.
func (t *Turn) compact(body []byte) {
	switch {
	case t.compactable:
	case t.plan.Why != nil: // asked, on history the provider keeps
		t.ts.Log.Info().Err(t.plan.Why).Str("conversation", t.id.ID).Msg("compaction not done; forwarding uncompacted")
		return
	default:
		return
	}
	if t.plan.Action == rewrite.ActNone {
		t.o.Err = t.plan.Why
		t.reportCompactionError()
		return
	}
	comp := t.ts.Comp
	// The request as it came: a compaction now replaces t.res, and a
	// background one after it starts from the request again.
	in := t.input(t.res)
	if t.ts.Observe {
		// Nothing is summarised: a compaction due now stands in as what it
		// would have sent, and none is prepared ahead.
		if t.plan.Action == rewrite.ActNow {
			t.res, t.o = comp.ObserveCompaction(in, t.plan.Kind)
			t.rt.Compacted = t.o.Compacted
		}
		return
	}
	if t.plan.Action == rewrite.ActNow {
		facts := t.facts()
		t.res, t.o = comp.MaybeCompact(in, t.plan.Kind)
		t.rt.Compacted = t.o.Compacted && !t.o.Joined
		facts.Tokens, facts.AfterNow, facts.Compacted = t.res.TokensAfter, true, t.o.Compacted
		t.plan = comp.Plan(facts)
	}
	t.reportCompactionError()
	if t.plan.Action == rewrite.ActBackground {
		// The client's body is gone once its handler returns; the
		// background compaction parses its own copy.
		in.Body, in.Parsed = append([]byte(nil), body...), nil
		t.precompact, t.precompactPlan = &in, t.plan
	}
}

// reportCompactionError logs why the turn's compaction was not done, if
// it was not, at the level the reason deserves.
func (t *Turn) reportCompactionError() {
	switch err := t.o.Err; {
	case errors.Is(err, rewrite.ErrStoreFailing):
		// A broken disk is reported once per interval, not per turn.
		// Not counted again: the failed write that paused it was.
		t.ts.Paused(err)
	case errors.Is(err, rewrite.ErrSkipped):
		// Too little to reclaim, nothing outside the raw tail, breaker or
		// backoff: the compaction event already says so, at info; a warning
		// on every turn of a conversation near its trigger would be noise.
		t.ts.Log.Debug().Err(err).Str("conversation", t.id.ID).Msg("compaction not done; forwarding uncompacted")
	case err != nil:
		t.ts.Log.Warn().Err(err).Str("conversation", t.id.ID).Msg("compaction not done; forwarding uncompacted")
	}
}

// CompactReply is ctxpress's own answer to a "/compact" command (ok
// false: the turn is no such command, and is forwarded). It starts with
// rewrite.CompactReplyPrefix: that is how later requests, which carry the
// command and this reply, leave both out of what they forward.
func (t *Turn) CompactReply() (text string, ok bool) {
	if !t.res.CompactCommand || t.ts.Observe { // observe mode forwards it as sent
		return "", false
	}
	switch o := t.o; {
	case o.Compacted:
		text = fmt.Sprintf("compacted this conversation: %d earlier messages are now a summary; context %d → %d tokens.",
			o.Event.Covered, o.Event.TokensBefore, o.Event.TokensAfter)
	case o.Err != nil:
		text = "did not compact this conversation: " + strings.TrimPrefix(o.Err.Error(), rewrite.ErrSkipped.Error()+": ")
	default:
		text = "did not compact this conversation."
	}
	return rewrite.CompactReplyPrefix + " " + text, true
}
