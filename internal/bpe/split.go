package bpe

import (
	"unicode"
	"unicode/utf8"
)

// The pre-tokenisers below are tiktoken's published patterns (see
// regexp_test.go, which keeps them as the reference) written out by hand:
// a backtracking regexp engine costs ~10x the byte-pair merging it feeds.
// Each split function returns the end of the piece that starts at i, the
// match regexp2 would find there; the comments name the alternative each
// branch is and why it ends where it does. They assume valid UTF-8 (Count
// makes it so, as tiktoken-go's []rune conversion does).

// Character classes, as bits: each rune gets the set of pattern classes it
// belongs to. Go's general categories are disjoint, and no white space is a
// letter, number or mark, so the bits never contradict.
const (
	cUpper   = 1 << iota // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], o200k's first class
	cLower               // [\p{Ll}\p{Lm}\p{Lo}\p{M}], o200k's second class
	cLetter              // \p{L}
	cNumber              // \p{N}
	cSpace               // \s: unicode.IsSpace, as regexp2 tests it
	cNewline             // \r or \n
)

// notPrefix marks what [^\r\n\p{L}\p{N}] excludes; notPunct what
// [^\s\p{L}\p{N}] excludes.
const (
	notPrefix = cNewline | cLetter | cNumber
	notPunct  = cSpace | cLetter | cNumber
)

// multiByte, in byteClass, marks a byte that starts (or breaks) a
// multi-byte rune: its class comes from decoding it.
const multiByte = 0xff

// classOf is the slow, exact classification; byteClass caches it for the
// bytes below 0x80, so the two agree by construction.
func classOf(r rune) uint8 {
	var c uint8
	switch {
	case unicode.Is(unicode.Ll, r):
		c = cLetter | cLower
	case unicode.Is(unicode.Lu, r), unicode.Is(unicode.Lt, r):
		c = cLetter | cUpper
	case unicode.Is(unicode.Lm, r), unicode.Is(unicode.Lo, r):
		c = cLetter | cUpper | cLower
	case unicode.Is(unicode.M, r):
		c = cUpper | cLower
	case unicode.Is(unicode.N, r):
		c = cNumber
	case unicode.IsSpace(r):
		c = cSpace
	}
	if r == '\r' || r == '\n' {
		c |= cNewline
	}
	return c
}

var byteClass = func() (t [256]uint8) {
	for b := range t {
		t[b] = multiByte
		if b < utf8.RuneSelf {
			t[b] = classOf(rune(b))
		}
	}
	return t
}()

// at returns the classes of the rune at s[i] and its length in bytes. It
// is small enough to inline; atRune is the rest.
func at(s string, i int) (c uint8, n int) {
	if c = byteClass[s[i]]; c != multiByte {
		return c, 1
	}
	return atRune(s, i)
}

func atRune(s string, i int) (uint8, int) {
	r, n := utf8.DecodeRuneInString(s[i:])
	return classOf(r), n
}

// run returns the end of the run of runes from i that have one of the
// classes in want.
func run(s string, i int, want uint8) int {
	for i < len(s) {
		c, n := byteClass[s[i]], 1 // at, inlined by hand: the hot loop
		if c == multiByte {
			c, n = atRune(s, i)
		}
		if c&want == 0 {
			break
		}
		i += n
	}
	return i
}

// splitO200K is o200k_base's pattern:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitO200K(s string, i int) int {
	c, n := at(s, i)
	prefixed := c&notPrefix == 0 && i+n < len(s)
	// First alternative, with the optional prefix taken, then not.
	if prefixed {
		if e := upperThenLower(s, i+n); e >= 0 {
			return contraction(s, e)
		}
	}
	if e := upperThenLower(s, i); e >= 0 {
		return contraction(s, e)
	}
	// Second alternative: at least one "upper", then any "lower".
	if prefixed {
		if c2, _ := at(s, i+n); c2&cUpper != 0 {
			return contraction(s, run(s, run(s, i+n, cUpper), cLower))
		}
	}
	if c&cUpper != 0 {
		return contraction(s, run(s, run(s, i, cUpper), cLower))
	}
	return splitRest(s, i, c, n, true)
}

// upperThenLower matches [upper]*[lower]+ at i, as a backtracking engine
// does: the "upper" run greedily, then at least one "lower"; when the rune
// after the run is no "lower", the run gives runes back until the last
// "lower" inside it (Lm, Lo and M are both) can be the one. It returns
// the end, or -1.
func upperThenLower(s string, i int) int {
	lastLower := -1
	for i < len(s) {
		c, n := byteClass[s[i]], 1
		if c == multiByte {
			c, n = atRune(s, i)
		}
		if c&cUpper == 0 {
			if c&cLower != 0 {
				return run(s, i+n, cLower)
			}
			break
		}
		if c&cLower != 0 {
			lastLower = i + n
		}
		i += n
	}
	return lastLower
}

// contraction extends a word ending at e by an optional
// (?i:'s|'t|'re|'ve|'m|'ll|'d). No non-ASCII rune lowercases to these
// letters, so comparing ASCII case-insensitively is regexp2's (?i).
func contraction(s string, e int) int {
	if e+1 >= len(s) || s[e] != '\'' {
		return e
	}
	switch s[e+1] | 0x20 {
	case 's', 't', 'm', 'd':
		return e + 2
	case 'r', 'v':
		if e+2 < len(s) && s[e+2]|0x20 == 'e' {
			return e + 3
		}
	case 'l':
		if e+2 < len(s) && s[e+2]|0x20 == 'l' {
			return e + 3
		}
	}
	return e
}

// splitCL100K is cl100k_base's pattern:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//	| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitCL100K(s string, i int) int {
	if e := contraction(s, i); e > i {
		return e
	}
	c, n := at(s, i)
	if c&notPrefix == 0 && i+n < len(s) {
		if c2, _ := at(s, i+n); c2&cLetter != 0 {
			return run(s, i+n, cLetter)
		}
	}
	if c&cLetter != 0 {
		return run(s, i+n, cLetter)
	}
	return splitRest(s, i, c, n, false)
}

// splitRest is the alternatives both patterns share, after the words:
// \p{N}{1,3}, ` ?[^\s\p{L}\p{N}]+[\r\n]*` (o200k also takes '/' in the
// tail), \s*[\r\n]+, \s+(?!\S) and \s+. c and n are the class and length
// of the rune at i.
func splitRest(s string, i int, c uint8, n int, slash bool) int {
	if c&cNumber != 0 {
		e := i + n
		for k := 1; k < 3 && e < len(s); k++ {
			c, n := at(s, e)
			if c&cNumber == 0 {
				break
			}
			e += n
		}
		return e
	}
	// Punctuation, after an optional space.
	p := -1
	if c&notPunct == 0 {
		p = i
	} else if s[i] == ' ' && i+1 < len(s) {
		if c2, _ := at(s, i+1); c2&notPunct == 0 {
			p = i + 1
		}
	}
	if p >= 0 {
		e := p
		for e < len(s) {
			c, n := byteClass[s[e]], 1
			if c == multiByte {
				c, n = atRune(s, e)
			}
			if c&notPunct != 0 {
				break
			}
			e += n
		}
		for e < len(s) && (s[e] == '\r' || s[e] == '\n' || slash && s[e] == '/') {
			e++
		}
		return e
	}
	return splitSpace(s, i)
}

// splitSpace matches at a white-space rune: \s*[\r\n]+ ends after the last
// newline of the run (\s* gives back until one follows); otherwise
// \s+(?!\S) takes the run but its last rune when a non-space follows (that
// rune joins the next piece, " word"), the whole run at the end of text;
// and \s+ takes a lone space before a non-space.
func splitSpace(s string, i int) int {
	afterNewline, last, e := -1, i, i
	for e < len(s) {
		c, n := byteClass[s[e]], 1
		if c == multiByte {
			c, n = atRune(s, e)
		}
		if c&cSpace == 0 {
			break
		}
		if c&cNewline != 0 {
			afterNewline = e + n
		}
		last = e
		e += n
	}
	switch {
	case afterNewline >= 0:
		return afterNewline
	case e == len(s) || last == i:
		return e
	}
	return last
}
