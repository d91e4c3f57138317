package squash

// FNV-1a, 64 bit: the template key is hashed as it is normalised, so no
// normalised copy of the line is ever built.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// templateKey hashes the template of line: the line with its variable parts
// replaced, so that lines differing only in timestamps, counters, ids or
// paths share a key.
//
//   - a run of spaces and tabs becomes one space (aligned columns vary),
//   - a word with digits that is all hex (a hash, "de9231d", a uuid part) or
//     starts with 0x becomes '#'; in other words each digit run becomes '#'
//     ("blk_3886…" -> "blk_#", "10.251.73.220:50010" -> "#.#.#.#:#"),
//   - a field of several parts with digits ("R02-M1-N0-C:J12-U11", an IP and
//     port, a dotted timestamp) becomes '#',
//   - month and weekday names become '#' (syslog timestamps),
//   - an absolute path (a '/' that starts a token) becomes '/*'.
//
// Letters are kept, so "fpr29=…" and "r24=…" stay apart: two distinct error
// events must never share a key, or one of them would be dropped.
func templateKey(line string) uint64 {
	h := uint64(fnvOffset)
	add := func(c byte) {
		h ^= uint64(c)
		h *= fnvPrime
	}
	n := len(line)
	if n > 0 && line[n-1] == '\r' {
		n--
	}
	space := false
	for i := 0; i < n; {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			space = true
			i++
			continue
		case (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') && idField(line[i:n]) > 0:
			if space {
				add(' ')
				space = false
			}
			add('#')
			i += idField(line[i:n])
			continue
		case isWordByte(c):
			j, digit, hex := i, false, true
			for j < n && isWordByte(line[j]) {
				d := line[j]
				if d >= '0' && d <= '9' {
					digit = true
				} else if !(d >= 'a' && d <= 'f' || d >= 'A' && d <= 'F') {
					hex = false
				}
				j++
			}
			if space {
				add(' ')
				space = false
			}
			w := line[i:j]
			switch {
			case digit && (hex || len(w) > 2 && w[0] == '0' && (w[1] == 'x' || w[1] == 'X')):
				add('#')
			case digit:
				for k := 0; k < len(w); {
					if w[k] >= '0' && w[k] <= '9' {
						for k < len(w) && w[k] >= '0' && w[k] <= '9' {
							k++
						}
						add('#')
						continue
					}
					add(w[k])
					k++
				}
			case isDateName(w):
				add('#')
			default:
				for k := 0; k < len(w); k++ {
					add(w[k])
				}
			}
			i = j
			continue
		case c == '/' && (i == 0 || !isWordByte(line[i-1]) && line[i-1] != '/' && line[i-1] != '.'):
			j := i + 1
			for j < n && !isPathEnd(line[j]) {
				j++
			}
			if j > i+1 {
				if space {
					add(' ')
					space = false
				}
				add('/')
				add('*')
				i = j
				continue
			}
		}
		if space {
			add(' ')
			space = false
		}
		add(c)
		i++
	}
	return h
}

// exactKey hashes line verbatim, for lines that must never merge with a
// similar one (failing test names, compiler diagnostics, summaries). A salt
// keeps the two key spaces apart.
func exactKey(line string) uint64 {
	h := uint64(fnvOffset) ^ 0x9e3779b97f4a7c15
	for i := 0; i < len(line); i++ {
		h ^= uint64(line[i])
		h *= fnvPrime
	}
	return h
}

// idField returns the length of the whitespace-delimited field at the start
// of s when it is an identifier made of several parts with digits in it
// (BGL's "R02-M1-N0-C:J12-U11", "2005-06-03-15.42.50.675872",
// "blk_-6952295868487656571", "10.251.73.220:50010"), else 0. Such fields
// vary in their letters too, so they become a single '#'.
func idField(s string) int {
	digit, sep := false, false
	run := 0 // separators in a row: "threshold.......0" is a label, not an id
	i := 0
	for ; i < len(s) && s[i] != ' ' && s[i] != '\t'; i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digit, run = true, 0
		case c == '.' || c == ':' || c == '-' || c == '_':
			if sep, run = true, run+1; run > 2 {
				return 0
			}
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			run = 0
		default:
			return 0
		}
	}
	if digit && sep {
		return i
	}
	return 0
}

func isPathEnd(c byte) bool {
	switch c {
	case ' ', '\t', '"', '\'', '(', ')', '[', ']', '{', '}', '<', '>', ',', ';', ':', '=':
		return true
	}
	return false
}

// isDateName reports whether w is an English month or weekday abbreviation.
func isDateName(w string) bool {
	if len(w) != 3 {
		return false
	}
	switch w {
	case "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
		"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun":
		return true
	}
	return false
}
