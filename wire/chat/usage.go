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
func ReadUsage(u gjson.Result) Usage {
	if !u.IsObject() {
		return Usage{}
	}
	in := u.Get("prompt_tokens")
	if !in.Exists() {
		in = u.Get("input_tokens")
	}
	if !in.Exists() {
		return Usage{}
	}
	out := u.Get("completion_tokens")
	if !out.Exists() {
		out = u.Get("output_tokens")
	}
	cached := u.Get("prompt_tokens_details.cached_tokens")
	if !cached.Exists() {
		cached = u.Get("input_tokens_details.cached_tokens")
	}
	return Usage{InputTokens: int(in.Int()), OutputTokens: int(out.Int()), CachedTokens: int(cached.Int()), Found: true}
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
