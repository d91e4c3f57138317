package expand

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
)

// RefLen is the length of a reference: the first hex digits of the
// original's SHA-256, enough that two originals of one namespace never
// share one.
const RefLen = 12

// Ref is the reference of an original: a prefix of its content hash, so
// the same bytes always get the same reference (a marker once sent stays
// the same) and are kept once.
func Ref(original string) string {
	sum := sha256.Sum256([]byte(original))
	return hex.EncodeToString(sum[:RefLen/2])
}

// ValidRef reports whether s is shaped like a reference.
func ValidRef(s string) bool {
	if len(s) != RefLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Kinds of original: which step replaced it.
const (
	KindSquash     = "squash"
	KindPrune      = "prune"
	KindDedup      = "dedup"
	KindCompaction = "compaction"
)

// Lines is a 1-based, inclusive line range; the zero value is the whole
// text.
type Lines struct{ From, To int }

// Whole reports whether l is the whole text.
func (l Lines) Whole() bool { return l.From == 0 && l.To == 0 }

// String is l as ParseLines reads it ("A-B"; "" for the whole text).
func (l Lines) String() string {
	switch {
	case l.Whole():
		return ""
	case l.To == 0:
		return strconv.Itoa(l.From) + "-"
	}
	return strconv.Itoa(l.From) + "-" + strconv.Itoa(l.To)
}

// ErrBadLines is the error of a line range that cannot be read.
var ErrBadLines = errors.New(`lines must be "A-B" (1-based, A <= B), "A" or "A-"`)

// ParseLines reads a line range: "A-B", "A" (one line), "A-" (from A to
// the end; To is then 0) or "" (the whole text). Sed's "A,B" is taken too.
func ParseLines(s string) (Lines, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Lines{}, nil
	}
	a, b, dash := strings.Cut(s, "-")
	if !dash {
		a, b, dash = strings.Cut(s, ",")
	}
	from, err := strconv.Atoi(strings.TrimSpace(a))
	if err != nil || from < 1 {
		return Lines{}, ErrBadLines
	}
	if !dash {
		return Lines{From: from, To: from}, nil
	}
	if strings.TrimSpace(b) == "" {
		return Lines{From: from}, nil
	}
	to, err := strconv.Atoi(strings.TrimSpace(b))
	if err != nil || to < from {
		return Lines{}, ErrBadLines
	}
	return Lines{From: from, To: to}, nil
}

// Slice returns lines l of text, with their line ends, as sed -n 'A,Bp'
// prints them; a range past the end gives what there is, which may be
// nothing.
func Slice(text string, l Lines) string {
	if l.Whole() {
		return text
	}
	start, line := 0, 1
	for line < l.From {
		i := strings.IndexByte(text[start:], '\n')
		if i < 0 {
			return ""
		}
		start += i + 1
		line++
	}
	if l.To == 0 {
		return text[start:]
	}
	end := start
	for ; line <= l.To; line++ {
		i := strings.IndexByte(text[end:], '\n')
		if i < 0 {
			return text[start:]
		}
		end += i + 1
	}
	return text[start:end]
}

// CountLines is how many lines text has, as sed counts them (a last line
// without its newline counts).
func CountLines(text string) int {
	n := strings.Count(text, "\n")
	if text != "" && !strings.HasSuffix(text, "\n") {
		n++
	}
	return n
}
