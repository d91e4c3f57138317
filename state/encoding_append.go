package state

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// appendDiskRecord appends json.Marshal(d) to b, byte for byte, without
// reflection: every write of a conversation encodes its record, and
// encoding/json's reflection over diskRecord cost several times the rest of
// the write. Field order, omitempty and omitzero follow diskRecord's tags,
// strings are escaped as encoding/json escapes them (HTML characters
// included), floats and times are formatted as it formats them. What
// json.Marshal cannot encode (NaN or ±Inf, a time outside years 0-9999 or
// with a zone offset of a day or more) gets json.Marshal's own error.
// TestAppendDiskRecordMatchesJSON and FuzzAppendDiskRecordMatchesJSON keep
// the two equal: a field added to diskRecord (or to a struct in it) must be
// added here too.
func appendDiskRecord(b []byte, d *diskRecord) ([]byte, error) {
	e := recordAppender{b: b}
	e.record(d)
	if e.bad {
		_, err := json.Marshal(d) // the rare case: json.Marshal's exact error
		if err == nil {
			panic("state: appendDiskRecord failed where json.Marshal did not")
		}
		return nil, err
	}
	return e.b, nil
}

// diskRecordSizeHint is about how many bytes d encodes to (more for
// records without long strings), so the buffer is allocated once.
func diskRecordSizeHint(d *diskRecord) int {
	n := 512 + len(d.Namespace) + len(d.ID) + len(d.Model) + len(d.Turns)*48
	for i := range d.Branches {
		n += 240 + len(d.Branches[i].Summary)
	}
	for i := range d.Lines {
		l := &d.Lines[i]
		n += 420 + len(l.Model) + len(l.Breaker.Reason) + len(l.Dedups)*90 + len(l.Prunes)*100
	}
	for i := range d.RecentSummaries {
		n += 140 + len(d.RecentSummaries[i].Summary)
	}
	return n + n/8 // room for escapes
}

// recordAppender is the buffer being appended to; bad is set by a value
// JSON cannot hold, and the caller then discards b.
type recordAppender struct {
	b   []byte
	bad bool
}

// An object is written by begin, fields that each start with a comma, and
// end, which turns the first comma into the opening brace.
func (e *recordAppender) begin() int { return len(e.b) }

func (e *recordAppender) end(start int) {
	if len(e.b) == start {
		e.b = append(e.b, "{}"...)
		return
	}
	e.b[start] = '{'
	e.b = append(e.b, '}')
}

// key appends `,"name":`; name is a plain ASCII tag name.
func (e *recordAppender) key(name string) {
	e.b = append(e.b, ',', '"')
	e.b = append(e.b, name...)
	e.b = append(e.b, '"', ':')
}

func (e *recordAppender) str(name, s string) {
	e.key(name)
	e.b = appendJSONString(e.b, s)
}

// strOmitEmpty, intOmitEmpty, ... are the fields tagged omitempty.
func (e *recordAppender) strOmitEmpty(name, s string) {
	if s != "" {
		e.str(name, s)
	}
}

func (e *recordAppender) int(name string, v int64) {
	e.key(name)
	e.b = strconv.AppendInt(e.b, v, 10)
}

func (e *recordAppender) intOmitEmpty(name string, v int64) {
	if v != 0 {
		e.int(name, v)
	}
}

func (e *recordAppender) boolOmitEmpty(name string, v bool) {
	if v {
		e.key(name)
		e.b = append(e.b, "true"...)
	}
}

func (e *recordAppender) floatOmitEmpty(name string, f float64) {
	if f == 0 { // -0 too, as encoding/json's isEmptyValue
		return
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		e.bad = true
		return
	}
	e.key(name)
	e.b = appendJSONFloat(e.b, f)
}

// hash is a ChainHash, which encoding/json writes through MarshalText:
// 64 hex digits, nothing to escape.
func (e *recordAppender) hash(name string, h ChainHash) {
	e.key(name)
	e.b = appendHashString(e.b, h)
}

func (e *recordAppender) hashOmitZero(name string, h ChainHash) {
	if !h.IsZero() {
		e.hash(name, h)
	}
}

// timeOmitZero is a time.Time tagged omitzero (its IsZero, whatever its
// location), written as time.Time.MarshalJSON writes it.
func (e *recordAppender) timeOmitZero(name string, t time.Time) {
	if t.IsZero() {
		return
	}
	e.key(name)
	e.b = append(e.b, '"')
	out, err := t.AppendText(e.b) // MarshalJSON's RFC 3339 form and checks, unquoted
	if err != nil {
		e.bad = true
		return
	}
	e.b = append(out, '"')
}

// usageOmitZero is a diskUsage tagged omitzero: left out when every
// counter is 0.
func (e *recordAppender) usageOmitZero(name string, u diskUsage) {
	if u == (diskUsage{}) {
		return
	}
	e.key(name)
	s := e.begin()
	e.intOmitEmpty("calls", u.Calls)
	e.intOmitEmpty("unreported", u.Unreported)
	e.intOmitEmpty("input", u.Input)
	e.intOmitEmpty("cached", u.Cached)
	e.intOmitEmpty("cache_write", u.CacheWrite)
	e.intOmitEmpty("output", u.Output)
	e.end(s)
}

// breakerOmitZero is a diskBreaker tagged omitzero. encoding/json's zero
// test of a struct without an IsZero method is ==, so a BackoffUntil that
// IsZero but has a location keeps the breaker, written as {}.
func (e *recordAppender) breakerOmitZero(name string, br diskBreaker) {
	if br == (diskBreaker{}) {
		return
	}
	e.key(name)
	s := e.begin()
	e.boolOmitEmpty("force_next", br.ForceNext)
	e.boolOmitEmpty("tripped", br.Tripped)
	e.intOmitEmpty("consecutive_over_trigger", int64(br.ConsecutiveOverTrigger))
	e.intOmitEmpty("failure_count", int64(br.FailureCount))
	e.timeOmitZero("backoff_until", br.BackoffUntil)
	e.strOmitEmpty("reason", br.Reason)
	e.end(s)
}

func (e *recordAppender) record(d *diskRecord) {
	s := e.begin()
	e.str("ns", d.Namespace)
	e.str("id", d.ID)
	e.strOmitEmpty("model", d.Model)
	e.intOmitEmpty("requests", d.Requests)
	e.intOmitEmpty("tokens_before", d.TokensBefore)
	e.intOmitEmpty("tokens_after", d.TokensAfter)
	e.intOmitEmpty("tokens_saved", d.TokensSaved)
	e.intOmitEmpty("compactions", d.Compactions)
	e.usageOmitZero("usage", d.Usage)
	e.usageOmitZero("summary_usage", d.Summary)
	e.usageOmitZero("direct_usage", d.Direct)
	if len(d.Branches) > 0 {
		e.key("branches")
		for i := range d.Branches {
			e.b = append(e.b, "[,"[min(i, 1)]) // '[' before the first, ',' after
			e.branch(&d.Branches[i])
		}
		e.b = append(e.b, ']')
	}
	if len(d.Lines) > 0 {
		e.key("lines")
		for i := range d.Lines {
			e.b = append(e.b, "[,"[min(i, 1)])
			e.line(&d.Lines[i])
		}
		e.b = append(e.b, ']')
	}
	e.boolOmitEmpty("force_next", d.ForceNext)
	if len(d.RecentSummaries) > 0 {
		e.key("recent_summaries")
		for i := range d.RecentSummaries {
			e.b = append(e.b, "[,"[min(i, 1)])
			e.summary(&d.RecentSummaries[i])
		}
		e.b = append(e.b, ']')
	}
	if len(d.Turns) > 0 {
		e.key("turns")
		enc, err := d.Turns.MarshalJSON()
		if err != nil {
			e.bad = true
		}
		e.b = append(e.b, enc...)
	}
	e.timeOmitZero("created_at", d.CreatedAt)
	e.timeOmitZero("updated_at", d.UpdatedAt)
	e.intOmitEmpty("last_input_tokens", int64(d.LegacyLastInputTokens))
	e.intOmitEmpty("last_estimate", int64(d.LegacyLastEstimate))
	e.floatOmitEmpty("calibration", d.LegacyCalibration)
	e.breakerOmitZero("breaker", d.LegacyBreaker)
	e.end(s)
}

func (e *recordAppender) branch(br *diskBranch) {
	s := e.begin()
	e.str("summary", br.Summary)
	e.int("covered", int64(br.Covered))
	e.hash("hash", br.Hash)
	e.hashOmitZero("parent", br.Parent)
	e.intOmitEmpty("since", int64(br.Since))
	e.timeOmitZero("created_at", br.CreatedAt)
	e.timeOmitZero("used_at", br.UsedAt)
	e.end(s)
}

func (e *recordAppender) line(l *diskLine) {
	s := e.begin()
	e.hashOmitZero("id", l.ID)
	e.hashOmitZero("tip", l.Tip)
	e.intOmitEmpty("messages", int64(l.Messages))
	e.strOmitEmpty("model", l.Model)
	e.intOmitEmpty("last_input_tokens", int64(l.LastInputTokens))
	e.intOmitEmpty("last_estimate", int64(l.LastEstimate))
	e.floatOmitEmpty("calibration", l.Calibration)
	e.floatOmitEmpty("slope", l.Slope)
	e.intOmitEmpty("last_sent", int64(l.LastSent))
	e.breakerOmitZero("breaker", l.Breaker)
	if len(l.Dedups) > 0 {
		e.key("dedups")
		for i, m := range l.Dedups {
			e.b = append(e.b, "[,"[min(i, 1)])
			e.b = appendDedup(e.b, m)
		}
		e.b = append(e.b, ']')
	}
	if len(l.Prunes) > 0 {
		e.key("prunes")
		for i, m := range l.Prunes {
			e.b = append(e.b, "[,"[min(i, 1)])
			e.b = appendPrune(e.b, m)
		}
		e.b = append(e.b, ']')
	}
	e.timeOmitZero("used_at", l.UsedAt)
	e.intOmitEmpty("turns", int64(l.Turns))
	e.boolOmitEmpty("cache_seen", l.CacheSeen)
	e.intOmitEmpty("uncached_prompts", int64(l.UncachedPrompts))
	e.end(s)
}

func (e *recordAppender) summary(m *diskSummary) {
	s := e.begin()
	e.timeOmitZero("at", m.At)
	e.str("summary", m.Summary)
	e.intOmitEmpty("covered_messages", int64(m.CoveredMessages))
	e.intOmitEmpty("tokens_before", int64(m.TokensBefore))
	e.intOmitEmpty("tokens_after", int64(m.TokensAfter))
	e.end(s)
}

// appendDedup appends what diskDedup.MarshalJSON writes.
func appendDedup(b []byte, d diskDedup) []byte {
	b = append(b, '[')
	b = strconv.AppendInt(b, int64(d.Index), 10)
	b = append(b, ',')
	b = appendHashString(b, d.Digest)
	if d.Result != 0 {
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(d.Result), 10)
	}
	return append(b, ']')
}

// appendPrune appends what diskPrune.MarshalJSON writes.
func appendPrune(b []byte, p diskPrune) []byte {
	b = append(b, '[')
	b = strconv.AppendInt(b, int64(p.Index), 10)
	b = append(b, ',')
	b = appendHashString(b, p.Digest)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(p.Result), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(p.Turn), 10)
	return append(b, ']')
}

// appendHashString appends h as ChainHash.MarshalText's hex, quoted.
func appendHashString(b []byte, h ChainHash) []byte {
	const digits = "0123456789abcdef"
	b = append(b, '"')
	for _, c := range h {
		b = append(b, digits[c>>4], digits[c&0xf])
	}
	return append(b, '"')
}

// appendJSONFloat appends a finite f as encoding/json writes a float64:
// like ES6, %f between 1e-6 and 1e21, %e outside with a two-digit
// negative exponent shortened (e-07 to e-7).
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// jsonSafe holds the bytes encoding/json writes as they are with HTML
// escaping on (its default): printable ASCII and DEL, except the quote,
// the backslash and <, >, &. Bytes from 0x80 (UTF-8) are checked apart.
var jsonSafe = func() (safe [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		safe[c] = true
	}
	for _, c := range `"\<>&` {
		safe[c] = false
	}
	return safe
}()

// appendJSONString appends s quoted as encoding/json quotes a string:
// \" \\ \b \f \n \r \t, \u00XX for other control bytes and <, >, &,
// \ufffd for each byte of invalid UTF-8, and U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		for i < len(s) && jsonSafe[s[i]] { // most of a string: copied in one append below
			i++
		}
		if i == len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
