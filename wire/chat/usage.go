package chat

import (
	"unsafe"

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
// object. One pass over its members, read in place: only the counts kept
// are decoded.
func ReadUsage(u gjson.Result) Usage {
	if !u.IsObject() {
		return Usage{}
	}
	return readUsage(unsafe.Slice(unsafe.StringData(u.Raw), len(u.Raw)))
}

// readUsage is ReadUsage of the object b (read-only).
func readUsage(b []byte) Usage {
	// [0]: the chat name's member, [1]: the Responses name's.
	var in, out, cached [2]member
	wire.WalkObject(b, 0, func(k wire.Span, vs int) int {
		ve := wire.ValueEnd(b, vs)
		v := wire.Span{Start: vs, End: ve}
		switch wire.KeyName(b, k) {
		case "prompt_tokens":
			in[0].keep(v)
		case "input_tokens":
			in[1].keep(v)
		case "completion_tokens":
			out[0].keep(v)
		case "output_tokens":
			out[1].keep(v)
		case "prompt_tokens_details":
			cached[0].keep(cachedTokens(b, v))
		case "input_tokens_details":
			cached[1].keep(cachedTokens(b, v))
		}
		return ve
	})
	inTokens, ok := firstFound(in)
	if !ok {
		return Usage{}
	}
	outTokens, _ := firstFound(out)
	cachedTokens, _ := firstFound(cached)
	return Usage{InputTokens: intValue(b, inTokens), OutputTokens: intValue(b, outTokens), CachedTokens: intValue(b, cachedTokens), Found: true}
}

// cachedTokens is the span of the first "cached_tokens" member of the
// details object at v of b; absent when v is no object or lacks one.
func cachedTokens(b []byte, v wire.Span) wire.Span {
	if b[v.Start] != '{' {
		return wire.Span{}
	}
	var s wire.Span
	wire.WalkObject(b, v.Start, func(k wire.Span, vs int) int {
		ve := wire.ValueEnd(b, vs)
		if wire.KeyName(b, k) == "cached_tokens" {
			s = wire.Span{Start: vs, End: ve}
			return -1
		}
		return ve
	})
	return s
}

// intValue is the count at s of b as gjson's Int reads it (0 when absent):
// plain digits directly, anything else (a string, a fraction, an exponent,
// null) through gjson.
func intValue(b []byte, s wire.Span) int {
	raw := b[s.Start:s.End]
	if n, ok := digits(raw); ok {
		return n
	}
	return int(gjson.Parse(unsafe.String(unsafe.SliceData(raw), len(raw))).Int())
}

// digits is raw as a count when it is 1 to 15 ASCII digits (exact in the
// float64 gjson reads a number as).
func digits(raw []byte) (int, bool) {
	if len(raw) == 0 || len(raw) > 15 {
		return 0, false
	}
	n := 0
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// member is what one name of the usage object gave. A name written twice
// keeps its first value, as gjson's Get reads it.
type member struct {
	v    wire.Span
	seen bool
}

func (m *member) keep(v wire.Span) {
	if !m.seen {
		m.v, m.seen = v, true
	}
}

// firstFound returns the first of ms whose value exists.
func firstFound(ms [2]member) (wire.Span, bool) {
	for _, m := range ms {
		if m.v.Exists() {
			return m.v, true
		}
	}
	return wire.Span{}, false
}

// UsageFromJSON reads usage from a whole (non-streamed) JSON answer, as
// plain bytes (the shell decodes a compressed body); not JSON gives
// Found=false. Once validated, the answer's top level is walked to its
// first "usage" member, read in place: no copy of the answer.
func UsageFromJSON(body []byte) Usage {
	if !jsonvalid.Valid(body) {
		return Usage{}
	}
	i := wire.SkipSpace(body, 0)
	if body[i] != '{' {
		return Usage{}
	}
	var u wire.Span
	wire.WalkObject(body, i, func(k wire.Span, vs int) int {
		ve := wire.ValueEnd(body, vs)
		if wire.KeyName(body, k) == "usage" {
			u = wire.Span{Start: vs, End: ve}
			return -1
		}
		return ve
	})
	if !u.Exists() || body[u.Start] != '{' {
		return Usage{}
	}
	return readUsage(u.Of(body))
}
