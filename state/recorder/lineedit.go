package recorder

import (
	"time"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// lineEditor makes a run of turns' edits (state.Record.UpdateLine's) on
// one record, which no copy of it may see meanwhile, cloning its Lines
// once instead of at every edit (state.Record.PutLine clones them, as a
// copy of the record may share them): once an edit has cloned them they
// are the record's own, and a later edit of a line it holds is made in
// place, in PutLine's order (the edited line moves last).
type lineEditor struct {
	rec   *state.Record
	owned bool // rec.Lines' backing array is rec's alone
}

// update is e.rec.UpdateLine(ref, now, applyAnswered of tr): it reports
// whether tr opened the line's breaker.
func (e *lineEditor) update(ref state.LineRef, now time.Time, tr *Turn) (opened bool) {
	r := e.rec
	l, i := r.TouchedLine(ref, now)
	opened = applyAnswered(r, &l, tr)
	if !e.owned || i < 0 || len(r.Lines) > state.MaxLines {
		// A new line may evict another: PutLine decides.
		r.PutLine(l)
		e.owned = true
		return opened
	}
	copy(r.Lines[i:], r.Lines[i+1:])
	r.Lines[len(r.Lines)-1] = l
	return opened
}

// cacheSeen is what a conversation's usage so far shows of the
// upstream's prompt cache.
func cacheSeen(u state.Usage) rewrite.CacheSeen {
	return rewrite.CacheSeen{Reads: u.Cached > 0 || u.CacheWrite > 0, Writes: u.CacheWrite > 0}
}

// countUsage adds the usage of t, an answered turn, to rec, and its
// direct estimate; l is t's line, whose LastSent is the direct size of
// the line's previous request. A turn ctxpress answered itself (/compact)
// cost nothing and is not counted.
//
// The upstream's own compaction of the request (Anthropic's
// usage.iterations) is counted in both: the client asked for it and
// would have paid it without ctxpress too. The direct estimate of the
// rest is of the answer's own usage, the context after that compaction.
func countUsage(rec *state.Record, l *state.Line, t *Turn) {
	if !t.Forwarded {
		return
	}
	u := t.Usage
	if t.Observed {
		countObserved(rec, l, t)
		return
	}
	server := ServerCompactionUsage(u)
	rec.Usage = rec.Usage.Plus(CallUsage(u))
	rec.ServerCompaction = rec.ServerCompaction.Plus(server)
	if !u.Found {
		l.LastSent = t.TokensBefore // the estimate alone, for the next one's cache
		return
	}
	d := rewrite.DirectUsage(rewrite.DirectTurn{Forwarded: rewrite.Usage{Input: u.InputTokens, Cached: u.CachedTokens, CacheWrite: u.CacheWriteTokens, Output: u.OutputTokens}, Sent: t.TokensBefore, After: t.TokensAfter,
		PrevSent: l.LastSent}, cacheSeen(rec.Usage))
	rec.Direct = rec.Direct.Plus(state.Usage{Input: int64(d.Input) + server.Input, Cached: int64(d.Cached) + server.Cached,
		CacheWrite: int64(d.CacheWrite) + server.CacheWrite, Output: int64(d.Output) + server.Output})
	l.LastSent = d.Input
}

// countObserved is countUsage for a turn observe mode forwarded as the
// client sent it: what the upstream reported is the cost without
// ctxpress (Direct), and the cost with it (Usage) is estimated from it,
// as the direct cost is the other way round: the would-be request's
// size, read from the cache up to the previous would-be request, but not
// across a compaction (the summary changes the prefix).
func countObserved(rec *state.Record, l *state.Line, t *Turn) {
	u := t.Usage
	server := ServerCompactionUsage(u)
	rec.ServerCompaction = rec.ServerCompaction.Plus(server)
	if !u.Found {
		rec.Usage = rec.Usage.Plus(state.Usage{Unreported: 1})
		l.LastSent = t.TokensAfter
		return
	}
	actual := AnswerUsage(u)
	actual.Calls = 0
	rec.Direct = rec.Direct.Plus(actual.Plus(server))
	prev := l.LastSent
	if t.Compacted {
		prev = 0
	}
	w := rewrite.DirectUsage(rewrite.DirectTurn{Forwarded: rewrite.Usage{Input: u.InputTokens, Output: u.OutputTokens},
		Sent: t.TokensAfter, After: t.TokensBefore, PrevSent: prev}, cacheSeen(rec.Direct))
	rec.Usage = rec.Usage.Plus(state.Usage{Calls: 1, Input: int64(w.Input) + server.Input, Cached: int64(w.Cached) + server.Cached,
		CacheWrite: int64(w.CacheWrite) + server.CacheWrite, Output: int64(w.Output) + server.Output})
	l.LastSent = w.Input
}
