package squash

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// str writes a JSON string literal, cutting it when it is long and reads
// like prose (see doc.go for the rule).
func (e *jemitter) str(raw string) {
	body := raw[1 : len(raw)-1]
	if len(body) <= jsonShortString {
		e.b.WriteString(raw)
		return
	}
	if cutBefore(body) { // squashed already: a second pass keeps it
		e.b.WriteString(raw)
		return
	}
	if e.text != nil && strings.Count(body, `\n`) >= jsonTextLines-1 {
		e.b.WriteString(e.textString(raw))
		return
	}
	chars, spaced, slashed := jsonChars(body)
	limit := jsonProseHead
	switch {
	case chars <= jsonShortString:
		limit = chars
	case hasErrorWord(body[:min(len(body), 1024)]):
		limit = jsonErrorLimit
	case !spaced && (slashed || byteEntropy(body) >= jsonEntropyBits):
		limit = jsonIDLimit
	case chars <= jsonProseLimit:
		limit = chars
	}
	if chars <= limit+jsonMinCut {
		e.b.WriteString(raw)
		return
	}
	cut := jsonCut(body, limit)
	e.b.WriteByte('"')
	e.b.WriteString(body[:cut])
	e.b.WriteString("…[")
	e.b.WriteString(strconv.Itoa(chars - limit))
	e.b.WriteString(" chars")
	e.tell()
	e.b.WriteString(`]"`)
}

// textString returns the JSON string literal raw, holding a text of many
// lines, with the text squashed as an output of its own shape: a log keeps
// its errors and summary, a source file is kept whole. It returns raw
// itself when that is not shorter.
func (e *jemitter) textString(raw string) string {
	var s string
	if json.Unmarshal([]byte(raw), &s) != nil {
		return raw
	}
	out := e.text(s)
	if out == s {
		return raw
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // <, > and & are text, as the client sent them
	if enc.Encode(out) != nil || b.Len()-1 >= len(raw) {
		return raw
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// cutBefore reports whether a string body ends with the marker of a cut
// (…[N chars]).
// (…[N chars], or …[N chars; the way back]).
func cutBefore(body string) bool {
	i := strings.LastIndex(body, "…[")
	if i < 0 || !strings.HasSuffix(body, "]") {
		return false
	}
	rest := body[i+len("…["):]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	return j > 0 && (rest[j:] == " chars]" || strings.HasPrefix(rest[j:], " chars; "))
}

// jsonChars counts the characters of a raw string body (an escape is one
// character, a surrogate pair too) and reports whether it holds whitespace
// and whether it has path or URL separators.
func jsonChars(body string) (chars int, spaced, slashed bool) {
	for i := 0; i < len(body); chars++ {
		c := body[i]
		switch {
		case c == '\\':
			i += escLen(body, i)
			if i-1 < len(body) {
				switch body[i-1] {
				case 'n', 't', 'r':
					spaced = true
				case '/', '\\':
					slashed = true
				}
			}
		case c < utf8.RuneSelf:
			spaced = spaced || c == ' '
			slashed = slashed || c == '/'
			i++
		default:
			_, sz := utf8.DecodeRuneInString(body[i:])
			i += sz
		}
	}
	return chars, spaced, slashed
}

// jsonCut returns the byte offset in body after n characters, never inside
// an escape sequence, a surrogate pair or a multi-byte rune.
func jsonCut(body string, n int) int {
	i := 0
	for chars := 0; chars < n && i < len(body); chars++ {
		switch c := body[i]; {
		case c == '\\':
			i += escLen(body, i)
		case c < utf8.RuneSelf:
			i++
		default:
			_, sz := utf8.DecodeRuneInString(body[i:])
			i += sz
		}
	}
	return min(i, len(body))
}

// escLen is the length of the escape at body[i] ('\\'): 2, 6 for \uXXXX,
// 12 for a \uD8xx\uDCxx surrogate pair.
func escLen(body string, i int) int {
	if i+1 >= len(body) || body[i+1] != 'u' {
		return 2
	}
	if i+12 <= len(body) && (body[i+2] == 'd' || body[i+2] == 'D') && strings.ContainsRune("89abAB", rune(body[i+3])) &&
		body[i+6] == '\\' && body[i+7] == 'u' {
		return 12
	}
	return 6
}

// byteEntropy is the Shannon entropy of s in bits per byte.
func byteEntropy(s string) float64 {
	var hist [256]int
	for i := 0; i < len(s); i++ {
		hist[s[i]]++
	}
	n := float64(len(s))
	h := 0.0
	for _, c := range hist {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

// hasErrorWord reports whether s mentions an error, case-insensitively.
func hasErrorWord(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] | 0x20 {
		case 'e':
			if hasPrefixFold(s[i:], "error") || hasPrefixFold(s[i:], "exception") {
				return true
			}
		case 'f':
			if hasPrefixFold(s[i:], "fail") || hasPrefixFold(s[i:], "fatal") {
				return true
			}
		case 'p':
			if hasPrefixFold(s[i:], "panic") {
				return true
			}
		case 'c':
			if hasPrefixFold(s[i:], "crash") {
				return true
			}
		case 'd':
			if hasPrefixFold(s[i:], "denied") {
				return true
			}
		case 'r':
			if hasPrefixFold(s[i:], "refused") {
				return true
			}
		case 't':
			if hasPrefixFold(s[i:], "timed out") || hasPrefixFold(s[i:], "timeout") || hasPrefixFold(s[i:], "traceback") {
				return true
			}
		}
	}
	return false
}

// hasPrefixFold is strings.HasPrefix for an ASCII lower-case prefix,
// ignoring case in s.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}
