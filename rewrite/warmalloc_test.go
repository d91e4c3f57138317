package rewrite

import (
	"fmt"
	"runtime"
	"testing"
)

// A warm turn re-reads the whole history, so what it allocates per
// message is paid for every message on every turn. It used to build a
// second representation of every message (the compactor's skeleton) that
// only a cut needs, grow the parse's slices by doubling and the maps of
// calls from empty: 1363 bytes a message; without that, under 1000. The
// bound is deterministic (bytes allocated, the least of five turns), not
// a timing.
func TestWarmTurnAllocatesLittlePerMessage(t *testing.T) {
	conversation := func(pairs int) []byte {
		msgs := []string{`{"role":"system","content":"You are a coding agent."}`, `{"role":"user","content":"Fix the build."}`}
		for i := range pairs {
			id := fmt.Sprintf("call_%d", i)
			msgs = append(msgs, callMsg(id, "bash", fmt.Sprintf(`"{\"command\":\"cat file_%d.go\"}"`, i)),
				resultMsg(id, fmt.Sprintf("package main // file %d\n", i)))
		}
		return chat("gpt-4o", msgs...)
	}
	p := New(Config{Format: chatFormat, Squasher: corpusSquash, Dedup: DefaultDedupConfig()})
	allocated := func(body []byte) uint64 {
		p.Rewrite(body) // warm: every message's facts are cached
		least := ^uint64(0)
		for range 5 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			p.Rewrite(body)
			runtime.ReadMemStats(&after)
			least = min(least, after.TotalAlloc-before.TotalAlloc)
		}
		return least
	}
	small, large := conversation(100), conversation(200)
	perMessage := float64(allocated(large)-allocated(small)) / 200
	t.Logf("%.0f bytes per message", perMessage)
	if perMessage > 1150 {
		t.Fatalf("a warm turn allocates %.0f bytes per message", perMessage)
	}
}
