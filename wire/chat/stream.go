package chat

import (
	"bytes"
	"strings"

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

// StreamAsks reports what a chat body asks of its answer: a stream
// (`"stream": true`), and the usage chunk in it
// (`stream_options.include_usage: true` as well). It expects the body the
// proxy forwards: well-formed JSON, or a body forwarded as sent, where the
// answer means nothing but is safe.
func StreamAsks(body []byte) (stream, usage bool) {
	if gjson.GetBytes(body, "stream").Type != gjson.True {
		return false, false
	}
	return true, gjson.GetBytes(body, "stream_options.include_usage").Type == gjson.True
}

// StreamOptionsRefused reports whether an upstream's answer refuses a request
// because of its stream_options field, as strict servers answer a field
// they do not know: a 400 or 422 whose error names the field, as a
// validation error's location (pydantic's extra_forbidden,
// `"loc":["body","stream_options"]`), in an error message (`Unrecognized
// request argument supplied: stream_options`), or in a plain-text body
// (serde's "unknown field `stream_options`"). A mention elsewhere, such as
// the echoed input of another field's error, is no refusal.
func StreamOptionsRefused(status int, body []byte) bool {
	const field = "stream_options"
	if (status != 400 && status != 422) || !bytes.Contains(body, []byte(field)) {
		return false
	}
	if !jsonvalid.Valid(body) {
		return true
	}
	root := gjson.ParseBytes(body)
	named := false
	root.Get("detail").ForEach(func(_, d gjson.Result) bool {
		d.Get("loc").ForEach(func(_, loc gjson.Result) bool {
			named = loc.Type == gjson.String && loc.Str == field
			return !named
		})
		return !named
	})
	if named {
		return true
	}
	for _, path := range []string{"error.message", "error.param", "error", "message", "detail"} {
		if v := root.Get(path); v.Type == gjson.String && strings.Contains(v.Str, field) {
			return true
		}
	}
	return false
}

// clone returns a copy of b, so that sjson can never write into the
// caller's buffer.
func clone(b []byte) []byte {
	return append([]byte(nil), b...)
}
