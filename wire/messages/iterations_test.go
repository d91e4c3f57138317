package messages

import (
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/wire"
)

// Iterations as Anthropic reports a server compaction (context_management
// compact_20260112): the compaction's own call, then the message sampled
// from the compacted context, which the top-level fields describe.
const (
	compactionIteration = `{"type":"compaction","input_tokens":15013,"output_tokens":812,"cache_read_input_tokens":0,"cache_creation_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0}}`
	messageIteration    = `{"type":"message","input_tokens":108,"output_tokens":40,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}`
	topLevel            = `"input_tokens":108,"output_tokens":40,"cache_read_input_tokens":0,"cache_creation_input_tokens":0`
)

// compacted is the usage of an answer whose request the server compacted
// (compactionIteration), its message as topLevel says.
var compacted = Usage{InputTokens: 108, OutputTokens: 40, Found: true,
	ServerCompacted: true, ServerCompaction: wire.Tokens{InputTokens: 15013, OutputTokens: 812}}

func TestUsageReadsIterations(t *testing.T) {
	plain := Usage{InputTokens: 108, OutputTokens: 40, Found: true}
	for _, tc := range []struct {
		rule string
		body string
		want Usage
	}{
		{"no iterations: no server compaction", `{"usage":{` + topLevel + `}}`, plain},
		{"iterations null", `{"usage":{` + topLevel + `,"iterations":null}}`, plain},
		{"iterations empty", `{"usage":{` + topLevel + `,"iterations":[]}}`, plain},
		{"only a message iteration: sampled, not compacted", `{"usage":{` + topLevel + `,"iterations":[` + messageIteration + `]}}`, plain},
		{"a compaction iteration is the server compaction, the message stays the top level",
			`{"usage":{` + topLevel + `,"iterations":[` + compactionIteration + `,` + messageIteration + `]}}`, compacted},
		{"its cache reads and writes are its input's parts",
			`{"usage":{` + topLevel + `,"iterations":[{"type":"compaction","input_tokens":13,"cache_read_input_tokens":15000,"cache_creation_input_tokens":200,"output_tokens":812},` + messageIteration + `]}}`,
			Usage{InputTokens: 108, OutputTokens: 40, Found: true, ServerCompacted: true,
				ServerCompaction: wire.Tokens{InputTokens: 15213, CachedTokens: 15000, CacheWriteTokens: 200, OutputTokens: 812}}},
		{"several compactions add up", `{"usage":{` + topLevel + `,"iterations":[` + compactionIteration + `,` + compactionIteration + `,` + messageIteration + `]}}`,
			Usage{InputTokens: 108, OutputTokens: 40, Found: true, ServerCompacted: true,
				ServerCompaction: wire.Tokens{InputTokens: 30026, OutputTokens: 1624}}},
		{"an unknown iteration type is not a compaction",
			`{"usage":{` + topLevel + `,"iterations":[{"type":"advisor_message","input_tokens":900,"output_tokens":50},` + messageIteration + `]}}`, plain},
		{"iterations not an array", `{"usage":{` + topLevel + `,"iterations":{"type":"compaction","input_tokens":5}}}`, plain},
	} {
		if got := UsageFromJSON([]byte(tc.body)); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.rule, got, tc.want)
		}
	}
}

func TestStreamWatchReadsIterations(t *testing.T) {
	start := "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":15013,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}` + "\n\n"
	delta := func(usage string) string {
		return "event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{` + usage + `}}` + "\n\n"
	}
	stop := "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	iterations := `,"iterations":[` + compactionIteration + `,` + messageIteration + `]`
	for _, tc := range []struct {
		rule   string
		stream string
		want   Usage
	}{
		{"iterations in message_delta: the server compacted, its cumulative fields win",
			start + delta(topLevel+iterations) + stop, compacted},
		{"none: no server compaction", start + delta(topLevel) + stop,
			Usage{InputTokens: 108, OutputTokens: 40, Found: true}},
		{"an empty array: none", start + delta(topLevel+`,"iterations":[]`) + stop,
			Usage{InputTokens: 108, OutputTokens: 40, Found: true}},
		{"only a message iteration: none", start + delta(topLevel+`,"iterations":[`+messageIteration+`]`) + stop,
			Usage{InputTokens: 108, OutputTokens: 40, Found: true}},
		{"a later delta without iterations keeps them, as the other fields",
			start + delta(topLevel+iterations) + delta(`"output_tokens":41`) + stop,
			Usage{InputTokens: 108, OutputTokens: 41, Found: true, ServerCompacted: true, ServerCompaction: compacted.ServerCompaction}},
		{"a later delta's iterations replace them (the last one wins)",
			start + delta(topLevel+iterations) + delta(topLevel+`,"iterations":[`+messageIteration+`]`) + stop,
			Usage{InputTokens: 108, OutputTokens: 40, Found: true}},
		{"unknown iteration types are not a compaction",
			start + delta(topLevel+`,"iterations":[{"type":"advisor_message","input_tokens":900,"output_tokens":50},`+messageIteration+`]`) + stop,
			Usage{InputTokens: 108, OutputTokens: 40, Found: true}},
	} {
		for cut := 0; cut <= len(tc.stream); cut += 7 {
			var w StreamWatch
			w.Observe([]byte(tc.stream[:cut]))
			w.Observe([]byte(tc.stream[cut:]))
			if w.Usage() != tc.want || !w.Completed() {
				t.Fatalf("%s, cut at %d: %+v completed %v, want %+v", tc.rule, cut, w.Usage(), w.Completed(), tc.want)
			}
		}
		var w StreamWatch
		w.Observe([]byte(strings.ReplaceAll(tc.stream, "\n", "\r\n")))
		if w.Usage() != tc.want {
			t.Errorf("%s, CRLF: %+v, want %+v", tc.rule, w.Usage(), tc.want)
		}
	}
}
