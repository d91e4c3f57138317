package wire

import "bytes"

// A small scanner over JSON that is already known to be valid (the core
// validates once at the entry). It finds where values start and end without
// decoding them, so a turn does not unescape the megabytes of history it
// has seen before; gjson decodes only the values a step needs. Every
// adapter parses with it.

// Span is the byte range [Start, End) of a JSON value in a body; the zero
// Span means absent.
type Span struct{ Start, End int }

// Exists reports whether the value is present.
func (s Span) Exists() bool { return s.End > 0 }

// Of returns the bytes of s in body.
func (s Span) Of(body []byte) []byte { return body[s.Start:s.End] }

// IsSpace reports whether c is JSON whitespace.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the index of the first non-whitespace byte at or after i.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	return i
}

// StringEnd returns the index just past the JSON string that opens at b[i].
func StringEnd(b []byte, i int) int {
	j := i + 1
	// Most strings are short (keys, roles, ids, counts' names): a plain
	// loop ends them before a call to IndexByte would have started.
	for lim := min(len(b), j+shortString); j < lim; j++ {
		switch b[j] {
		case '"':
			return j + 1
		case '\\':
			j++ // the escaped byte, a quote too
		}
	}
	if j >= len(b) {
		return len(b)
	}
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

// shortString is how many bytes of a string StringEnd reads one by one
// before it looks for the closing quote with IndexByte.
const shortString = 24

// ValueEnd returns the index just past the JSON value that starts at b[i].
func ValueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return StringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = StringEnd(b, j) - 1
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
		for j < len(b) && !IsSpace(b[j]) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
			j++
		}
		return j
	}
}

// WalkArray calls fn with the start of each element of the array that opens
// at b[i]; fn returns the element's end (having read it, or with ValueEnd),
// or -1 to stop. WalkArray returns the index just past the array, so a
// caller that reads the elements scans each byte once. It returns -1 when
// stopped.
func WalkArray(b []byte, i int, fn func(vs int) int) int {
	return walkElements(b, SkipSpace(b, i+1), fn)
}

// WalkArrayAfter is WalkArray resumed just past an element that ends at
// b[e]: fn gets the elements after it.
func WalkArrayAfter(b []byte, e int, fn func(vs int) int) int {
	return walkElements(b, afterValue(b, e), fn)
}

// walkElements is WalkArray from i, the start of an element or the
// array's end.
func walkElements(b []byte, i int, fn func(vs int) int) int {
	for i < len(b) && b[i] != ']' {
		e := fn(i)
		if e < 0 {
			return -1
		}
		if e <= i { // not JSON after all: stop rather than spin
			return len(b)
		}
		i = afterValue(b, e)
	}
	return min(i+1, len(b))
}

// afterValue is where a container's next element or member starts after
// a value that ends at b[e] (its closer, when none follows).
func afterValue(b []byte, e int) int {
	i := SkipSpace(b, e)
	if i < len(b) && b[i] == ',' {
		i = SkipSpace(b, i+1)
	}
	return i
}

// WalkObject is WalkArray for an object: fn gets each member's key (a span
// of the JSON string, quotes included) and the start of its value.
func WalkObject(b []byte, i int, fn func(key Span, vs int) int) int {
	return walkMembers(b, SkipSpace(b, i+1), fn)
}

// WalkObjectAfter is WalkObject resumed just past a member whose value
// ends at b[e]: fn gets the members after it.
func WalkObjectAfter(b []byte, e int, fn func(key Span, vs int) int) int {
	return walkMembers(b, afterValue(b, e), fn)
}

// walkMembers is WalkObject from i, the start of a member's key or the
// object's end.
func walkMembers(b []byte, i int, fn func(key Span, vs int) int) int {
	for i < len(b) && b[i] == '"' {
		ke := StringEnd(b, i)
		j := SkipSpace(b, ke)
		if j >= len(b) || b[j] != ':' {
			return len(b)
		}
		vs := SkipSpace(b, j+1)
		ve := fn(Span{i, ke}, vs)
		if ve < 0 {
			return -1
		}
		if ve <= i {
			return len(b)
		}
		i = afterValue(b, ve)
	}
	return min(i+1, len(b))
}
