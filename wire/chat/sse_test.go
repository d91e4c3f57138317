package chat

import (
	"fmt"
	"github.com/ctxpress/ctxpress/wire/sse"
	"strings"
	"testing"
)

const streamWithUsage = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}\n\n" +
	": keep-alive comment\n\n" +
	"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\r\n\r\n" +
	"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":42,\"completion_tokens\":2,\"total_tokens\":44}}\n\n" +
	"data: [DONE]\n\n"

// streamWithUsageEOL is streamWithUsage with every line end made eol (its
// usage-only event apart), and that event.
func streamWithUsageEOL(eol string) (stream, usageEvent string) {
	usageEvent = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":42,\"completion_tokens\":2,\"total_tokens\":44}}\n\n"
	if eol == "mixed" {
		return streamWithUsage, usageEvent
	}
	lf := strings.ReplaceAll(streamWithUsage, "\r\n", "\n")
	return strings.ReplaceAll(lf, "\n", eol), strings.ReplaceAll(usageEvent, "\n", eol)
}

// The usage-only chunk is removed wherever the stream is split, whatever
// its line ends; every other byte arrives unchanged and in order.
func TestUsageChunkFilterAtEverySplit(t *testing.T) {
	for _, eol := range []string{"\n", "\r\n", "\r", "mixed"} {
		stream, usageEvent := streamWithUsageEOL(eol)
		want := strings.Replace(stream, usageEvent, "", 1)
		for a := 0; a <= len(stream); a++ {
			for _, b := range []int{a, a + 1, (a + len(stream)) / 2, len(stream)} {
				if b < a || b > len(stream) {
					continue
				}
				var f UsageChunkFilter
				var out []byte
				out = f.Filter(out, []byte(stream[:a]))
				out = f.Filter(out, []byte(stream[a:b]))
				out = f.Filter(out, []byte(stream[b:]))
				out = f.Flush(out)
				if string(out) != want {
					t.Fatalf("eol %q, split %d/%d:\n got %q\nwant %q", eol, a, b, out, want)
				}
				if !f.stripped || f.usage.InputTokens != 42 {
					t.Fatalf("eol %q, split %d/%d: usage %+v stripped %v", eol, a, b, f.usage, f.stripped)
				}
			}
		}
	}
}

// Each event leaves the filter in the read that completes it, whatever its
// line ends: a stream of lone-CR lines is not held back until its end.
func TestUsageChunkFilterPassesEachEventAsItArrives(t *testing.T) {
	for _, eol := range []string{"\n", "\r\n", "\r"} {
		var f UsageChunkFilter
		for i := range 3 {
			ev := fmt.Sprintf("data: {\"choices\":[{\"delta\":{\"content\":\"%d\"}}]}%s%s", i, eol, eol)
			if out := f.Filter(nil, []byte(ev)); string(out) != ev {
				t.Fatalf("eol %q, event %d: the filter let through %q", eol, i, out)
			}
		}
	}
}

// A final chunk that carries both content and usage is never dropped.
func TestUsageChunkFilterKeepsContentWithUsage(t *testing.T) {
	s := "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":9}}\n\n"
	var f UsageChunkFilter
	if out := f.Flush(f.Filter(nil, []byte(s))); string(out) != s || f.usage.InputTokens != 9 || f.stripped {
		t.Fatalf("out %q usage %+v stripped %v", out, f.usage, f.stripped)
	}
}

// An event larger than the hold limit passes through whole.
func TestUsageChunkFilterHugeEvent(t *testing.T) {
	big := "data: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("y", maxHeldEvent+100) + "\"}}]}\n\n"
	s := big + "data: [DONE]\n\n"
	var f UsageChunkFilter
	var out []byte
	for i := 0; i < len(s); i += 4096 {
		out = f.Filter(out, []byte(s[i:min(i+4096, len(s))]))
	}
	out = f.Flush(out)
	if string(out) != s {
		t.Fatalf("huge event changed: %d bytes, want %d", len(out), len(s))
	}
}

// sseBenchStream is 2000 content chunks and the usage chunk, with lines
// ended by eol.
func sseBenchStream(eol string) []byte {
	var b strings.Builder
	for range 2000 {
		b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1715367049,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]}` + eol + eol)
	}
	b.WriteString(`data: {"choices":[],"usage":{"prompt_tokens":42}}` + eol + eol + "data: [DONE]" + eol + eol)
	return []byte(b.String())
}

// benchmarkReads feeds the stream to feed in 4 KiB reads.
func benchmarkReads(b *testing.B, feed func(p []byte), reset func()) {
	for _, eol := range []string{"\n", "\r"} {
		s := sseBenchStream(eol)
		b.Run(fmt.Sprintf("eol=%q", eol), func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			b.ReportAllocs()
			for b.Loop() {
				reset()
				for i := 0; i < len(s); i += 4 << 10 {
					feed(s[i:min(i+4<<10, len(s))])
				}
			}
		})
	}
}

func BenchmarkUsageChunkFilter(b *testing.B) {
	var f UsageChunkFilter
	var out []byte
	benchmarkReads(b, func(p []byte) { out = f.Filter(out[:0], p) }, func() { f = UsageChunkFilter{} })
}

func BenchmarkSSEUsage(b *testing.B) {
	var s SSEUsage
	benchmarkReads(b, s.Observe, func() { s = SSEUsage{} })
}

// Usage chunks split anywhere across reads are still found, whatever the
// stream's line ends.
func TestSSEUsageAcrossSplits(t *testing.T) {
	mixed := "data: {\"choices\":[{\"delta\":{\"content\":\"usage\"}}],\"usage\":null}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":77,\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":64}}}\r\n\r\n" +
		"data: [DONE]\n\n"
	lf := strings.ReplaceAll(mixed, "\r\n", "\n")
	for _, stream := range []string{mixed, strings.ReplaceAll(lf, "\n", "\r"), strings.ReplaceAll(lf, "\n", "\r\n")} {
		for cut := 0; cut <= len(stream); cut++ {
			var s SSEUsage
			s.Observe([]byte(stream[:cut]))
			s.Observe([]byte(stream[cut:]))
			if !s.usage.Found || s.usage.InputTokens != 77 || s.usage.OutputTokens != 3 || s.usage.CachedTokens != 64 {
				t.Fatalf("%q cut at %d: usage = %+v", stream[:12], cut, s.usage)
			}
		}
	}
	var s SSEUsage
	s.Observe([]byte("data: " + strings.Repeat("x", sse.MaxLine+10)))
	s.Observe([]byte("\ndata: {\"usage\":{\"input_tokens\":5}}\n"))
	if s.usage.InputTokens != 5 {
		t.Fatalf("after an over-long line: %+v", s.usage)
	}
}
