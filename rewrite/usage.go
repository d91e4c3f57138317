package rewrite

import (
	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// EnsureStreamUsage asks the upstream to report usage on a streamed
// request: for `"stream": true` without `stream_options.include_usage: true`
// it sets `stream_options.include_usage` to true, keeping the other
// stream_options fields (and their order), and reports true. The proxy then
// strips the extra usage-only chunk, so the client sees what it asked for.
// Any other body (not streamed, already asking for usage, not valid JSON,
// stream_options that is not an object or null) is returned unchanged.
// body is not modified.
func EnsureStreamUsage(body []byte) (out []byte, injected bool) {
	if !jsonvalid.Valid(body) {
		return body, false
	}
	if gjson.GetBytes(body, "stream").Type != gjson.True {
		return body, false
	}
	opts := gjson.GetBytes(body, "stream_options")
	switch {
	case !opts.Exists(), opts.Type == gjson.Null:
		// Replaced (null) or appended as the last key.
		out, err := sjson.SetRawBytes(clone(body), "stream_options", []byte(`{"include_usage":true}`))
		if err != nil {
			return body, false
		}
		return out, true
	case !opts.IsObject():
		return body, false
	}
	if opts.Get("include_usage").Type == gjson.True {
		return body, false
	}
	out, err := sjson.SetBytes(clone(body), "stream_options.include_usage", true)
	if err != nil {
		return body, false
	}
	return out, true
}

// clone returns a copy of b, so that sjson can never write into the
// caller's buffer.
func clone(b []byte) []byte {
	return append([]byte(nil), b...)
}
