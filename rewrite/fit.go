package rewrite

import (
	"fmt"

	"github.com/ctxpress/ctxpress/compactor"
)

// fit leaves out the oldest forwarded client messages, after the leading
// system messages and the summary's coverage, until the request as
// forwarded (v.fwd: squashed, deduped, pruned) counts at most budget
// tokens (see Options.FitTokens). It reports whether it left any out; the
// cut moves only forward, on a turn boundary, and the latest user ask it
// covers is re-sent.
func (v *view) fit(budget int) bool {
	n := len(v.req.Messages)
	// v.fwd has each message as forwarded, the savings of its replaced
	// results taken off already.
	fixed := v.fixed
	for i := range v.lead {
		fixed += v.fwd[i]
	}
	total := func(cut int) int {
		t := fixed
		for i := cut; i < n; i++ {
			t += v.fwd[i]
		}
		if u := v.resendAfter(cut, n); u >= 0 && cut > v.lead {
			t += v.fwd[u]
		}
		return t + v.additionTokens(v.block(), v.branch != nil, cut, n)
	}
	if total(v.dropTo) <= budget {
		return false
	}
	// The note's own tokens and the re-sent ask come out of the budget;
	// a second pass corrects for an ask the first cut did not foresee.
	v.fitNote = fmt.Sprintf(FitNote, n)
	room := budget - fixed - v.additionTokens(v.block(), v.branch != nil, n, n) // for the raw tail
	tail := func(i int) int { return v.fwd[i] }
	msgs := v.skeleton()
	cut, ok := compactor.FitCut(msgs, v.dropTo, room, tail)
	if !ok {
		v.fitNote = ""
		return false
	}
	for over := total(cut) - budget; over > 0; over = total(cut) - budget {
		next, ok := compactor.FitCut(msgs, cut, room-over, tail)
		if !ok || next <= cut {
			break
		}
		cut = next
	}
	from := v.lead
	if v.branch != nil {
		from += v.branch.Covered
	}
	cut = v.pastStanding(cut)
	v.dropTo = cut
	v.fitNote = fmt.Sprintf(FitNote, cut-from)
	v.resend = v.resendAfter(cut, n)
	return true
}

// block is the applied summary's block, "" when none.
func (v *view) block() string {
	if v.branch == nil {
		return ""
	}
	return compactor.Block(v.branch.Summary, v.branch.Kept.Note)
}
