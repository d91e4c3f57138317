package recorder

import (
	"slices"

	"github.com/ctxpress/ctxpress/state"
)

// pendingTurns are a conversation's turns that are queued but not written
// yet, which its next requests read as if they were (read): a request is
// judged by the same numbers however far behind the writer is.
type pendingTurns struct {
	n   int
	seq uint64 // the last queued turn's seq
	// turns are those not written yet, oldest first (the writer takes them
	// in that order). Read-only once queued, so a reader copies the slice,
	// not the turns; written ones only move its start.
	turns []*Turn
	// writing: some of turns are in the batch the writer is storing, so a
	// record read meanwhile may or may not hold them (read waits).
	writing bool
	// writes counts the key's batches written while it had turns pending:
	// a fold made before the last one is of a record no longer stored.
	writes uint64
	// fold is the latest record read with turns folded into it, which the
	// next read extends by the turns queued since rather than folding
	// them all again (a busy key has hundreds queued while the writer
	// gathers); nil: none.
	fold *pendingFold
}

// pendingFold is a record as read from the store (base) with a key's
// queued turns up to seq through folded into it.
type pendingFold struct {
	writes  uint64 // pendingTurns.writes when base was read
	base    recordVersion
	through uint64
	rec     state.Record
}

// recordVersion tells one stored version of a record from the next:
// another replica may write a key between this one's writes.
type recordVersion struct {
	updated  int64 // UpdatedAt, in nanoseconds
	requests int64
}

func versionOf(rec *state.Record) recordVersion {
	return recordVersion{updated: rec.UpdatedAt.UnixNano(), requests: rec.Requests}
}

// read returns key's record as the store holds it, with key's
// turns that are queued but not written yet folded in as the writer will
// fold them (foldTurn): what a request is judged by (its line's
// calibration, cache evidence, window, dedup and prune marks, breaker;
// the branches it used) is the same whether the writer has run or not.
// The counters and turn list, the dashboard's, are left to the writer.
//
// A record read while a batch of the key's turns was being committed may
// or may not hold them: read then waits for that write to end and reads
// again, so that no turn is folded twice or missed.
func (r *Recorder) Read(key state.Key) (state.Record, error) {
	for {
		gen := r.gen.Load()
		rec, _, err := r.store.Get(key)
		r.pendingMu.Lock()
		p := r.pending[key]
		now := r.gen.Load()
		// Consistent when no batch began or ended since gen, or the only
		// one that did (still running) is not of key.
		if now == gen && (gen%2 == 0 || !p.writing) || now == gen+1 && gen%2 == 0 && !p.writing {
			r.pendingMu.Unlock()
			if err != nil || len(p.turns) == 0 {
				return rec, err
			}
			return r.fold(key, rec, p), nil
		}
		for p.writing && r.gen.Load() == now {
			r.wrote.Wait()
		}
		r.pendingMu.Unlock()
	}
}

// fold returns rec, key's record as stored, with p's turns folded in,
// starting from p's last fold when it is of the same stored record.
func (r *Recorder) fold(key state.Key, rec state.Record, p pendingTurns) state.Record {
	base, turns, through := versionOf(&rec), p.turns, uint64(0)
	if f := p.fold; f != nil && f.writes == p.writes && f.base == base {
		rec, through = f.rec, f.through
		i, _ := slices.BinarySearchFunc(turns, through+1, func(tr *Turn, seq uint64) int { return cmpSeq(tr.seq, seq) })
		if turns = turns[i:]; len(turns) == 0 {
			return rec
		}
	}
	foldTurns(&rec, turns)
	f := &pendingFold{writes: p.writes, base: base, through: turns[len(turns)-1].seq, rec: rec}
	r.pendingMu.Lock()
	if q, ok := r.pending[key]; ok && q.writes == f.writes && (q.fold == nil || q.fold.through < f.through) {
		q.fold = f
		r.pending[key] = q
	}
	r.pendingMu.Unlock()
	return rec
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// queueLocked adds tr, being queued, to its key's pending turns and
// gives it its seq; pendingMu is held.
func (r *Recorder) queueLocked(tr *Turn) {
	p := r.pending[tr.Key]
	p.n++
	p.seq++
	tr.seq = p.seq
	p.turns = append(p.turns, tr)
	r.pending[tr.Key] = p
}

// done1 counts tr, a pending turn, as lost: it never reached the queue.
func (r *Recorder) done1(tr *Turn) {
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	key := tr.Key
	if p := r.pending[key]; p.n > 1 {
		p.n--
		// A copy: readers may hold the old slice.
		p.turns = slices.DeleteFunc(slices.Clone(p.turns), func(q *Turn) bool { return q == tr })
		p.fold = nil
		r.pending[key] = p
	} else {
		delete(r.pending, key)
	}
	r.wakeIfAllWritten()
}

// writing marks the keys of batch's groups as being written, before the
// batch's transaction: a record read from now until doneBatch may hold
// their turns or not.
func (r *Recorder) writing(batch []*Turn, groups [][]int) {
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	r.gen.Add(1)
	for _, idx := range groups {
		key := batch[idx[0]].Key
		if p, ok := r.pending[key]; ok {
			p.writing = true
			r.pending[key] = p
		}
	}
}

// doneBatch counts a written batch's turns as done, under one lock rather
// than one per turn: requests wait on that lock (read, record), and each
// hand-off of it wakes a goroutine.
func (r *Recorder) doneBatch(batch []*Turn, groups [][]int) {
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	for _, idx := range groups {
		var seq uint64
		for _, i := range idx {
			seq = max(seq, batch[i].seq)
		}
		r.doneLocked(batch[idx[0]].Key, len(idx), seq)
	}
	r.gen.Add(1)
	r.wrote.Broadcast()
	r.wakeIfAllWritten()
}

// doneLocked counts n pending turns of key as written, the latest seq;
// pendingMu is held.
func (r *Recorder) doneLocked(key state.Key, n int, seq uint64) {
	p, ok := r.pending[key]
	if !ok {
		return // replayed from the journal: never pending
	}
	if p.n <= n {
		delete(r.pending, key)
		return
	}
	p.n -= n
	i := 0
	for i < len(p.turns) && p.turns[i].seq <= seq {
		i++
	}
	p.turns = p.turns[i:]
	p.writing, p.fold = false, nil
	p.writes++
	r.pending[key] = p
}

// wakeIfAllWritten wakes wait's callers when no turn is pending any more;
// pendingMu is held.
func (r *Recorder) wakeIfAllWritten() {
	if len(r.pending) == 0 && r.answering.Load() == 0 {
		r.allWritten.Broadcast()
	}
}

// Pending reports how many conversations have turns queued and not yet
// written (or dropped).
func (r *Recorder) Pending() int {
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	return len(r.pending)
}
