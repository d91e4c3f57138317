package compaction

import "testing"

// The form of a summary call, as rules: the conversation itself only to
// the conversation's own upstream, format and model, for a history the
// body holds whole, that fits the window with the instruction and the
// answer.
func TestContinuesHistory(t *testing.T) {
	own := historyFacts{OwnUpstream: true, SameAPI: true, SameModel: true, Window: 128000, Tokens: 90000, Answer: 4000}
	rows := []struct {
		name string
		edit func(*historyFacts)
		want bool
	}{
		{"the conversation's own upstream and model, fitting: the history", func(*historyFacts) {}, true},
		{"another summariser base_url: a transcript", func(f *historyFacts) { f.OwnUpstream = false }, false},
		{"another API at the same base_url: a transcript", func(f *historyFacts) { f.SameAPI = false }, false},
		{"another summary model: a transcript", func(f *historyFacts) { f.SameModel = false }, false},
		{"history kept by the provider (previous_response_id): a transcript", func(f *historyFacts) { f.ServerHistory = true }, false},
		{"a request the upstream refused as too long: a transcript", func(f *historyFacts) { f.Refused = true }, false},
		{"a forwarded body that left messages out to fit: a transcript", func(f *historyFacts) { f.LeftOut = true }, false},
		{"history, instruction and answer just within the window: the history", func(f *historyFacts) { f.Tokens = f.Window - f.Answer - historyReserve }, true},
		{"history, instruction and answer over the window: a transcript", func(f *historyFacts) { f.Tokens = f.Window - f.Answer - historyReserve + 1 }, false},
		{"a reasoning model's headroom over the window: a transcript", func(f *historyFacts) { f.Answer = 4000 + 16384; f.Tokens = 110000 }, false},
	}
	for _, r := range rows {
		f := own
		r.edit(&f)
		if got := continuesHistory(f); got != r.want {
			t.Errorf("%s: %v, want %v", r.name, got, r.want)
		}
	}
}
