package recorder

import (
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
)

// An active conversation's summary is used on every turn, so it is the
// most recently used branch however many other histories of the key
// compact after it: it must never be the one evicted.
func TestAppliedSummaryIsNotEvictedByOtherBranches(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var rec state.Record
	active := state.ChainHash{1}
	rec.PutBranch(state.Branch{Branch: history.Branch{Summary: "active", Covered: 10, Hash: active}}, t0)
	for i := range 2 * state.MaxBranches {
		// A turn of the active conversation applies its summary...
		applyTurn(&rec, Turn{Applied: &active}, t0.Add(time.Duration(2*i+1)*time.Minute))
		// ...and another history of the key compacts.
		rec.PutBranch(state.Branch{Branch: history.Branch{Summary: "other", Covered: 4, Hash: state.ChainHash{byte(2 + i)}}},
			t0.Add(time.Duration(2*i+2)*time.Minute))
	}
	found := false
	for _, b := range rec.Branches {
		found = found || b.Hash == active
	}
	if !found {
		t.Fatal("the summary the conversation uses every turn was evicted")
	}
}

// While the store is slow to write, the next request of each history
// under a key finds its line and the numbers its last turn reported. Only
// the key's latest queued turn was seen, so the other history's request,
// its turns not written yet, started a line of its own (from no
// calibration, without its breaker), and the record kept two lines for it.
func TestQueuedTurnsOfEveryHistoryAreSeenByTheNextRequest(t *testing.T) {
	r := stoppedRecorder(t, state.NewMemory()) // nothing is written
	key := state.NewKey([]byte("Bearer k"), "app-wide-id")
	lineA := state.LineRef{ID: state.ChainHash{0xa}, Tip: state.ChainHash{0xa, 9}, Messages: 9}
	lineB := state.LineRef{ID: state.ChainHash{0xb}, Tip: state.ChainHash{0xb, 7}, Messages: 7}
	r.Record(Turn{Key: key, Line: lineA, Model: "m", RawAfter: 1000,
		Usage: wire.Usage{Found: true, InputTokens: 1500}})
	r.Record(Turn{Key: key, Line: lineB, Model: "m", RawAfter: 800,
		Usage: wire.Usage{Found: true, InputTokens: 1000}})

	rec, err := r.Read(key) // what the next request reads
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		ref   state.LineRef
		input int
	}{{lineA, 1500}, {lineB, 1000}} {
		l := rec.LineByID(want.ref.ID)
		if l == nil {
			t.Errorf("line %x not seen while its turn is queued (lines %+v)", want.ref.ID[:1], rec.Lines)
			continue
		}
		if l.Tip != want.ref.Tip || l.Messages != want.ref.Messages || l.Calibration.LastInput != want.input {
			t.Errorf("line %x: tip %x at %d, input %d; want the queued turn's %x at %d, %d",
				want.ref.ID[:1], l.Tip[:2], l.Messages, l.Calibration.LastInput, want.ref.Tip[:2], want.ref.Messages, want.input)
		}
	}
}

// On replicas, a conversation's second turn can reach another replica
// before the first turn's record is written: it reads no line and starts
// one. When its own record is written after the first turn's, it must join
// the first turn's line, not leave the conversation with two.
func TestTurnThatReadBeforeThePreviousTurnsRecordJoinsItsLine(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	chain := [][32]byte{{1}, {2}, {3}, {4}}
	// Both turns were read against an empty record.
	first, second := newLine(chain[:2]), newLine(chain)
	var rec state.Record
	applyTurn(&rec, Turn{Line: first, Model: "m"}, t0)
	applyTurn(&rec, Turn{Line: second, Model: "m"}, t0.Add(time.Second))
	if len(rec.Lines) != 1 {
		t.Fatalf("%d lines for one conversation, want 1", len(rec.Lines))
	}
	if l := rec.Lines[0]; l.ID != state.ChainHash(chain[1]) || l.Tip != state.ChainHash(chain[3]) || l.Messages != 3 {
		t.Errorf("line %x tip %x at %d messages; want the first turn's line at the second's tip", l.ID[:2], l.Tip[:2], l.Messages)
	}
	// A different history read against the same empty record keeps its own.
	other := newLine([][32]byte{{1}, {9}})
	applyTurn(&rec, Turn{Line: other, Model: "m"}, t0.Add(2*time.Second))
	if len(rec.Lines) != 2 {
		t.Errorf("%d lines after another history's first turn, want 2", len(rec.Lines))
	}
}

// newLine is the line a request of chain starts when its record has none
// it extends: named after its own tip, with its chain to relink by.
func newLine(chain [][32]byte) state.LineRef {
	tip := state.ChainHash(chain[len(chain)-1])
	return state.LineRef{ID: tip, Tip: tip, Messages: len(chain) - 1, Chain: chain}
}

// The upstream's count of a request whose history it keeps covers what
// ctxpress never saw: it must not teach the line (nor, through it, the
// model's other lines) a calibration 50 times too high.
func TestServerHistoryTurnTeachesNoCalibration(t *testing.T) {
	rec, l := &state.Record{}, &state.Line{}
	tr := &Turn{Model: "gpt-5", RawAfter: 100, ServerHistory: true, Usage: wire.Usage{InputTokens: 5000, Found: true}}
	observe(rec, l, tr)
	if l.Calibration.Ratio != 0 || l.Calibration.LastInput != 0 {
		t.Fatalf("calibration %v, last input %d after a previous_response_id turn", l.Calibration.Ratio, l.Calibration.LastInput)
	}
	tr.ServerHistory = false
	observe(rec, l, tr)
	if l.Calibration.LastInput != 5000 {
		t.Fatalf("an ordinary turn: last input %d", l.Calibration.LastInput)
	}
}
