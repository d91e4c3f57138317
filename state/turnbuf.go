package state

import "sync/atomic"

// turnBuf is an array that AddTurn appends turns into in place, so a turn
// costs no copy of the history. Copies of a Record share it, and share
// the turns written in it (Record.Turns is read-only); what says which
// copy may write next is end: the number of slots taken. Only a copy whose
// Turns end at the last taken slot may take the next one, and it takes it
// with a compare-and-swap, so of several copies (even appending at once)
// one appends in place and the others copy their turns into a new buffer.
// A slot is written only by the copy that took it, and no copy's Turns
// reach past the slots taken when it was made: nobody reads a slot while
// it is written.
type turnBuf struct {
	arr []Turn       // fixed length; arr[:end] is written
	end atomic.Int64 // slots taken
}

// turnBufSize is a full buffer's length: past MaxTurns, a turn in every
// turnBufSize-MaxTurns+1 copies the MaxTurns-1 kept into a new buffer,
// about two copied per turn, for half the history's size in memory.
const turnBufSize = MaxTurns + MaxTurns/2

// add returns ts with t appended, keeping the last MaxTurns, and the
// buffer the result is in. ts is a Record's Turns and b its buffer (nil:
// none); ts need not be in b (a caller may have replaced Turns), and then
// is copied.
func (b *turnBuf) add(ts []Turn, t Turn) ([]Turn, *turnBuf) {
	if b != nil && len(ts) > 0 {
		e := b.end.Load()
		if e < int64(len(b.arr)) && &ts[len(ts)-1] == &b.arr[e-1] && b.end.CompareAndSwap(e, e+1) {
			b.arr[e] = t
			n := min(len(ts)+1, MaxTurns)
			// cap = len: an append outside AddTurn copies, never
			// writes into a slot another copy may take.
			return b.arr[e+1-int64(n) : e+1 : e+1], b
		}
	}
	kept := ts[max(0, len(ts)-MaxTurns+1):]
	n := len(kept) + 1
	nb := &turnBuf{arr: make([]Turn, min(max(2*n, 8), turnBufSize))}
	copy(nb.arr, kept)
	nb.arr[len(kept)] = t
	nb.end.Store(int64(n))
	return nb.arr[:n:n], nb
}

// adoptTurns makes r.Turns, an array no other record shares (just
// decoded), r's buffer, so AddTurn appends into its spare capacity, and
// returns the buffer (nil: none, no turns).
func adoptTurns(r *Record) *turnBuf {
	if len(r.Turns) == 0 || len(r.Turns) >= cap(r.Turns) {
		return nil
	}
	b := &turnBuf{arr: r.Turns[:cap(r.Turns)]}
	b.end.Store(int64(len(r.Turns)))
	r.Turns, r.turns = r.Turns[:len(r.Turns):len(r.Turns)], b
	return b
}
