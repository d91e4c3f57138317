package turn

import (
	"testing"

	"github.com/ctxpress/ctxpress/wire"
)

// A turn with hidden rounds reports the request as forwarded (the first
// answer's input, which calibrates), the answer the client got (its
// output), and every other part of the exchange in Hidden, so that
// nothing is billed twice or left out.
func TestExpandingBillsEveryRound(t *testing.T) {
	first := wire.Usage{InputTokens: 1000, CachedTokens: 900, OutputTokens: 30, Found: true}
	second := wire.Usage{InputTokens: 1500, CachedTokens: 1000, CacheWriteTokens: 20, OutputTokens: 25, Found: true}
	final := wire.Usage{InputTokens: 2100, CachedTokens: 1500, OutputTokens: 80, Found: true}
	for _, tc := range []struct {
		name    string
		answers []wire.Usage // the answers that called the tool, in order
		want    wire.Usage
	}{
		{"no hidden round: the answer's usage as it came", nil, final},
		{"one hidden round", []wire.Usage{first},
			wire.Usage{InputTokens: 1000, CachedTokens: 900, OutputTokens: 80, Found: true,
				Hidden: wire.Tokens{InputTokens: 2100, CachedTokens: 1500, OutputTokens: 30}}},
		{"two hidden rounds", []wire.Usage{first, second},
			wire.Usage{InputTokens: 1000, CachedTokens: 900, OutputTokens: 80, Found: true,
				Hidden: wire.Tokens{InputTokens: 3600, CachedTokens: 2500, CacheWriteTokens: 20, OutputTokens: 55}}},
	} {
		var x expanding
		for _, u := range tc.answers {
			x.spent(u)
			x.rounds++
		}
		got := x.billed(final)
		if got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
		all := []wire.Usage{final}
		all = append(all, tc.answers...)
		var in, out int
		for _, u := range all {
			in, out = in+u.InputTokens, out+u.OutputTokens
		}
		if got.InputTokens+got.Hidden.InputTokens != in || got.OutputTokens+got.Hidden.OutputTokens != out {
			t.Errorf("%s: %d input and %d output tokens reported, the rounds used %d and %d", tc.name,
				got.InputTokens+got.Hidden.InputTokens, got.OutputTokens+got.Hidden.OutputTokens, in, out)
		}
	}
}
