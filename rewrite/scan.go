package rewrite

import "bytes"

// A small scanner over JSON that is already known to be valid (Rewrite
// validates once at the entry). It finds where values start and end without
// decoding them, so a turn does not unescape the megabytes of history it
// has seen before; gjson decodes only the values a step needs.

// span is the byte range [start, end) of a JSON value in the body; the zero
// span means absent.
type span struct{ start, end int }

// exists reports whether the value is present.
func (s span) exists() bool { return s.end > 0 }

// isJSONSpace reports whether c is JSON whitespace.
func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipSpace returns the index of the first non-whitespace byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && isJSONSpace(b[i]) {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string that opens at b[i].
func stringEnd(b []byte, i int) int {
	j := i + 1
	for {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			return len(b)
		}
		j += q
		// The quote closes the string unless an odd number of
		// backslashes precede it.
		n := 0
		for k := j - 1; k > i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
}

// valueEnd returns the index just past the JSON value that starts at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	default: // number, true, false, null
		j := i
		for j < len(b) && !isJSONSpace(b[j]) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
			j++
		}
		return j
	}
}

// walkArray calls fn with the start of each element of the array that opens
// at b[i]; fn returns the element's end (having read it, or with valueEnd),
// or -1 to stop. walkArray returns the index just past the array, so a
// caller that reads the elements scans each byte once. It returns -1 when
// stopped.
func walkArray(b []byte, i int, fn func(vs int) int) int {
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != ']' {
		e := fn(i)
		if e < 0 {
			return -1
		}
		if e <= i { // not JSON after all: stop rather than spin
			return len(b)
		}
		i = skipSpace(b, e)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return min(i+1, len(b))
}

// walkObject is walkArray for an object: fn gets each member's key (a span
// of the JSON string, quotes included) and the start of its value.
func walkObject(b []byte, i int, fn func(key span, vs int) int) int {
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] == '"' {
		ke := stringEnd(b, i)
		j := skipSpace(b, ke)
		if j >= len(b) || b[j] != ':' {
			return len(b)
		}
		vs := skipSpace(b, j+1)
		ve := fn(span{i, ke}, vs)
		if ve < 0 {
			return -1
		}
		if ve <= i {
			return len(b)
		}
		i = skipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return min(i+1, len(b))
}
