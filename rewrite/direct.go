package rewrite

// CacheSeen is what an upstream has shown of its prompt cache on a
// conversation so far: Reads, it reported cached tokens (or cache writes:
// a provider that writes reads them back); Writes, it reported cache
// writes (Anthropic under cache_control, billed above the input price).
type CacheSeen struct{ Reads, Writes bool }

// DirectTurn is one request as the client sent it, for DirectUsage.
type DirectTurn struct {
	// Sent is the request's input tokens as the client wrote it (the
	// calibrated estimate, TokensBefore); PrevSent the same for the
	// previous request of its history (0: it is the first); After the
	// same for what ctxpress forwarded (TokensAfter).
	Sent, PrevSent, After int
	// Forwarded is what the upstream reported for the request ctxpress
	// forwarded instead: its output is taken as the direct one's (an
	// answer's length does not depend on how its input was squashed).
	Forwarded Usage
	// ServerHistory: the provider keeps the rest of the history
	// (previous_response_id), so Sent is only the new part and the
	// forwarded usage already holds the rest.
	ServerHistory bool
}

// DirectUsage estimates what turn would have used sent straight to the
// upstream, for "saved" to be net of cache effects: the client's request
// priced with the cache it would have had there. It assumes a sticky
// client, one that resends its previous request as a prefix of the next
// (agents do), so what the previous request sent is read from the cache,
// when the upstream caches at all (cache.Reads; a provider's minimum
// cacheable prompt is not modelled), and the rest is written to it when
// the upstream bills writes (cache.Writes), else sent fresh. A request
// shorter than its predecessor (an edited history) reads at most itself.
// Under server history, the forwarded usage plus what ctxpress removed
// from the new part, as fresh input.
func DirectUsage(turn DirectTurn, cache CacheSeen) Usage {
	f := turn.Forwarded
	if turn.ServerHistory {
		f.Input += max(turn.Sent-turn.After, 0)
		return f
	}
	u := Usage{Input: max(turn.Sent, 0), Output: f.Output}
	if cache.Reads {
		u.Cached = min(max(turn.PrevSent, 0), u.Input)
	}
	if cache.Writes {
		u.CacheWrite = u.Input - u.Cached
	}
	return u
}
