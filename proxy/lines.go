package proxy

import (
	"slices"
	"time"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// lineRef names the line of history a request belongs to (see state.Line)
// and where the request takes it: its chain hash and length.
type lineRef struct {
	id       state.ChainHash // the line's; a new line's is the request's own tip
	tip      state.ChainHash
	messages int
	// chain is a new line's request chain (nil for a known line's): when
	// the turn is written, a line recorded since it was read (another
	// replica's previous turn, whose write had not landed yet) that the
	// request extends is its line after all (relinkNew).
	chain [][32]byte
}

// lineKey is what one compaction at a time is held for: a line of one
// conversation, not the whole key, so two histories that share a key never
// wait for each other's summary.
type lineKey struct {
	key  state.Key
	line state.ChainHash
}

// lineOf finds the line of rec that the request res extends and returns it
// with the numbers the request is judged by: the line's own, or, for a new
// line, none but the calibration of the model's other lines. A line whose
// model differs from the request's lends its breaker, not its numbers.
func lineOf(rec *state.Record, res rewrite.Result) (lineRef, state.Line) {
	return lineOfChain(rec, res.HistoryChain(), res.Model)
}

// lineOfChain is lineOf for a request of model whose history has chain.
func lineOfChain(rec *state.Record, chain [][32]byte, model string) (lineRef, state.Line) {
	if len(chain) == 0 {
		return lineRef{}, state.Line{}
	}
	n := len(chain) - 1
	ref := lineRef{tip: chain[n], messages: n}
	i := matchChain(rec, chain)
	if i < 0 {
		ref.id, ref.chain = ref.tip, chain
		cal := history.Calibration{Ratio: rec.CalibrationFor(model)}
		return ref, state.Line{ID: ref.id, Numbers: history.Numbers{Model: model, Calibration: cal}}
	}
	l := rec.Lines[i]
	ref.id = l.ID
	if l.Model != model {
		l.Numbers = rewrite.NumbersForModel(l.Numbers, model, rec.CalibrationFor(model))
	}
	return ref, l
}

// matchChain is the index of the line of rec that a request of chain
// extends, -1 for none.
func matchChain(rec *state.Record, chain [][32]byte) int {
	return rec.MatchLine(func(k int) (state.ChainHash, bool) {
		if k >= len(chain) {
			return state.ChainHash{}, false
		}
		return chain[k], true
	})
}

// relinkNew points ref, a line that was new when its request read r, at the
// line of r it extends now, if one was recorded since.
func relinkNew(r *state.Record, ref *lineRef) {
	if ref.chain == nil || r.LineByID(ref.id) != nil {
		return
	}
	if i := matchChain(r, ref.chain); i >= 0 {
		ref.id = r.Lines[i].ID
	}
}

// updateLine runs fn on the line ref names in r, creating it when it is
// not there yet (a first turn, or one evicted since), and stores it back.
// The line's tip moves to ref unless a longer request of it was recorded
// already; its LRU clock is set to now.
func updateLine(r *state.Record, ref lineRef, now time.Time, fn func(*state.Line)) {
	l, _ := touchedLine(r, ref, now)
	if fn != nil {
		fn(&l)
	}
	r.PutLine(l)
}

// touchedLine is a copy of the line ref names in r (a new one when it is
// not there) with ref's tip, unless a longer request of it was recorded
// already, and its LRU clock set to now; and its index in r.Lines (-1:
// new).
func touchedLine(r *state.Record, ref lineRef, now time.Time) (state.Line, int) {
	i := slices.IndexFunc(r.Lines, func(l state.Line) bool { return l.ID == ref.id })
	l := state.Line{ID: ref.id}
	if i >= 0 {
		l = r.Lines[i]
	}
	if ref.messages >= l.Messages {
		l.Tip, l.Messages = ref.tip, ref.messages
	}
	l.UsedAt = now
	return l, i
}

// lineEditor makes a run of turns' edits (updateLine's) on one record,
// which no copy of it may see meanwhile, cloning its Lines once instead of
// at every edit (state.Record.PutLine clones them, as a copy of the record may
// share them): once an edit has cloned them they are the record's own, and
// a later edit of a line it holds is made in place, in PutLine's order (the
// edited line moves last).
type lineEditor struct {
	rec   *state.Record
	owned bool // rec.Lines' backing array is rec's alone
}

// update is updateLine(e.rec, ref, now, applyAnswered of tr): it reports
// whether tr opened the line's breaker.
func (e *lineEditor) update(ref lineRef, now time.Time, tr *turnRecord) (opened bool) {
	r := e.rec
	l, i := touchedLine(r, ref, now)
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
