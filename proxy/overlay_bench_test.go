package proxy

import (
	"fmt"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/rs/zerolog"
)

// BenchmarkOverlay is a request's look at its conversation's queued turns
// (recorder.overlay) while the store is behind by queued turns (512: a
// hot conversation at 14k turns a second while the writer gathers), on a
// record of four lines.
// Run: go test -run '^$' -bench Overlay -benchmem ./proxy/
func BenchmarkOverlay(b *testing.B) {
	for _, queued := range []int{1, 4, 16, 512} {
		b.Run(fmt.Sprintf("queued=%d", queued), func(b *testing.B) {
			// No writer: the turns stay queued.
			r := &recorder{log: zerolog.Nop(), now: time.Now, queue: make(chan *turnRecord, queued),
				queueWait: time.Second, pending: map[state.Key]pendingTurns{}}
			key := state.NewKey([]byte("Bearer sk"), "bench")
			var rec state.Record
			for n := range 4 {
				rec.Lines = append(rec.Lines, state.Line{ID: state.ChainHash{byte(n)}, Messages: 10, Model: "gpt-4o", Calibration: 1.1})
			}
			for i := range queued {
				ref := lineRef{id: state.ChainHash{2}, tip: state.ChainHash{byte(100 + i)}, messages: 11 + i}
				r.record(turnRecord{turn: turn{key: key, line: ref, model: "gpt-4o", rawAfter: 1000 + i, forwarded: true},
					usage: wire.Usage{Found: true, InputTokens: 1100 + i}})
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				got := rec
				r.overlay(key, &got)
			}
		})
	}
}
