package proxy

import (
	"strings"
	"testing"
)

const streamWithUsage = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}\n\n" +
	": keep-alive comment\n\n" +
	"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\r\n\r\n" +
	"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":42,\"completion_tokens\":2,\"total_tokens\":44}}\n\n" +
	"data: [DONE]\n\n"

// The usage-only chunk is removed wherever the stream is split; every other
// byte arrives unchanged and in order.
func TestUsageChunkFilterAtEverySplit(t *testing.T) {
	usageEvent := "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":42,\"completion_tokens\":2,\"total_tokens\":44}}\n\n"
	want := strings.Replace(streamWithUsage, usageEvent, "", 1)
	for a := 0; a <= len(streamWithUsage); a++ {
		for _, b := range []int{a, (a + len(streamWithUsage)) / 2, len(streamWithUsage)} {
			if b < a {
				continue
			}
			var f usageChunkFilter
			var out []byte
			out = f.filter(out, []byte(streamWithUsage[:a]))
			out = f.filter(out, []byte(streamWithUsage[a:b]))
			out = f.filter(out, []byte(streamWithUsage[b:]))
			out = f.flush(out)
			if string(out) != want {
				t.Fatalf("split %d/%d:\n got %q\nwant %q", a, b, out, want)
			}
			if !f.stripped || f.usage.InputTokens != 42 {
				t.Fatalf("split %d/%d: usage %+v stripped %v", a, b, f.usage, f.stripped)
			}
		}
	}
}

// A final chunk that carries both content and usage is never dropped.
func TestUsageChunkFilterKeepsContentWithUsage(t *testing.T) {
	s := "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":9}}\n\n"
	var f usageChunkFilter
	if out := f.flush(f.filter(nil, []byte(s))); string(out) != s || f.usage.InputTokens != 9 || f.stripped {
		t.Fatalf("out %q usage %+v stripped %v", out, f.usage, f.stripped)
	}
}

// An event larger than the hold limit passes through whole.
func TestUsageChunkFilterHugeEvent(t *testing.T) {
	big := "data: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("y", maxHeldEvent+100) + "\"}}]}\n\n"
	s := big + "data: [DONE]\n\n"
	var f usageChunkFilter
	var out []byte
	for i := 0; i < len(s); i += 4096 {
		out = f.filter(out, []byte(s[i:min(i+4096, len(s))]))
	}
	out = f.flush(out)
	if string(out) != s {
		t.Fatalf("huge event changed: %d bytes, want %d", len(out), len(s))
	}
}
