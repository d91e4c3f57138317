package rewrite

import "testing"

// BenchmarkParseNextTurn parses each corpus trace's last turn (its whole
// history) as a request: "fresh" with nothing remembered, "next" with the
// turn before it (two messages fewer) remembered, as an agent's next
// request finds it, and "repeat" with the same body remembered (a retry).
// Run: go test -run '^$' -bench ParseNextTurn ./rewrite/
func BenchmarkParseNextTurn(b *testing.B) {
	var prevs, nexts [][]byte
	size := 0
	for _, tr := range loadTraces(b) {
		req, _ := parseRequest(tr.body)
		if n := len(req.messages); n > 2 {
			prevs, nexts = append(prevs, prefixBody(b, tr.body, n-2)), append(nexts, tr.body)
			size += len(tr.body)
		}
	}
	run := func(b *testing.B, parse func(i int)) {
		b.SetBytes(int64(size / len(nexts)))
		b.ReportAllocs()
		for i := range b.N {
			parse(i % len(nexts))
		}
	}
	b.Run("fresh", func(b *testing.B) {
		run(b, func(i int) { Parse(chatFormat, nexts[i]) })
	})
	b.Run("next", func(b *testing.B) {
		run(b, func(i int) {
			b.StopTimer()
			p := New(Config{Format: chatFormat})
			p.Parse(chatFormat, prevs[i])
			b.StartTimer()
			p.Parse(chatFormat, nexts[i])
		})
	})
	b.Run("repeat", func(b *testing.B) {
		p := New(Config{Format: chatFormat})
		run(b, func(i int) { p.Parse(chatFormat, nexts[i]) })
	})
}
