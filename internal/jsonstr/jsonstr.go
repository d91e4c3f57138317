// Package jsonstr quotes strings as JSON, in the two forms ctxpress
// writes: as encoding/json does (HTML characters escaped: the state
// store's records) and as a client would (them left as they are: text
// spliced into a request body).
package jsonstr

import "unicode/utf8"

// Append appends s to dst as a JSON string: \" \\ \b \f \n \r \t, \u00XX
// for other control bytes, \ufffd for each byte of invalid UTF-8, U+2028
// and U+2029 escaped, and with escapeHTML <, > and & as \u003c, \u003e,
// \u0026 (encoding/json's default). The output is a function of s alone.
func Append(dst []byte, s string, escapeHTML bool) []byte {
	const hex = "0123456789abcdef"
	safe := &plainSafe
	if escapeHTML {
		safe = &htmlSafe
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		for i < len(s) && safe[s[i]] { // most of a string: copied in one append below
			i++
		}
		if i == len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// plainSafe and htmlSafe hold the bytes written as they are: printable
// ASCII and DEL except the quote and the backslash, and for htmlSafe
// neither <, > nor &. Bytes from 0x80 (UTF-8) are checked apart.
var plainSafe, htmlSafe = safeBytes(`"\`), safeBytes(`"\<>&`)

func safeBytes(unsafe string) (safe [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		safe[c] = true
	}
	for _, c := range unsafe {
		safe[c] = false
	}
	return safe
}
