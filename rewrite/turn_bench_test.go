package rewrite

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/squash"
)

// proxyConfig is the pipeline the proxy runs with its defaults: squash,
// dedup and prune on, the default conversation headers.
func proxyConfig() Config {
	return Config{Format: chatFormat, Squash: &squash.Config{}, Dedup: DefaultDedupConfig(), Prune: PruneConfig{Enabled: true}}
}

// peekHeaders is a request's headers looked up as fasthttp's Peek does:
// case-insensitively, nil when absent.
func peekHeaders(kv ...string) func(string) []byte {
	return func(name string) []byte {
		for i := 0; i+1 < len(kv); i += 2 {
			if strings.EqualFold(kv[i], name) {
				return []byte(kv[i+1])
			}
		}
		return nil
	}
}

// proxyTurn is what the proxy does with a chat request in rewrite: parse
// it once (continuing a remembered parse), identify it, rewrite it.
func proxyTurn(b *testing.B, p *Pipeline, header func(string) []byte, body []byte) {
	parsed := p.Parse(chatFormat, body)
	if id := p.IdentifyParsed(header, parsed); id.ID == "" {
		b.Fatal("not identified")
	}
	if res := p.RewriteParsed(parsed, Options{ForceCommand: true}); !res.Understood {
		b.Fatal("not understood")
	}
}

// BenchmarkProxyTurnSmall: the chat request of deploy/bench-passthrough.sh
// (a system message and a ~1 KB user message, X-Session-ID over 64
// conversations), as the proxy parses, identifies and rewrites it. Each
// iteration sends a body of its own (a copy), as the proxy's requests are.
func BenchmarkProxyTurnSmall(b *testing.B) {
	unit := "The build fails in pkg/server with undefined: handler. "
	text := strings.Repeat(unit, (1024-110)/len(unit))
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"system","content":"You are a coding agent."},{"role":"user","content":"` + text + `"}]}`)
	p := New(proxyConfig())
	headers := make([]func(string) []byte, 64)
	for i := range headers {
		headers[i] = peekHeaders("Content-Type", "application/json", "Authorization", "Bearer sk-bench", "X-Session-ID", "bench-"+strconv.Itoa(i))
	}
	buf := make([]byte, len(body))
	proxyTurn(b, p, headers[0], append(buf[:0], body...))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		proxyTurn(b, p, headers[i%len(headers)], append(buf[:0], body...))
	}
}

// BenchmarkProxyTurnCorpus: every corpus trace as the proxy parses,
// identifies and rewrites it on a warm turn: the pipeline has seen each
// history before, so every message's facts are cached and what is left is
// the per-request work over a real history's length.
func BenchmarkProxyTurnCorpus(b *testing.B) {
	traces := loadTraces(b)
	p := New(proxyConfig())
	header := peekHeaders("X-Session-ID", "corpus")
	size := 0
	for _, tr := range traces {
		proxyTurn(b, p, header, tr.body)
		size += len(tr.body)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, tr := range traces {
			proxyTurn(b, p, header, tr.body)
		}
	}
}

// The proxy reuses a request's buffer for the next request (fasthttp), so
// what the pipeline keeps past a request (its cache: facts, calls, counts,
// squash results, digests) must hold copies, never slices of the body: a
// warm turn after the buffer was overwritten forwards what the first one
// did.
func TestReusedRequestBufferDoesNotChangeWarmTurns(t *testing.T) {
	traces := loadTraces(t)
	if len(traces) > 12 {
		traces = traces[:12]
	}
	p := New(proxyConfig())
	header := peekHeaders("X-Session-ID", "reuse")
	for _, tr := range traces {
		buf := append([]byte(nil), tr.body...)
		parsed := p.Parse(chatFormat, buf)
		p.IdentifyParsed(header, parsed)
		first := p.RewriteParsed(parsed, Options{ForceCommand: true})
		want := append([]byte(nil), first.Body...)
		for i := range buf {
			buf[i] = 'x' // the next request's bytes
		}
		// The same body again finds the parse (and its analysis) remembered.
		again := p.RewriteParsed(p.Parse(chatFormat, append([]byte(nil), tr.body...)), Options{ForceCommand: true})
		if string(again.Body) != string(want) || again.TokensBefore != first.TokensBefore || again.TokensAfter != first.TokensAfter {
			t.Errorf("%s: the warm turn after the buffer was reused forwards other bytes or counts (%d/%d tokens, was %d/%d)",
				tr.name, again.TokensBefore, again.TokensAfter, first.TokensBefore, first.TokensAfter)
		}
	}
}
