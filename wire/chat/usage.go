package chat

import (
	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// Usage is what the upstream reported about one completion; chat reads
// usage.prompt_tokens (or input_tokens, for servers speaking the Responses
// naming) into InputTokens.
type Usage = wire.Usage

// ReadUsage reads a "usage" object; a missing or null one gives Found=false.
// The chat names win over the Responses ones wherever each sits in the
// object. One pass over its members: the six lookups it replaced scanned
// the object once each, twice more for every name an answer lacks.
func ReadUsage(u gjson.Result) Usage {
	if !u.IsObject() {
		return Usage{}
	}
	// [0]: the chat name's member, [1]: the Responses name's.
	var in, out, cached [2]member
	u.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "prompt_tokens":
			in[0].keep(v)
		case "input_tokens":
			in[1].keep(v)
		case "completion_tokens":
			out[0].keep(v)
		case "output_tokens":
			out[1].keep(v)
		case "prompt_tokens_details":
			cached[0].keep(v.Get("cached_tokens"))
		case "input_tokens_details":
			cached[1].keep(v.Get("cached_tokens"))
		}
		return true
	})
	inTokens, ok := firstFound(in)
	if !ok {
		return Usage{}
	}
	outTokens, _ := firstFound(out)
	cachedTokens, _ := firstFound(cached)
	return Usage{InputTokens: int(inTokens.Int()), OutputTokens: int(outTokens.Int()), CachedTokens: int(cachedTokens.Int()), Found: true}
}

// member is what one name of the usage object gave. A name written twice
// keeps its first value, as gjson's Get reads it.
type member struct {
	v    gjson.Result
	seen bool
}

func (m *member) keep(v gjson.Result) {
	if !m.seen {
		m.v, m.seen = v, true
	}
}

// firstFound returns the first of ms whose value exists.
func firstFound(ms [2]member) (gjson.Result, bool) {
	for _, m := range ms {
		if m.v.Exists() {
			return m.v, true
		}
	}
	return gjson.Result{}, false
}

// UsageFromJSON reads usage from a whole (non-streamed) JSON answer, as
// plain bytes (the shell decodes a compressed body); not JSON gives
// Found=false.
func UsageFromJSON(body []byte) Usage {
	if !jsonvalid.Valid(body) {
		return Usage{}
	}
	return ReadUsage(gjson.GetBytes(body, "usage"))
}
