package recorder

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
func applyTurns(rec *state.Record, batch []*Turn, idx []int, opened []bool, after []state.Record) {
	e := lineEditor{rec: rec}
	for _, i := range idx {
		opened[i] = e.applyTurn(batch[i], batch[i].At)
		after[i] = *rec
		after[i].Lines = nil // edited in place by the next turn
	}
}

// applyTurn folds one answered turn into its conversation's record: the
// counters and turn list, the summary it used (so LRU eviction keeps it),
// and its line's numbers. It reports whether the turn opened the line's
// breaker.
func applyTurn(rec *state.Record, tr Turn, now time.Time) (opened bool) {
	e := lineEditor{rec: rec}
	return e.applyTurn(&tr, now)
}

// applyTurn is applyTurn on e's record, one of a run of edits.
func (e *lineEditor) applyTurn(tr *Turn, now time.Time) (opened bool) {
	opened = e.foldTurn(tr, now)
	t := tr
	e.rec.AddTurn(state.Turn{At: now, TokensBefore: t.TokensBefore, TokensAfter: t.TokensAfter,
		InputTokens: t.Usage.InputTokens, CachedTokens: t.Usage.CachedTokens, CacheWriteTokens: t.Usage.CacheWriteTokens,
		ServerCompactionInput: t.Usage.ServerCompaction.InputTokens, ServerCompactionOutput: t.Usage.ServerCompaction.OutputTokens,
		Compacted: t.Compacted, Edits: t.Edits})
	e.rec.Name(t.Title, t.Agent)
	return opened
}

// foldTurn is what an answered turn does to what its conversation's next
// requests are judged by: the model, the summary it used (so LRU eviction
// keeps it), and its line's numbers; applyTurn without the counters and
// turn list. It reports whether the turn opened the line's breaker.
func (e *lineEditor) foldTurn(tr *Turn, now time.Time) (opened bool) {
	rec, t := e.rec, tr
	if t.Model != "" {
		rec.Model = t.Model
	}
	if t.Applied != nil {
		rec.TouchBranch(*t.Applied, now)
	}
	ref := t.Line
	rec.RelinkNew(&ref)
	return e.update(ref, now, tr)
}

// foldTurns folds turns, queued and not written, into rec, a request's
// copy of their conversation's record, in order and as the writer will
// (foldTurn at the time each was answered). rec's Lines and Branches may
// be shared with other copies: they are copied before being written.
func foldTurns(rec *state.Record, turns []*Turn) {
	if len(rec.Branches) > 0 && slices.ContainsFunc(turns, func(tr *Turn) bool { return tr.Applied != nil }) {
		rec.Branches = slices.Clone(rec.Branches) // TouchBranch writes in place
	}
	e := lineEditor{rec: rec}
	for _, tr := range turns {
		e.foldTurn(tr, tr.At)
	}
}

// applyAnswered is what a turn answered does to its line l (applyTurn):
// its dedups, what the upstream reported, its usage. It reports whether
// the breaker opened.
func applyAnswered(rec *state.Record, l *state.Line, tr *Turn) (opened bool) {
	keepDedups(l, tr)
	opened = observe(rec, l, tr)
	countUsage(rec, l, tr)
	return opened
}

// keepDedups makes the dedups and prunes of t's forwarded request its
// line's, when t is the line's newest request.
func keepDedups(l *state.Line, t *Turn) {
	if t.Forwarded && l.Tip == t.Line.Tip && l.Messages == t.Line.Messages {
		l.Dedups, l.Prunes = t.Dedups, t.Prunes
	}
}

// observe folds what the upstream reported for a turn into the turn's
// line l of rec (rewrite.Observe: calibration per model, breaker). Only a
// request of the line comes here, so a side request under the same key (a
// title, a sub-agent) never moves the main line's numbers. It reports
// whether the breaker opened.
func observe(rec *state.Record, l *state.Line, t *Turn) (opened bool) {
	l.Numbers, opened = rewrite.Observe(l.Numbers, rewrite.Observation{
		Model: t.Model, ModelRatio: rec.CalibrationFor(t.Model), Raw: t.RawAfter,
		// The upstream's count of a request whose history it keeps is not
		// of what ctxpress counted: it calibrates nothing.
		UsageFound: t.Usage.Found && !t.ServerHistory, InputTokens: t.Usage.InputTokens, Trigger: t.Trigger,
		// Observe mode's compaction was not sent: the upstream's count,
		// of the request as the client sent it, says nothing of it.
		Compacted:    t.Compacted && !t.Observed,
		CachedTokens: t.Usage.CachedTokens, CacheWriteTokens: t.Usage.CacheWriteTokens, RefusedWindow: t.RefusedWindow,
		ServerCompacted: t.Usage.ServerCompacted,
	})
	return opened
}
