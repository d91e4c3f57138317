package jsonvalid

import (
	"encoding/binary"
	"math/bits"
)

const (
	lsb = 0x0101010101010101 // 0x01 in every byte
	msb = 0x8080808080808080 // 0x80 in every byte

	spaces = lsb * ' '
)

// SWAR masks for scanString (variables, not constants: see there).
var (
	swarLSB        uint64 = lsb
	swarMSB        uint64 = msb
	swarQuotes     uint64 = lsb * '"'
	swarBackslashs uint64 = lsb * '\\'
	swarCtlLimit   uint64 = lsb * 0x20
)

// escapeOK[c] reports whether c may follow a backslash in a string, not
// counting 'u', which is handled separately.
var escapeOK = [256]bool{'"': true, '\\': true, '/': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

// isHex[c] reports whether c is an ASCII hex digit.
var isHex = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	return t
}()

// Valid reports whether data is valid JSON. It returns exactly what
// gjson.ValidBytes(data) returns, except that it never overflows the stack
// on absurdly deep nesting (see the package documentation).
//
// It is one loop over the grammar's states, the labels:
//   - value: data[i] (if present) must start a value;
//   - next: a value just ended at i; a separator, a closer or (at the top
//     level) only trailing whitespace follows;
//   - pop: the innermost container was just closed; restore the
//     enclosing container's kind;
//   - key: data[i] == '"' starts an object key.
//
// Nesting costs a bit of stack (see pushKind), not a goroutine stack frame.
func Valid(data []byte) bool { return valid(data, 0, false) }

// ValidAfterElement is Valid(data) for data whose first i bytes are those
// of a valid JSON document in which an element of an array that is a
// member of the top-level object ends at i (a request's message ends
// there): the grammar's state at i is then known (inside that array,
// inside that object, a value just ended), so only data[i:] is read. A
// long conversation's next request repeats its last one up to there.
func ValidAfterElement(data []byte, i int) bool { return valid(data, i, true) }

// valid is Valid from the top (afterElement false), or ValidAfterElement.
func valid(data []byte, i int, afterElement bool) bool {
	var (
		depth     int  // the number of open containers
		ok, inObj bool // inObj: the innermost open container is an object (valid if depth > 0)
		small     [16]uint64
		stack     = small[:] // the first 1024 levels do not escape
	)
	if afterElement {
		// Depth 2: an array (inObj false) whose enclosing container, at
		// depth 1, is an object (bit 1, as pushKind sets it).
		depth, small[0] = 2, 1<<1
		goto next
	}
	i = skipWS(data, 0)

value:
	if i >= len(data) {
		return false
	}
	switch data[i] {
	case '"':
		if i, ok = scanString(data, i+1); !ok {
			return false
		}
	case '{', '[':
		stack = pushKind(stack, depth, inObj)
		depth++
		inObj = data[i] == '{'
		i = skipWS(data, i+1)
		if i >= len(data) {
			return false
		}
		if inObj {
			switch data[i] {
			case '"':
				goto key
			case '}':
				i++
				goto pop
			}
			return false
		}
		if data[i] == ']' {
			i++
			goto pop
		}
		goto value
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if i, ok = scanNumber(data, i); !ok {
			return false
		}
	default:
		if i, ok = scanLiteral(data, i); !ok {
			return false
		}
	}

next:
	i = skipWS(data, i)
	if depth == 0 {
		return i == len(data)
	}
	if i >= len(data) {
		return false
	}
	if inObj {
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
			if i < len(data) && data[i] == '"' {
				goto key
			}
			return false
		case '}':
			i++
			goto pop
		}
		return false
	}
	switch data[i] {
	case ',':
		i = skipWS(data, i+1)
		goto value
	case ']':
		i++
		goto pop
	}
	return false

pop:
	depth--
	inObj = stack[depth>>6]&(1<<(depth&63)) != 0
	goto next

key:
	if i, ok = scanString(data, i+1); !ok {
		return false
	}
	i = skipWS(data, i)
	if i >= len(data) || data[i] != ':' {
		return false
	}
	i = skipWS(data, i+1)
	goto value
}

// pushKind records, on opening the container at depth+1, whether the
// enclosing one (at depth) is an object: bit d of stack is the kind of the
// container at depth d (bit 0 is unused: depth 0 is the top level), read
// back by the pop to depth d. Nesting deeper than stack holds costs one
// more word per 64 levels.
func pushKind(stack []uint64, depth int, inObj bool) []uint64 {
	w := depth >> 6
	if w == len(stack) {
		stack = append(stack, 0)
	}
	if inObj {
		stack[w] |= 1 << (depth & 63)
	} else {
		stack[w] &^= 1 << (depth & 63)
	}
	return stack
}

// scanLiteral validates true, false or null at i and returns the index
// just past it. Literals are rare in request bodies: it stays out of
// Valid's loop (not inlined) to keep that loop small.
//
//go:noinline
func scanLiteral(data []byte, i int) (int, bool) {
	var lit string
	switch data[i] {
	case 't':
		lit = "true"
	case 'f':
		lit = "false"
	case 'n':
		lit = "null"
	default:
		return i, false
	}
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// skipWS returns the index of the first byte at or after i that is not JSON
// whitespace (space, tab, LF, CR), or len(data).
func skipWS(data []byte, i int) int {
	for i < len(data) {
		c := data[i]
		if c > ' ' {
			return i
		}
		if c == ' ' {
			// Indentation in pretty-printed bodies: skip runs of spaces
			// a word at a time.
			for len(data)-i >= 9 && binary.LittleEndian.Uint64(data[i+1:]) == spaces {
				i += 8
			}
		} else if c != '\n' && c != '\t' && c != '\r' {
			return i
		}
		i++
	}
	return i
}

// scanString validates a string whose opening quote is at i-1 and returns
// the index just past its closing quote.
//
// It works on 8-byte words. m gets the 0x80 bit set in every byte of the
// word that is '"', '\\' or < 0x20, using the classic has-zero-byte and
// has-less-than tricks:
//
//	haszero(v) = (v - 0x01..01) & ^v & 0x80..80
//
// applied to x^'"', x^'\\' and (as has-less-than) to x itself. The three
// share the "& ^x & 0x80..80" term because xoring with '"' or '\\' does not
// change the top bit of a byte. The tricks never miss a special byte, but a
// borrow can flag a harmless byte directly above a special one, so every
// flagged byte is classified by its actual value and false positives are
// ignored.
//
// Every flagged byte of a word is handled from the mask without reloading
// the word, and the position then advances by a whole word (one byte more
// when the word ends with a backslash whose escaped character is the next
// word's first byte). Unlike a loop that restarts after each escape, no
// load address depends on where the previous special byte was, which keeps
// escape-dense text (source code, logs, doubly escaped tool arguments)
// fast. The alternatives tried were slower (docs/measurements.md).
func scanString(data []byte, i int) (int, bool) {
	// Loading the masks from variables keeps them in registers for the
	// whole loop; as constants the compiler rematerializes all five 64-bit
	// immediates in every iteration.
	quotes, backslashs, ones, ctlLimit, highs := swarQuotes, swarBackslashs, swarLSB, swarCtlLimit, swarMSB

	// The 32-byte window lets every access below (at most w[20]) be
	// bounds-check free; the last < 32 bytes go through scanTail.
	for len(data)-i >= 32 {
		w := data[i : i+32 : i+32]
		x := binary.LittleEndian.Uint64(w)
		m := (((x ^ quotes) - ones) | ((x ^ backslashs) - ones) | (x - ctlLimit)) &^ x & highs
		base := uint(0) // offset in w of the word m describes
		if m == 0 {
			// Plain word: look at the next one too, so runs of ordinary
			// bytes go 16 at a time.
			y := binary.LittleEndian.Uint64(w[8:])
			m = (((y ^ quotes) - ones) | ((y ^ backslashs) - ones) | (y - ctlLimit)) &^ y & highs
			if m == 0 {
				i += 16
				continue
			}
			base = 8
		}
		adv := base + 8
		for m != 0 {
			bit := m & -m
			k := base + uint(bits.TrailingZeros64(m))>>3 // index in w
			m ^= bit
			c := w[k&31]
			if c == '\\' {
				e := w[(k+1)&31]
				// The escaped character is consumed: if it is '"' or '\\'
				// it must not be treated as special, so clear its bit.
				// If the backslash is the word's last byte, the escaped
				// character is the first byte of the next word instead (the
				// shift drops the bit), so the next word starts one later.
				m &^= bit << 8
				if k == base+7 {
					adv++
				}
				if !escapeOK[e] {
					if e != 'u' || !isHex[w[(k+2)&31]] || !isHex[w[(k+3)&31]] ||
						!isHex[w[(k+4)&31]] || !isHex[w[(k+5)&31]] {
						return i, false
					}
				}
			} else if c <= '"' {
				if c == '"' {
					return i + int(k) + 1, true
				}
				if c < 0x20 {
					return i, false
				}
			}
			// Otherwise a false positive: an ordinary byte.
		}
		i += int(adv)
	}
	return scanTail(data, i)
}

// scanTail is the byte-at-a-time version of scanString, used for the last
// few bytes of the input.
func scanTail(data []byte, i int) (int, bool) {
	for ; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(data) {
				return i + 1, false
			}
			if e := data[i+1]; e == 'u' {
				if len(data)-i < 6 || !isHex[data[i+2]] || !isHex[data[i+3]] ||
					!isHex[data[i+4]] || !isHex[data[i+5]] {
					return i, false
				}
				i += 5
			} else if escapeOK[e] {
				i++
			} else {
				return i + 1, false
			}
		case c < 0x20:
			return i, false
		}
	}
	return i, false
}

// scanNumber validates a number starting at i (data[i] is '-' or a digit)
// and returns the index just past it. Like gjson, it stops after a leading
// '0', so "01" scans as "0" and fails on the trailing "1" in the caller.
func scanNumber(data []byte, i int) (int, bool) {
	if data[i] == '-' {
		i++
		if i >= len(data) || data[i] < '0' || data[i] > '9' {
			return i, false
		}
	}
	if data[i] == '0' {
		i++
	} else {
		i = skipDigits(data, i+1)
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || data[i] < '0' || data[i] > '9' {
			return i, false
		}
		i = skipDigits(data, i+1)
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || data[i] < '0' || data[i] > '9' {
			return i, false
		}
		i = skipDigits(data, i+1)
	}
	return i, true
}

func skipDigits(data []byte, i int) int {
	for i < len(data) && data[i]-'0' <= 9 {
		i++
	}
	return i
}
