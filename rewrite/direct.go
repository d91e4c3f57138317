package rewrite

// CacheSeen is what an upstream has shown of its prompt cache on a
// conversation so far: Reads, it reported cached tokens (or cache writes:
// a provider that writes reads them back); Writes, it reported cache
// writes (Anthropic under cache_control, billed above the input price).
type CacheSeen struct{ Reads, Writes bool }

// DirectTurn is one request, as ctxpress forwarded it and as the client
// sent it, for DirectUsage.
type DirectTurn struct {
	// Forwarded is what the upstream reported for the request ctxpress
	// forwarded.
	Forwarded Usage
	// Sent and After are ctxpress's estimates of the request as the client
	// sent it and as it was forwarded (TokensBefore, TokensAfter), in the
	// upstream's tokens.
	Sent, After int
	// PrevSent is the direct size (DirectUsage's Input) of the previous
	// request of the same history; 0 for its first.
	PrevSent int
}

// DirectUsage estimates what a request would have used sent straight to
// the upstream, for "saved" to be net of cache effects: the client's own
// request, priced with the cache it would have had there.
//
// Its size is the forwarded request's reported one plus what ctxpress
// took out (Sent - After, negative when it added a summary), so an error
// of the estimate cancels out and a request ctxpress left alone costs
// the same both ways; under server history (previous_response_id) the
// reported size holds the history the provider keeps, the difference
// only the new part. The client is assumed sticky, resending its previous
// request as a prefix of the next (agents do): what the previous request
// sent is read from the cache, when the upstream caches at all
// (cache.Reads; a provider's minimum cacheable prompt is not modelled),
// and the rest written to it when the upstream bills writes
// (cache.Writes), else sent fresh. It reads at least what the forwarded
// request read (ctxpress takes out, it does not add to what the provider
// has seen), which covers a previous request it does not know (the first
// of a history it saw late, a record from before it kept them), and at
// most itself (an edited history shorter than its predecessor). The
// output is the forwarded request's: an answer's length does not depend
// on how its input was squashed.
func DirectUsage(turn DirectTurn, cache CacheSeen) Usage {
	u := Usage{Input: max(turn.Forwarded.Input+turn.Sent-turn.After, 0), Output: turn.Forwarded.Output}
	if cache.Reads {
		u.Cached = min(max(turn.PrevSent, turn.Forwarded.Cached, 0), u.Input)
	}
	if cache.Writes {
		u.CacheWrite = u.Input - u.Cached
	}
	return u
}
