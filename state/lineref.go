package state

import (
	"slices"
	"time"
)

// LineRef names the line of history a request belongs to (see Line) and
// where the request takes it: its chain hash and length.
type LineRef struct {
	ID       ChainHash // the line's; a new line's is the request's own tip
	Tip      ChainHash
	Messages int
	// Chain is a new line's request chain (nil for a known line's): when
	// the turn is written, a line recorded since it was read (another
	// replica's previous turn, whose write had not landed yet) that the
	// request extends is its line after all (RelinkNew).
	Chain [][32]byte
}

// LineKey is what one compaction at a time is held for: a line of one
// conversation, not the whole key, so two histories that share a key never
// wait for each other's summary.
type LineKey struct {
	Key  Key
	Line ChainHash
}

// MatchChain is the index of the line of r that a request of chain
// extends, -1 for none.
func (r *Record) MatchChain(chain [][32]byte) int {
	return r.MatchLine(func(k int) (ChainHash, bool) {
		if k >= len(chain) {
			return ChainHash{}, false
		}
		return chain[k], true
	})
}

// RelinkNew points ref, a line that was new when its request read r, at the
// line of r it extends now, if one was recorded since.
func (r *Record) RelinkNew(ref *LineRef) {
	if ref.Chain == nil || r.LineByID(ref.ID) != nil {
		return
	}
	if i := r.MatchChain(ref.Chain); i >= 0 {
		ref.ID = r.Lines[i].ID
	}
}

// UpdateLine runs fn on the line ref names in r, creating it when it is
// not there yet (a first turn, or one evicted since), and stores it back.
// The line's tip moves to ref unless a longer request of it was recorded
// already; its LRU clock is set to now.
func (r *Record) UpdateLine(ref LineRef, now time.Time, fn func(*Line)) {
	l, _ := r.TouchedLine(ref, now)
	if fn != nil {
		fn(&l)
	}
	r.PutLine(l)
}

// TouchedLine is a copy of the line ref names in r (a new one when it is
// not there) with ref's tip, unless a longer request of it was recorded
// already, and its LRU clock set to now; and its index in r.Lines (-1:
// new).
func (r *Record) TouchedLine(ref LineRef, now time.Time) (Line, int) {
	i := slices.IndexFunc(r.Lines, func(l Line) bool { return l.ID == ref.ID })
	l := Line{ID: ref.ID}
	if i >= 0 {
		l = r.Lines[i]
	}
	if ref.Messages >= l.Messages {
		l.Tip, l.Messages = ref.Tip, ref.Messages
	}
	l.UsedAt = now
	return l, i
}
