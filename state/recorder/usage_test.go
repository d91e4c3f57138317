package recorder

import (
	"testing"

	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
)

// A call is billed what its answer, the upstream's own compaction and
// ctxpress's hidden rounds used, as one call.
func TestCallUsageBillsEveryPart(t *testing.T) {
	for _, tc := range []struct {
		name string
		u    wire.Usage
		want state.Usage
	}{
		{"no usage reported", wire.Usage{Hidden: wire.Tokens{InputTokens: 9}}, state.Usage{Unreported: 1}},
		{"the answer alone", wire.Usage{InputTokens: 100, OutputTokens: 7, CachedTokens: 60, Found: true},
			state.Usage{Calls: 1, Input: 100, Output: 7, Cached: 60}},
		{"hidden rounds on top", wire.Usage{InputTokens: 100, OutputTokens: 7, CachedTokens: 60, Found: true,
			Hidden: wire.Tokens{InputTokens: 250, OutputTokens: 12, CachedTokens: 100, CacheWriteTokens: 3}},
			state.Usage{Calls: 1, Input: 350, Output: 19, Cached: 160, CacheWrite: 3}},
		{"server compaction and hidden rounds", wire.Usage{InputTokens: 10, OutputTokens: 1, Found: true, ServerCompacted: true,
			ServerCompaction: wire.Tokens{InputTokens: 1000, OutputTokens: 50}, Hidden: wire.Tokens{InputTokens: 20, OutputTokens: 2}},
			state.Usage{Calls: 1, Input: 1030, Output: 53}},
	} {
		if got := CallUsage(tc.u); got != tc.want {
			t.Errorf("%s: CallUsage = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
