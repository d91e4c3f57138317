package state

import (
	"sync"
	"testing"
)

// A turn added to a record of MaxTurns turns appends into the record's
// buffer: the history is copied once in many turns, not on every turn
// (that copy was a quarter of the bytes the chat path allocated).
func TestAddingATurnDoesNotCopyTheHistory(t *testing.T) {
	var r Record
	for i := range MaxTurns {
		r.AddTurn(Turn{TokensBefore: i})
	}
	copies := 0
	const turns = 10 * MaxTurns
	for i := range turns {
		second := &r.Turns[1] // where Turns starts when appended in place
		r.AddTurn(Turn{TokensBefore: MaxTurns + i})
		if &r.Turns[0] != second {
			copies++
		}
		if len(r.Turns) != MaxTurns || r.Turns[0].TokensBefore != i+1 || r.Turns[MaxTurns-1].TokensBefore != MaxTurns+i {
			t.Fatalf("turn %d: %d turns from %d to %d, want the last %d", i, len(r.Turns), r.Turns[0].TokensBefore, r.Turns[len(r.Turns)-1].TokensBefore, MaxTurns)
		}
	}
	if max := turns / (turnBufSize - MaxTurns); copies > max {
		t.Errorf("the history was copied %d times in %d turns, want at most %d", copies, turns, max)
	}
}

// The allocations of AddTurn on a full record: at most one (the new
// buffer) in the turnBufSize-MaxTurns+1 turns a buffer lasts.
func TestAddTurnAllocatesOncePerBuffer(t *testing.T) {
	var r Record
	for i := range MaxTurns {
		r.AddTurn(Turn{TokensBefore: i})
	}
	avg := testing.AllocsPerRun(1000, func() { r.AddTurn(Turn{TokensBefore: 1}) })
	if want := 2.0 / float64(turnBufSize-MaxTurns+1); avg > want {
		t.Errorf("AddTurn allocates %.3f times per turn, want at most %.3f", avg, want)
	}
}

// Copies of a record share its turns; each copy that adds a turn sees its
// own history, and no copy sees another's turn.
func TestCopiesOfARecordAddTheirOwnTurns(t *testing.T) {
	var base Record
	for i := range MaxTurns - 1 {
		base.AddTurn(Turn{TokensBefore: i})
	}
	a, b := base, base
	a.AddTurn(Turn{TokensBefore: -1})
	b.AddTurn(Turn{TokensBefore: -2})
	base.AddTurn(Turn{TokensBefore: -3})
	for name, c := range map[string]struct {
		r    Record
		last int
	}{"a": {a, -1}, "b": {b, -2}, "base": {base, -3}} {
		if n := len(c.r.Turns); n != MaxTurns || c.r.Turns[n-1].TokensBefore != c.last || c.r.Turns[n-2].TokensBefore != MaxTurns-2 {
			t.Errorf("%s: %d turns ending %+v, want %d ending %d", name, n, c.r.Turns[n-1], MaxTurns, c.last)
		}
	}
	// An append outside AddTurn cannot write into a slot of the buffer.
	a2 := a
	_ = append(a.Turns, Turn{TokensBefore: -9})
	a2.AddTurn(Turn{TokensBefore: -4})
	if got := a2.Turns[len(a2.Turns)-1].TokensBefore; got != -4 {
		t.Errorf("a's own turn is %d, want -4", got)
	}
}

// Copies of one record adding turns at once (the store's cache and its
// callers hold copies): each keeps its own turns, run with -race.
func TestCopiesOfARecordAddTurnsConcurrently(t *testing.T) {
	var base Record
	for i := range MaxTurns {
		base.AddTurn(Turn{TokensBefore: i})
	}
	const copies, turns = 8, 3 * MaxTurns
	var wg sync.WaitGroup
	got := make([]Record, copies)
	for c := range copies {
		wg.Go(func() {
			r := base
			for i := range turns {
				r.AddTurn(Turn{TokensBefore: 1000*c + i, InputTokens: c})
				if i%MaxTurns == 7 {
					snap := r // a copy that keeps adding from the same point
					snap.AddTurn(Turn{InputTokens: -1})
				}
			}
			got[c] = r
		})
	}
	wg.Wait()
	for c, r := range got {
		if len(r.Turns) != MaxTurns {
			t.Fatalf("copy %d: %d turns", c, len(r.Turns))
		}
		for i, tu := range r.Turns {
			if want := 1000*c + turns - MaxTurns + i; tu.TokensBefore != want || tu.InputTokens != c {
				t.Fatalf("copy %d turn %d = %+v, want TokensBefore %d of copy %d", c, i, tu, want, c)
			}
		}
	}
	for i, tu := range base.Turns {
		if tu.TokensBefore != i {
			t.Fatalf("the shared record's turn %d changed: %+v", i, tu)
		}
	}
}
