package state

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/ctxpress/ctxpress/internal/jsonstr"
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
	n := len(b)
	b, ok := appendDiskRecordFast(b, d)
	if ok {
		return b, nil
	}
	out, err := json.Marshal(d) // the rare case: json.Marshal's exact error
	if err != nil {
		return nil, err
	}
	return append(b[:n], out...), nil // were the two to disagree
}

// appendDiskRecordFast is appendDiskRecord without falling back on
// json.Marshal: ok is false for what JSON cannot hold, and b then holds
// part of d.
func appendDiskRecordFast(b []byte, d *diskRecord) (_ []byte, ok bool) {
	var e recordAppender
	b = e.record(b, d)
	return b, !e.bad
}

// diskRecordSizeHint is about how many bytes d encodes to (more for
// records without long strings), so the buffer is allocated once.
func diskRecordSizeHint(d *diskRecord) int {
	n := 512 + len(d.Namespace) + len(d.ID) + len(d.Model) + len(d.Title) + len(d.Agent) + len(d.Turns)*48
	for i := range d.Branches {
		n += 240 + len(d.Branches[i].Summary) + keptSize(d.Branches[i].Kept)
	}
	for i := range d.Lines {
		l := &d.Lines[i]
		n += 420 + len(l.Model) + len(l.Breaker.Reason) + len(l.Dedups)*90 + len(l.Prunes)*100
	}
	for i := range d.RecentSummaries {
		n += 140 + len(d.RecentSummaries[i].Summary) + keptSize(d.RecentSummaries[i].Kept)
	}
	return n + n/8 // room for escapes
}

// recordAppender appends the fields of a record. The buffer is passed
// and returned rather than kept in it: a slice stored through a pointer
// costs a write barrier on every append while the GC runs. bad is set by
// a value JSON cannot hold, and the caller then discards what was written.
type recordAppender struct {
	bad bool
}

// An object is written by begin, fields that each start with a comma, and
// end, which turns the first comma into the opening brace.
func begin(b []byte) int { return len(b) }

func end(b []byte, start int) []byte {
	if len(b) == start {
		return append(b, "{}"...)
	}
	b[start] = '{'
	return append(b, '}')
}

// key appends `,"name":`; name is a plain ASCII tag name.
func key(b []byte, name string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

func str(b []byte, name, s string) []byte {
	return jsonstr.Append(key(b, name), s, true)
}

// strOmitEmpty, intOmitEmpty, ... are the fields tagged omitempty.
func strOmitEmpty(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return str(b, name, s)
}

func integer(b []byte, name string, v int64) []byte {
	return strconv.AppendInt(key(b, name), v, 10)
}

func intOmitEmpty(b []byte, name string, v int64) []byte {
	if v == 0 {
		return b
	}
	return integer(b, name, v)
}

func boolOmitEmpty(b []byte, name string, v bool) []byte {
	if !v {
		return b
	}
	return append(key(b, name), "true"...)
}

func (e *recordAppender) floatOmitEmpty(b []byte, name string, f float64) []byte {
	if f == 0 { // -0 too, as encoding/json's isEmptyValue
		return b
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		e.bad = true
		return b
	}
	return appendJSONFloat(key(b, name), f)
}

// hash is a ChainHash, which encoding/json writes through MarshalText:
// 64 hex digits, nothing to escape.
func hash(b []byte, name string, h ChainHash) []byte {
	return appendHashString(key(b, name), h)
}

func hashOmitZero(b []byte, name string, h ChainHash) []byte {
	if h.IsZero() {
		return b
	}
	return hash(b, name, h)
}

// timeOmitZero is a time.Time tagged omitzero (its IsZero, whatever its
// location), written as time.Time.MarshalJSON writes it.
func (e *recordAppender) timeOmitZero(b []byte, name string, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	b = append(key(b, name), '"')
	out, err := t.AppendText(b) // MarshalJSON's RFC 3339 form and checks, unquoted
	if err != nil {
		e.bad = true
		return b
	}
	return append(out, '"')
}

// usageOmitZero is a diskUsage tagged omitzero: left out when every
// counter is 0.
func usageOmitZero(b []byte, name string, u diskUsage) []byte {
	if u == (diskUsage{}) {
		return b
	}
	b = key(b, name)
	s := begin(b)
	b = intOmitEmpty(b, "calls", u.Calls)
	b = intOmitEmpty(b, "unreported", u.Unreported)
	b = intOmitEmpty(b, "input", u.Input)
	b = intOmitEmpty(b, "cached", u.Cached)
	b = intOmitEmpty(b, "cache_write", u.CacheWrite)
	b = intOmitEmpty(b, "output", u.Output)
	return end(b, s)
}

// breakerOmitZero is a diskBreaker tagged omitzero. encoding/json's zero
// test of a struct without an IsZero method is ==, so a BackoffUntil that
// IsZero but has a location keeps the breaker, written as {}.
func (e *recordAppender) breakerOmitZero(b []byte, name string, br diskBreaker) []byte {
	if br == (diskBreaker{}) {
		return b
	}
	b = key(b, name)
	s := begin(b)
	b = boolOmitEmpty(b, "force_next", br.ForceNext)
	b = boolOmitEmpty(b, "tripped", br.Tripped)
	b = intOmitEmpty(b, "consecutive_over_trigger", int64(br.ConsecutiveOverTrigger))
	b = intOmitEmpty(b, "failure_count", int64(br.FailureCount))
	b = e.timeOmitZero(b, "backoff_until", br.BackoffUntil)
	b = strOmitEmpty(b, "reason", br.Reason)
	return end(b, s)
}

// open appends what comes before element i of an array: '[' before the
// first, ',' before the others.
func open(b []byte, i int) []byte { return append(b, "[,"[min(i, 1)]) }

func (e *recordAppender) record(b []byte, d *diskRecord) []byte {
	s := begin(b)
	b = str(b, "ns", d.Namespace)
	b = str(b, "id", d.ID)
	b = strOmitEmpty(b, "model", d.Model)
	b = strOmitEmpty(b, "title", d.Title)
	b = strOmitEmpty(b, "agent", d.Agent)
	b = intOmitEmpty(b, "requests", d.Requests)
	b = intOmitEmpty(b, "tokens_before", d.TokensBefore)
	b = intOmitEmpty(b, "tokens_after", d.TokensAfter)
	b = intOmitEmpty(b, "tokens_saved", d.TokensSaved)
	b = intOmitEmpty(b, "compactions", d.Compactions)
	b = usageOmitZero(b, "usage", d.Usage)
	b = usageOmitZero(b, "summary_usage", d.Summary)
	b = usageOmitZero(b, "direct_usage", d.Direct)
	b = usageOmitZero(b, "server_compaction_usage", d.ServerCompact)
	if len(d.Branches) > 0 {
		b = key(b, "branches")
		for i := range d.Branches {
			b = e.branch(open(b, i), &d.Branches[i])
		}
		b = append(b, ']')
	}
	if len(d.Lines) > 0 {
		b = key(b, "lines")
		for i := range d.Lines {
			b = e.line(open(b, i), &d.Lines[i])
		}
		b = append(b, ']')
	}
	b = boolOmitEmpty(b, "force_next", d.ForceNext)
	if len(d.RecentSummaries) > 0 {
		b = key(b, "recent_summaries")
		for i := range d.RecentSummaries {
			b = e.summary(open(b, i), &d.RecentSummaries[i])
		}
		b = append(b, ']')
	}
	if len(d.Turns) > 0 {
		enc, err := d.Turns.MarshalJSON()
		if err != nil {
			e.bad = true
		}
		b = append(key(b, "turns"), enc...)
	}
	b = e.timeOmitZero(b, "created_at", d.CreatedAt)
	b = e.timeOmitZero(b, "updated_at", d.UpdatedAt)
	b = intOmitEmpty(b, "last_input_tokens", int64(d.LegacyLastInputTokens))
	b = intOmitEmpty(b, "last_estimate", int64(d.LegacyLastEstimate))
	b = e.floatOmitEmpty(b, "calibration", d.LegacyCalibration)
	b = e.breakerOmitZero(b, "breaker", d.LegacyBreaker)
	return end(b, s)
}

func (e *recordAppender) branch(b []byte, br *diskBranch) []byte {
	s := begin(b)
	b = str(b, "summary", br.Summary)
	b = integer(b, "covered", int64(br.Covered))
	b = hash(b, "hash", br.Hash)
	b = hashOmitZero(b, "parent", br.Parent)
	b = intOmitEmpty(b, "since", int64(br.Since))
	b = boolOmitEmpty(b, "prepared", br.Prepared)
	b = intOmitEmpty(b, "apply_at", int64(br.ApplyAt))
	b = boolOmitEmpty(b, "observed", br.Observed)
	b = e.timeOmitZero(b, "created_at", br.CreatedAt)
	b = e.timeOmitZero(b, "used_at", br.UsedAt)
	b = keptOmitZero(b, "kept", br.Kept)
	return end(b, s)
}

// keptOmitZero is a diskKept tagged omitzero.
func keptOmitZero(b []byte, name string, k diskKept) []byte {
	if k == (diskKept{}) {
		return b
	}
	b = key(b, name)
	s := begin(b)
	b = str(b, "ref", k.Ref)
	b = integer(b, "first", int64(k.First))
	b = integer(b, "last", int64(k.Last))
	b = strOmitEmpty(b, "note", k.Note)
	return end(b, s)
}

// keptSize is about how many bytes keptOmitZero writes of k.
func keptSize(k diskKept) int {
	if k == (diskKept{}) {
		return 0
	}
	return 64 + len(k.Ref) + len(k.Note)
}

func (e *recordAppender) line(b []byte, l *diskLine) []byte {
	s := begin(b)
	b = hashOmitZero(b, "id", l.ID)
	b = hashOmitZero(b, "tip", l.Tip)
	b = intOmitEmpty(b, "messages", int64(l.Messages))
	b = strOmitEmpty(b, "model", l.Model)
	b = intOmitEmpty(b, "last_input_tokens", int64(l.LastInputTokens))
	b = intOmitEmpty(b, "last_estimate", int64(l.LastEstimate))
	b = e.floatOmitEmpty(b, "calibration", l.Calibration)
	b = e.floatOmitEmpty(b, "slope", l.Slope)
	b = intOmitEmpty(b, "growth", int64(l.Growth))
	b = intOmitEmpty(b, "last_sent", int64(l.LastSent))
	b = e.breakerOmitZero(b, "breaker", l.Breaker)
	if len(l.Dedups) > 0 {
		b = key(b, "dedups")
		for i, m := range l.Dedups {
			b = appendDedup(open(b, i), m)
		}
		b = append(b, ']')
	}
	if len(l.Prunes) > 0 {
		b = key(b, "prunes")
		for i, m := range l.Prunes {
			b = appendPrune(open(b, i), m)
		}
		b = append(b, ']')
	}
	b = e.timeOmitZero(b, "used_at", l.UsedAt)
	b = intOmitEmpty(b, "turns", int64(l.Turns))
	b = boolOmitEmpty(b, "cache_seen", l.CacheSeen)
	b = intOmitEmpty(b, "uncached_prompts", int64(l.UncachedPrompts))
	b = intOmitEmpty(b, "window", int64(l.Window))
	return end(b, s)
}

func (e *recordAppender) summary(b []byte, m *diskSummary) []byte {
	s := begin(b)
	b = e.timeOmitZero(b, "at", m.At)
	b = str(b, "summary", m.Summary)
	b = intOmitEmpty(b, "covered_messages", int64(m.CoveredMessages))
	b = intOmitEmpty(b, "tokens_before", int64(m.TokensBefore))
	b = intOmitEmpty(b, "tokens_after", int64(m.TokensAfter))
	b = keptOmitZero(b, "kept", m.Kept)
	return end(b, s)
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
