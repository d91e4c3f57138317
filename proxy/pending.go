package proxy

import (
	"slices"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// pendingTurns is what a request needs of its conversation's turns that are
// queued but not written yet: how many, and for each line they extend,
// what pendingLine keeps. Two histories under one key (runs of one agent,
// an app-wide id) each find their own line while the store is slow.
type pendingTurns struct {
	n     int
	seq   uint64 // the last queued turn's seq
	lines pendingLines
}

// pendingLines are the lines of a key's queued turns, in the order they
// were first queued.
type pendingLines []pendingLine

// pendingLine is what a line's queued turns tell its next request: the
// latest (where it took the line, its dedups), and the latest with usage
// (nil: none). Both are read-only once queued, so a request copies the
// pointers, not the turns.
type pendingLine struct {
	newest *turn
	usage  *turnRecord
	// earlier are the usages of the line's queued turns before usage's,
	// oldest first, and their seqs: the cost model counts every turn and
	// what each said of the cache, not only the latest. Those written are
	// dropped (sinceWritten): a busy key may never have none queued, and
	// its written turns are in the record already. tally sums them, so a
	// request folds them in at once however many a busy line has queued
	// (hundreds while the writer gathers under load).
	earlier    []rewrite.Usage
	earlierSeq []uint64
	tally      rewrite.UsageTally
	// window is the smallest window a refusal of one of the line's queued
	// turns showed (0: none), which usage's turn may not carry: the line's
	// next requests are planned by it before the writer gets to it.
	window int
}

// sinceWritten drops from l's earlier usages those of turns up to seq,
// which are written. Only the start moves: a copy of l (overlay) keeps
// reading what it saw, and appends go past its end.
func (l *pendingLine) sinceWritten(seq uint64) {
	n := 0
	for n < len(l.earlierSeq) && l.earlierSeq[n] <= seq {
		l.tally = l.tally.Remove(l.earlier[n])
		n++
	}
	l.earlier, l.earlierSeq = l.earlier[n:], l.earlierSeq[n:]
}

// with returns ls with queued on its line.
func (ls pendingLines) with(queued *turnRecord) pendingLines {
	i := slices.IndexFunc(ls, func(l pendingLine) bool { return l.newest.line.id == queued.turn.line.id })
	if i < 0 {
		ls, i = append(ls, pendingLine{}), len(ls)
	}
	ls[i].newest = &queued.turn
	ls[i].window = rewrite.SmallerWindow(ls[i].window, queued.turn.refusedWindow)
	// A turn the upstream compacted itself teaches its line nothing
	// (rewrite.Observation.ServerCompacted).
	if queued.usage.Found && !queued.usage.ServerCompacted {
		if ls[i].usage != nil {
			u := cacheUsage(ls[i].usage.usage)
			ls[i].earlier = append(ls[i].earlier, u)
			ls[i].earlierSeq = append(ls[i].earlierSeq, ls[i].usage.seq)
			ls[i].tally = ls[i].tally.Add(u)
		}
		ls[i].usage = queued
	}
	return ls
}

// done1 counts one pending turn of key as written (its seq; 0: lost).
func (r *recorder) done1(key state.Key, seq uint64) {
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	r.doneLocked(key, 1, seq)
	r.wakeIfAllWritten()
}

// doneBatch counts a written batch's turns as done1 would one by one,
// under one lock rather than one per turn: requests wait on that lock
// (overlay, record), and each hand-off of it wakes a goroutine.
func (r *recorder) doneBatch(batch []*turnRecord, groups [][]int) {
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	for _, idx := range groups {
		var seq uint64
		for _, i := range idx {
			seq = max(seq, batch[i].seq)
		}
		r.doneLocked(batch[idx[0]].turn.key, len(idx), seq)
	}
	r.wakeIfAllWritten()
}

// doneLocked counts n pending turns of key as written, the latest seq;
// pendingMu is held.
func (r *recorder) doneLocked(key state.Key, n int, seq uint64) {
	if p := r.pending[key]; p.n > n {
		p.n -= n
		for i := range p.lines {
			p.lines[i].sinceWritten(seq)
		}
		r.pending[key] = p
	} else {
		delete(r.pending, key)
	}
}

// wakeIfAllWritten wakes wait's callers when no turn is pending any more;
// pendingMu is held.
func (r *recorder) wakeIfAllWritten() {
	if len(r.pending) == 0 && r.answering.Load() == 0 {
		r.allWritten.Broadcast()
	}
}

// overlay gives rec, a record just read from the store, the lines of key's
// turns that are queued but not yet written, with the usage and
// calibration of each line's latest: O(lines) however many are queued,
// under a short lock.
func (r *recorder) overlay(key state.Key, rec *state.Record) {
	// A copy (record changes them in place), on the stack for a key's
	// usual few lines.
	var few [4]pendingLine
	r.pendingMu.Lock()
	lines := append(few[:0], r.pending[key].lines...)
	r.pendingMu.Unlock()
	if len(lines) == 0 {
		return
	}
	now := r.now()
	// rec is the caller's copy, read from the store just now.
	e := lineEditor{rec: rec}
	for i := range lines {
		l := &lines[i]
		e.update(l.newest.line, now, lineEdit{dedupsOf: l.newest})
		if l.tally.Turns > 0 { // one edit: touching the line again changes nothing
			e.update(l.newest.line, now, lineEdit{caches: l.tally})
		}
		if l.usage != nil {
			tr := *l.usage
			tr.turn.compacted = false // the breaker is the writer's business
			e.update(tr.turn.line, now, lineEdit{observe: &tr})
		}
		if l.window > 0 {
			e.update(l.newest.line, now, lineEdit{window: l.window})
		}
	}
}
