package squash

// ApproxTokens estimates the token count of s the way BPE tokenizers such as
// cl100k split text, without their tables:
//   - a run of ASCII letters counts one token per 4 letters (rounded up),
//   - a run of digits one token per 3 digits (cl100k splits numbers so),
//   - spaces and tabs are free (they merge into the next word),
//   - every other ASCII byte (punctuation, newline) counts one,
//   - every non-ASCII rune counts one.
//
// It is typically within ±30% of tiktoken on code, logs and JSON; callers
// that need exact counts set Config.CountTokens.
func ApproxTokens(s string) int {
	n := 0
	letters, digits := 0, 0
	flush := func() {
		n += (letters+3)/4 + (digits+2)/3
		letters, digits = 0, 0
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_':
			if digits > 0 {
				flush()
			}
			letters++
		case c >= '0' && c <= '9':
			if letters > 0 {
				flush()
			}
			digits++
		case c == ' ' || c == '\t':
			flush()
		case c < 0x80:
			flush()
			n++
		default:
			flush()
			// Count a rune once: skip its continuation bytes.
			if c >= 0xC0 {
				n++
			}
		}
	}
	flush()
	return n
}
