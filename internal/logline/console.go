package logline

import (
	"unsafe"

	"github.com/tidwall/gjson"
)

// AppendConsole appends the console form of one zerolog JSON event to dst:
//
//	2026-12-01 20:19:24 INF request method=POST path=/v1/embeddings status=200
//
// the time as the event has it (zerolog writes local time) without its zone,
// the level's three letters, the message (JSON-quoted if it holds a newline
// or another control character: one event, one line), then every other field in the
// order the event has it (the code's order reads better than sorted names).
// Strings are bare unless they hold a space, a quote, a backslash or a byte
// outside printable ASCII, then they keep their JSON quoting; numbers, bools
// and nested objects or arrays (compaction's "event") are their JSON text.
// The event is read in place with gjson, never decoded into a map: this is
// what zerolog.ConsoleWriter spent a quarter of the proxy's CPU on. A line
// that is not a JSON object is appended as it is.
func AppendConsole(dst, event []byte, color bool) []byte {
	line := trimNewline(event)
	// zerolog writes whole objects; anything else is not its event.
	if len(line) < 2 || line[0] != '{' || line[len(line)-1] != '}' {
		dst = append(dst, line...)
		return append(dst, '\n')
	}
	// The event is only read for the length of this call.
	obj := gjson.Parse(unsafe.String(unsafe.SliceData(line), len(line)))
	start := len(dst)
	var ts, lvl, msg gjson.Result
	// One pass: the fields wait here while time, level and message (which
	// come first on the line, wherever they are in the event) are found.
	var keys, vals [24]gjson.Result
	n, more := 0, false
	obj.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "time":
			ts = v
		case "level":
			lvl = v
		case "message":
			msg = v
		default:
			if n < len(keys) {
				keys[n], vals[n] = k, v
				n++
			} else {
				more = true
			}
		}
		return true
	})
	if ts.Exists() {
		dst = appendTime(dst, ts)
	}
	if lvl.Exists() || start == len(dst) {
		dst = appendSpace(dst, start)
		dst = appendLevel(dst, lvl.String(), color)
	}
	if m := msg.String(); m != "" {
		dst = appendSpace(dst, start)
		if hasControl(m) {
			// One event, one line: a message's newlines stay escaped.
			dst = append(dst, msg.Raw...)
		} else {
			dst = append(dst, m...)
		}
	}
	for i := range n {
		dst = appendSpace(dst, start)
		dst = appendField(dst, keys[i].Str, vals[i], color)
	}
	if more { // a rare event of many fields: the rest in a second pass
		i := 0
		obj.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "time", "level", "message":
				return true
			}
			if i++; i > n {
				dst = appendSpace(dst, start)
				dst = appendField(dst, k.Str, v, color)
			}
			return true
		})
	}
	return append(dst, '\n')
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func appendSpace(dst []byte, start int) []byte {
	if len(dst) > start {
		dst = append(dst, ' ')
	}
	return dst
}

// appendTime writes an RFC 3339 time ("2006-01-02T15:04:05.999Z07:00") as
// time.DateTime; any other time value is written as it is.
func appendTime(dst []byte, ts gjson.Result) []byte {
	s := ts.String()
	if ts.Type == gjson.String && len(s) >= 19 && s[10] == 'T' && s[4] == '-' && s[13] == ':' {
		dst = append(dst, s[:10]...)
		dst = append(dst, ' ')
		return append(dst, s[11:19]...)
	}
	return append(dst, s...)
}

const (
	colorRed    = "\x1b[31m"
	colorGreen  = "\x1b[32m"
	colorYellow = "\x1b[33m"
	colorBlue   = "\x1b[34m"
	colorBold   = "\x1b[1m"
	colorDark   = "\x1b[90m"
	colorReset  = "\x1b[0m"
)

// appendLevel writes zerolog's console abbreviations (INF, WRN, ...).
func appendLevel(dst []byte, level string, color bool) []byte {
	abbr, c := "???", ""
	switch level {
	case "trace":
		abbr, c = "TRC", colorBlue
	case "debug":
		abbr = "DBG"
	case "info":
		abbr, c = "INF", colorGreen
	case "warn":
		abbr, c = "WRN", colorYellow
	case "error":
		abbr, c = "ERR", colorRed
	case "fatal":
		abbr, c = "FTL", colorRed
	case "panic":
		abbr, c = "PNC", colorRed
	}
	if color && c != "" {
		dst = append(dst, c...)
		dst = append(dst, colorBold...)
		dst = append(dst, abbr...)
		return append(dst, colorReset...)
	}
	return append(dst, abbr...)
}

func appendField(dst []byte, key string, v gjson.Result, color bool) []byte {
	if color {
		if key == "error" {
			dst = append(dst, colorRed...)
		} else {
			dst = append(dst, colorDark...)
		}
	}
	dst = append(dst, key...)
	dst = append(dst, '=')
	if color {
		dst = append(dst, colorReset...)
	}
	if v.Type == gjson.String && !needsQuote(v.Raw[1:len(v.Raw)-1]) {
		// No escapes in it: the raw text between the quotes is the string.
		return append(dst, v.Raw[1:len(v.Raw)-1]...)
	}
	return append(dst, v.Raw...)
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 {
			return true
		}
	}
	return false
}

// needsQuote is zerolog.ConsoleWriter's rule for quoting a string value.
func needsQuote(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == ' ' || c == '\\' || c == '"' {
			return true
		}
	}
	return false
}
