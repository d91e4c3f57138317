package recorder

import (
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
)

// CallUsage is one answered call's usage as a record sums it: counted,
// or counted as unreported. It is what the call was billed: its answer's
// usage and the upstream's own compaction of the request, if any.
func CallUsage(u wire.Usage) state.Usage {
	if !u.Found {
		return state.Usage{Unreported: 1}
	}
	billed := AnswerUsage(u).Plus(ServerCompactionUsage(u)).Plus(hiddenUsage(u))
	billed.Calls = 1 // one call, however many iterations or hidden rounds
	return billed
}

// hiddenUsage is the part of CallUsage(u) ctxpress's own hidden rounds
// used (wire.Usage.Hidden).
func hiddenUsage(u wire.Usage) state.Usage {
	h := u.Hidden
	return state.Usage{Input: int64(h.InputTokens), Cached: int64(h.CachedTokens),
		CacheWrite: int64(h.CacheWriteTokens), Output: int64(h.OutputTokens)}
}

// AnswerUsage is a call's usage without the upstream's own compaction of
// the request: what its answer's top-level usage counts.
func AnswerUsage(u wire.Usage) state.Usage {
	return state.Usage{Calls: 1, Input: int64(u.InputTokens), Cached: int64(u.CachedTokens),
		CacheWrite: int64(u.CacheWriteTokens), Output: int64(u.OutputTokens)}
}

// ServerCompactionUsage is the part of CallUsage(u) the upstream's own
// compaction of the request used, as a record sums it: one call when it
// compacted, else nothing.
func ServerCompactionUsage(u wire.Usage) state.Usage {
	if !u.Found || !u.ServerCompacted {
		return state.Usage{}
	}
	c := u.ServerCompaction
	return state.Usage{Calls: 1, Input: int64(c.InputTokens), Cached: int64(c.CachedTokens),
		CacheWrite: int64(c.CacheWriteTokens), Output: int64(c.OutputTokens)}
}
