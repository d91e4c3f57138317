package wire

import (
	"bytes"
	"sort"
	"unsafe"

	"github.com/ctxpress/ctxpress/internal/jsonstr"
	"github.com/tidwall/gjson"
)

// AppendJSONString appends s to dst as a JSON string. Quotes, backslashes
// and control characters are escaped, as are U+2028 and U+2029; invalid
// UTF-8 becomes U+FFFD. HTML characters are left as they are. The output is
// a function of s alone, so a squashed text always serialises to the same
// bytes.
func AppendJSONString(dst []byte, s string) []byte { return jsonstr.Append(dst, s, false) }

// AppendCanonical appends the canonical form of a JSON value: compact,
// object keys sorted (bytewise, after unescaping; duplicate keys keep their
// order), strings re-escaped by AppendJSONString, numbers and literals as
// written. Two values that differ only in whitespace, key order or string
// escaping have the same canonical form. v must come from valid JSON.
func AppendCanonical(dst []byte, v gjson.Result) []byte {
	return AppendCanonicalSkip(dst, v, "")
}

// AppendCanonicalSkip is AppendCanonical leaving out, at any depth, object
// members named skip ("" skips nothing).
func AppendCanonicalSkip(dst []byte, v gjson.Result, skip string) []byte {
	return appendCanonicalDepth(dst, v, skip, 0)
}

// maxCanonicalDepth bounds the recursion: each level re-scans the rest of
// its value (gjson finds an element's end by scanning it), so a hostile
// value nested millions deep would cost hours and overflow the stack.
// Deeper than this, a value is taken as written, after a byte no JSON
// starts with, so it cannot equal a canonical form. Real messages and
// arguments nest a handful of levels.
const maxCanonicalDepth = 32

func appendCanonicalDepth(dst []byte, v gjson.Result, skip string, depth int) []byte {
	if depth > maxCanonicalDepth && v.Type == gjson.JSON {
		return append(append(dst, 0), v.Raw...)
	}
	switch v.Type {
	case gjson.String:
		return AppendJSONString(dst, v.Str)
	case gjson.JSON:
		if v.IsArray() {
			dst = append(dst, '[')
			first := true
			v.ForEach(func(_, e gjson.Result) bool {
				if !first {
					dst = append(dst, ',')
				}
				first = false
				dst = appendCanonicalDepth(dst, e, skip, depth+1)
				return true
			})
			return append(dst, ']')
		}
		return AppendCanonicalMembers(dst, v, skip, func(dst []byte, _ string, e gjson.Result) []byte {
			return appendCanonicalDepth(dst, e, skip, depth+1)
		})
	default:
		// Numbers, true, false, null: the raw text, trimmed by gjson.
		return append(dst, v.Raw...)
	}
}

// AppendCanonicalMembers appends the object v with its members sorted by
// key (stably: a repeated key keeps its order) and skip ("" for none)
// left out, each member's value as value appends it: the canonical form
// of an object whose format reads some members its own way.
func AppendCanonicalMembers(dst []byte, v gjson.Result, skip string, value func(dst []byte, key string, v gjson.Result) []byte) []byte {
	type kv struct {
		k string
		v gjson.Result
	}
	var kvs []kv
	v.ForEach(func(k, e gjson.Result) bool {
		if skip == "" || k.Str != skip {
			kvs = append(kvs, kv{k.Str, e})
		}
		return true
	})
	sort.SliceStable(kvs, func(i, j int) bool { return kvs[i].k < kvs[j].k })
	dst = append(dst, '{')
	for i, e := range kvs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendJSONString(dst, e.k)
		dst = append(dst, ':')
		dst = value(dst, e.k, e.v)
	}
	return append(dst, '}')
}

// StringValue returns the decoded JSON string at s in b, and false when s
// is not a string. The common roles come back without an allocation.
func StringValue(b []byte, s Span) (string, bool) {
	if b[s.Start] != '"' {
		return "", false
	}
	raw := b[s.Start+1 : s.End-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		return gjson.Parse(string(b[s.Start:s.End])).Str, true
	}
	switch string(raw) {
	case "user":
		return "user", true
	case "assistant":
		return "assistant", true
	case "tool":
		return "tool", true
	case "system":
		return "system", true
	}
	return string(raw), true
}

// KeyIs reports whether the member key k (a JSON string span, quotes
// included) names name; an escaped key is decoded first, as gjson would.
func KeyIs(b []byte, k Span, name string) bool { return KeyName(b, k) == name }

// KeyName is the member key k (a JSON string span, quotes included) as a
// name, decoded as gjson would when escaped. An unescaped key is b's bytes
// viewed as a string, not copied: compare it, don't keep it.
func KeyName(b []byte, k Span) string {
	raw := b[k.Start+1 : k.End-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		return gjson.Parse(string(b[k.Start:k.End])).Str
	}
	return unsafe.String(unsafe.SliceData(raw), len(raw))
}
