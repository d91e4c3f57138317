package rewrite

import (
	"strconv"
	"testing"

	"github.com/tidwall/gjson"
)

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

// BenchmarkProxyNextTurn is a corpus trace's next turn as the proxy
// parses, identifies and rewrites it: its history, seen before, and one
// new message of its own (a user message that no turn sent before), as
// an agent's next request is; the pipeline has seen the turn before it.
// Run: go test -run '^$' -bench ProxyNextTurn ./rewrite/
func BenchmarkProxyNextTurn(b *testing.B) {
	traces := loadTraces(b)
	p := New(proxyConfig())
	header := peekHeaders("X-Session-ID", "corpus")
	var heads, tails [][]byte // each trace's body cut before the closing ] of its messages
	size := 0
	for _, tr := range traces {
		arr := gjson.GetBytes(tr.body, "messages")
		closing := arr.Index + len(arr.Raw) - 1
		heads, tails = append(heads, tr.body[:closing]), append(tails, tr.body[closing:])
		proxyTurn(b, p, header, tr.body)
		size += len(tr.body)
	}
	var buf []byte
	b.SetBytes(int64(size / len(traces)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		k := i % len(traces)
		buf = append(append(append(buf[:0], heads[k]...), `,{"role":"user","content":"next step `+strconv.Itoa(i)+`"}`...), tails[k]...)
		b.StartTimer()
		proxyTurn(b, p, header, buf)
	}
}
