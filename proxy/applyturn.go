package proxy

import (
	"slices"
	"time"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// applyTurns applies batch's turns idx, of one conversation, to its
// record rec in order: opened[i] says whether turn i opened its breaker,
// after[i] is the record as turn i left it.
// Their lines are cloned once, not at every turn (lineEditor), so after's
// records hold none.
func applyTurns(rec *state.Record, batch []*turnRecord, idx []int, opened []bool, after []state.Record) {
	e := lineEditor{rec: rec}
	for _, i := range idx {
		opened[i] = e.applyTurn(batch[i], batch[i].at)
		after[i] = *rec
		after[i].Lines = nil // edited in place by the next turn
	}
}

// applyTurn folds one answered turn into its conversation's record: the
// counters and turn list, the summary it used (so LRU eviction keeps it),
// and its line's numbers. It reports whether the turn opened the line's
// breaker.
func applyTurn(rec *state.Record, tr turnRecord, now time.Time) (opened bool) {
	e := lineEditor{rec: rec}
	return e.applyTurn(&tr, now)
}

// applyTurn is applyTurn on e's record, one of a run of edits.
func (e *lineEditor) applyTurn(tr *turnRecord, now time.Time) (opened bool) {
	opened = e.foldTurn(tr, now)
	t := &tr.turn
	e.rec.AddTurn(state.Turn{At: now, TokensBefore: t.tokensBefore, TokensAfter: t.tokensAfter,
		InputTokens: tr.usage.InputTokens, CachedTokens: tr.usage.CachedTokens, CacheWriteTokens: tr.usage.CacheWriteTokens,
		ServerCompactionInput: tr.usage.ServerCompaction.InputTokens, ServerCompactionOutput: tr.usage.ServerCompaction.OutputTokens,
		Compacted: t.compacted})
	return opened
}

// foldTurn is what an answered turn does to what its conversation's next
// requests are judged by: the model, the summary it used (so LRU eviction
// keeps it), and its line's numbers; applyTurn without the counters and
// turn list. It reports whether the turn opened the line's breaker.
func (e *lineEditor) foldTurn(tr *turnRecord, now time.Time) (opened bool) {
	rec, t := e.rec, &tr.turn
	if t.model != "" {
		rec.Model = t.model
	}
	if t.applied != nil {
		rec.TouchBranch(*t.applied, now)
	}
	ref := t.line
	relinkNew(rec, &ref)
	return e.update(ref, now, tr)
}

// foldTurns folds turns, queued and not written, into rec, a request's
// copy of their conversation's record, in order and as the writer will
// (foldTurn at the time each was answered). rec's Lines and Branches may
// be shared with other copies: they are copied before being written.
func foldTurns(rec *state.Record, turns []*turnRecord) {
	if len(rec.Branches) > 0 && slices.ContainsFunc(turns, func(tr *turnRecord) bool { return tr.turn.applied != nil }) {
		rec.Branches = slices.Clone(rec.Branches) // TouchBranch writes in place
	}
	e := lineEditor{rec: rec}
	for _, tr := range turns {
		e.foldTurn(tr, tr.at)
	}
}

// applyAnswered is what a turn answered does to its line l (applyTurn):
// its dedups, what the upstream reported, its usage. It reports whether
// the breaker opened.
func applyAnswered(rec *state.Record, l *state.Line, tr *turnRecord) (opened bool) {
	keepDedups(l, &tr.turn)
	opened = observe(rec, l, *tr)
	countUsage(rec, l, &tr.turn, tr.usage)
	return opened
}

// keepDedups makes the dedups and prunes of t's forwarded request its
// line's, when t is the line's newest request.
func keepDedups(l *state.Line, t *turn) {
	if t.forwarded && l.Tip == t.line.tip && l.Messages == t.line.messages {
		l.Dedups, l.Prunes = t.dedups, t.prunes
	}
}

// observe folds what the upstream reported for a turn into the turn's
// line l of rec (rewrite.Observe: calibration per model, breaker). Only a
// request of the line comes here, so a side request under the same key (a
// title, a sub-agent) never moves the main line's numbers. It reports
// whether the breaker opened.
func observe(rec *state.Record, l *state.Line, tr turnRecord) (opened bool) {
	t := tr.turn
	l.Numbers, opened = rewrite.Observe(l.Numbers, rewrite.Observation{
		Model: t.model, ModelRatio: rec.CalibrationFor(t.model), Raw: t.rawAfter,
		// The upstream's count of a request whose history it keeps is not
		// of what ctxpress counted: it calibrates nothing.
		UsageFound: tr.usage.Found && !t.serverHistory, InputTokens: tr.usage.InputTokens, Compacted: t.compacted, Trigger: t.trigger,
		CachedTokens: tr.usage.CachedTokens, CacheWriteTokens: tr.usage.CacheWriteTokens, RefusedWindow: t.refusedWindow,
		ServerCompacted: tr.usage.ServerCompacted,
	})
	return opened
}

// observeWindow gives l the window a refusal of one of its requests
// showed (rewrite.Observe's rule: a smaller one only).
func observeWindow(l *state.Line, window int) {
	l.Numbers, _ = rewrite.Observe(l.Numbers, rewrite.Observation{RefusedWindow: window})
}
