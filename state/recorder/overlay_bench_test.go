package recorder

import (
	"fmt"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
)

// BenchmarkRead is a request's read of its conversation's record
// (Recorder.Read) while the store is behind by queued turns (512: a hot
// conversation at 14k turns a second while the writer gathers), on a
// record of four lines: the store's read, and the queued turns folded in
// (after the first read, only those queued since).
// Run: go test -run '^$' -bench 'Read$' -benchmem ./proxy/
func BenchmarkRead(b *testing.B) {
	for _, queued := range []int{0, 1, 4, 16, 512} {
		b.Run(fmt.Sprintf("queued=%d", queued), func(b *testing.B) {
			st := state.NewMemory()
			b.Cleanup(func() { st.Close() })
			r := stoppedRecorder(b, st)
			key := state.NewKey([]byte("Bearer sk"), "bench")
			if _, err := st.Update(key, func(rec *state.Record) error {
				for n := range 4 {
					rec.Lines = append(rec.Lines, state.Line{ID: state.ChainHash{byte(n)}, Messages: 10,
						Numbers: history.Numbers{Model: "gpt-4o", Calibration: history.Calibration{Ratio: 1.1}}})
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			for i := range queued {
				ref := state.LineRef{ID: state.ChainHash{2}, Tip: state.ChainHash{byte(100 + i)}, Messages: 11 + i}
				r.Record(Turn{Key: key, Line: ref, Model: "gpt-4o", RawAfter: 1000 + i, Forwarded: true,
					Usage: wire.Usage{Found: true, InputTokens: 1100 + i}})
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := r.Read(key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkApplyTurns is the writer's work on one conversation of a batch:
// its turns of the interval (8: 64 busy conversations at 12k turns a
// second, a 40 ms interval) applied to the record as the store holds it,
// with four lines and a full turn history.
// Run: go test -run '^$' -bench ApplyTurns -benchmem ./proxy/
func BenchmarkApplyTurns(b *testing.B) {
	key := state.NewKey([]byte("Bearer sk"), "bench")
	var stored state.Record
	for n := range 4 {
		stored.Lines = append(stored.Lines, state.Line{ID: state.ChainHash{byte(n)}, Messages: 10,
			Numbers: history.Numbers{Model: "gpt-4o", Calibration: history.Calibration{Ratio: 1.1}}})
	}
	for range state.MaxTurns {
		stored.AddTurn(state.Turn{At: time.Unix(1764000000, 0), TokensBefore: 1000, TokensAfter: 900})
	}
	batch := make([]*Turn, 8)
	for i := range batch {
		ref := state.LineRef{ID: state.ChainHash{2}, Tip: state.ChainHash{byte(100 + i)}, Messages: 11 + i}
		batch[i] = &Turn{Key: key, Line: ref, Model: "gpt-4o", RawAfter: 1000 + i, Forwarded: true,
			TokensBefore: 1100, TokensAfter: 1000, Usage: wire.Usage{Found: true, InputTokens: 1100 + i}, At: time.Unix(1764000001, 0)}
	}
	idx := []int{0, 1, 2, 3, 4, 5, 6, 7}
	opened := make([]bool, len(batch))
	after := make([]state.Record, len(batch))
	b.ReportAllocs()
	for b.Loop() {
		rec := stored // the store's copy, as the writer's mutation gets it
		applyTurns(&rec, batch, idx, opened, after)
		stored = rec
	}
}
