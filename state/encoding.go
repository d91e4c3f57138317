package state

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/ctxpress/ctxpress/history"
)

// The on-disk form of a Record. It is private and separate from Record so the
// Go API can change without breaking stored data: keep these tags stable, add
// fields freely (older binaries ignore them), and bump SchemaVersion for any
// change older binaries would misread. Times are stored in UTC.

type diskRecord struct {
	Namespace       string        `json:"ns"`
	ID              string        `json:"id"`
	Model           string        `json:"model,omitempty"`
	Title           string        `json:"title,omitempty"`
	Agent           string        `json:"agent,omitempty"`
	Requests        int64         `json:"requests,omitempty"`
	TokensBefore    int64         `json:"tokens_before,omitempty"`
	TokensAfter     int64         `json:"tokens_after,omitempty"`
	TokensSaved     int64         `json:"tokens_saved,omitempty"`
	Compactions     int64         `json:"compactions,omitempty"`
	Usage           diskUsage     `json:"usage,omitzero"`
	Summary         diskUsage     `json:"summary_usage,omitzero"`
	Direct          diskUsage     `json:"direct_usage,omitzero"`
	ServerCompact   diskUsage     `json:"server_compaction_usage,omitzero"`
	Branches        []diskBranch  `json:"branches,omitempty"`
	Lines           []diskLine    `json:"lines,omitempty"`
	ForceNext       bool          `json:"force_next,omitempty"`
	RecentSummaries []diskSummary `json:"recent_summaries,omitempty"`
	Turns           diskTurns     `json:"turns,omitempty"`
	CreatedAt       time.Time     `json:"created_at,omitzero"`
	UpdatedAt       time.Time     `json:"updated_at,omitzero"`

	// Before lines (schema 1 records): one set of numbers and one breaker
	// for the whole key. Read, never written: they become a line every
	// request extends (Messages 0), so an upgrade keeps its calibration.
	LegacyLastInputTokens int         `json:"last_input_tokens,omitempty"`
	LegacyLastEstimate    int         `json:"last_estimate,omitempty"`
	LegacyCalibration     float64     `json:"calibration,omitempty"`
	LegacyBreaker         diskBreaker `json:"breaker,omitzero"`
}

type diskLine struct {
	ID              ChainHash   `json:"id,omitzero"`
	Tip             ChainHash   `json:"tip,omitzero"`
	Messages        int         `json:"messages,omitempty"`
	Model           string      `json:"model,omitempty"`
	LastInputTokens int         `json:"last_input_tokens,omitempty"`
	LastEstimate    int         `json:"last_estimate,omitempty"`
	Calibration     float64     `json:"calibration,omitempty"`
	Slope           float64     `json:"slope,omitempty"`
	Growth          int         `json:"growth,omitempty"`
	LastSent        int         `json:"last_sent,omitempty"`
	Breaker         diskBreaker `json:"breaker,omitzero"`
	Dedups          []diskDedup `json:"dedups,omitempty"`
	Prunes          []diskPrune `json:"prunes,omitempty"`
	UsedAt          time.Time   `json:"used_at,omitzero"`
	Turns           int         `json:"turns,omitempty"`
	CacheSeen       bool        `json:"cache_seen,omitempty"`
	UncachedPrompts int         `json:"uncached_prompts,omitempty"`
	Window          int         `json:"window,omitempty"`
}

// diskPrune is a history.PruneMark as [index, "digest hex", result,
// turn]. A record written before pruning has none; elements after the
// fourth (a newer version's) are not read.
type diskPrune struct {
	Index, Result int
	Digest        ChainHash
	Turn          int
}

func (d diskPrune) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{d.Index, d.Digest, d.Result, d.Turn})
}

func (d *diskPrune) UnmarshalJSON(b []byte) error {
	var v []json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if len(v) < 4 {
		return fmt.Errorf("state: a prune mark has %d elements, want 4", len(v))
	}
	for i, dst := range []any{&d.Index, &d.Digest, &d.Result, &d.Turn} {
		if err := json.Unmarshal(v[i], dst); err != nil {
			return err
		}
	}
	return nil
}

// diskDedup is a history.DedupMark as [index, "digest hex"], or [index, "digest
// hex", result] for a result after its message's first: the two-element
// form is every mark written before results were deduped one by one, and
// it still means the message's first result.
type diskDedup struct {
	Index  int
	Result int
	Digest ChainHash
}

func (d diskDedup) MarshalJSON() ([]byte, error) {
	if d.Result == 0 {
		return json.Marshal([]any{d.Index, d.Digest})
	}
	return json.Marshal([]any{d.Index, d.Digest, d.Result})
}

func (d *diskDedup) UnmarshalJSON(b []byte) error {
	var v []json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if len(v) < 2 {
		return fmt.Errorf("state: a dedup mark has %d elements, want 2 or 3", len(v))
	}
	if err := json.Unmarshal(v[0], &d.Index); err != nil {
		return err
	}
	if err := json.Unmarshal(v[1], &d.Digest); err != nil {
		return err
	}
	d.Result = 0
	if len(v) > 2 { // a fourth element on (a newer version's) is not read
		return json.Unmarshal(v[2], &d.Result)
	}
	return nil
}

// diskUsage is a Usage; a record written before usage was summed has
// none, and reads as zero.
type diskUsage struct {
	Calls      int64 `json:"calls,omitempty"`
	Unreported int64 `json:"unreported,omitempty"`
	Input      int64 `json:"input,omitempty"`
	Cached     int64 `json:"cached,omitempty"`
	CacheWrite int64 `json:"cache_write,omitempty"`
	Output     int64 `json:"output,omitempty"`
}

type diskBranch struct {
	Summary   string    `json:"summary"`
	Covered   int       `json:"covered"`
	Hash      ChainHash `json:"hash"`
	Parent    ChainHash `json:"parent,omitzero"`
	Since     int       `json:"since,omitempty"`
	Prepared  bool      `json:"prepared,omitempty"`
	ApplyAt   int       `json:"apply_at,omitempty"`
	Observed  bool      `json:"observed,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	UsedAt    time.Time `json:"used_at,omitzero"`
	Kept      diskKept  `json:"kept,omitzero"`
}

// diskKept is a history.Kept: where the messages a summary replaced are.
type diskKept struct {
	Ref   string `json:"ref"`
	First int    `json:"first"`
	Last  int    `json:"last"`
	Note  string `json:"note,omitempty"`
}

type diskBreaker struct {
	ForceNext              bool      `json:"force_next,omitempty"` // schema 1 only; now diskRecord.ForceNext
	Tripped                bool      `json:"tripped,omitempty"`
	ConsecutiveOverTrigger int       `json:"consecutive_over_trigger,omitempty"`
	FailureCount           int       `json:"failure_count,omitempty"`
	BackoffUntil           time.Time `json:"backoff_until,omitzero"`
	Reason                 string    `json:"reason,omitempty"`
}

type diskSummary struct {
	At              time.Time `json:"at,omitzero"`
	Summary         string    `json:"summary"`
	CoveredMessages int       `json:"covered_messages,omitempty"`
	TokensBefore    int       `json:"tokens_before,omitempty"`
	TokensAfter     int       `json:"tokens_after,omitempty"`
	Kept            diskKept  `json:"kept,omitzero"`
}

// diskTurns are Turns as a JSON array of arrays of integers: [at (Unix
// milliseconds, 0 for the zero time), tokens before, tokens after, input
// tokens, compacted (0 or 1)], then cached and cache-write tokens when
// either is not 0 or more follows, then the server compaction's input and
// output tokens when either is not 0 or more follows, then the edits when
// there are any (appendEdits). A turn of an earlier version has five,
// seven or nine numbers, and reads as 0 and no edits for those it lacks;
// an earlier version reads this one's first nine and ignores the rest. A
// record keeps up to MaxTurns of them and every Update reads and writes
// them all, so they are small and have their own codec (encoding/json's
// reflection costs ten times more).
type diskTurns []Turn

func (ts diskTurns) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(ts)*40)
	b = append(b, '[')
	for i, t := range ts {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendTurn(b, t)
	}
	return append(b, ']'), nil
}

// appendTurn appends t's inner array to b.
func appendTurn(b []byte, t Turn) []byte {
	var at int64
	if !t.At.IsZero() {
		at = t.At.UnixMilli()
	}
	b = append(b, '[')
	b = strconv.AppendInt(b, at, 10)
	for _, v := range [...]int{t.TokensBefore, t.TokensAfter, t.InputTokens} {
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(v), 10)
	}
	if t.Compacted {
		b = append(b, ",1"...)
	} else {
		b = append(b, ",0"...)
	}
	edits := len(t.Edits) > 0
	server := t.ServerCompactionInput != 0 || t.ServerCompactionOutput != 0 || edits
	if t.CachedTokens != 0 || t.CacheWriteTokens != 0 || server {
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(t.CachedTokens), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(t.CacheWriteTokens), 10)
	}
	if server {
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(t.ServerCompactionInput), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(t.ServerCompactionOutput), 10)
	}
	if edits {
		b = appendEdits(b, t.Edits)
	}
	return append(b, ']')
}

// turnNumbers are the numbers of a turn this version reads: diskTurns'
// five, the two cache counts, then the server compaction's two.
const turnNumbers = 9

// UnmarshalJSON reads what MarshalJSON writes. encoding/json has validated the
// syntax; it still rejects other shapes (fewer than five numbers,
// non-integers). The numbers after the ninth are the turn's edits
// (readEdits); a future version's numbers after them are ignored.
func (ts *diskTurns) UnmarshalJSON(b []byte) error {
	p := turnParser{b: b}
	if p.consume('n') { // null
		*ts = nil
		return nil
	}
	if !p.consume('[') {
		return p.fail()
	}
	var out diskTurns
	var more []int64 // a turn's numbers after the ninth, its edits
	if !p.consume(']') {
		for {
			if !p.consume('[') {
				return p.fail()
			}
			var v [turnNumbers]int64
			n := 0
			more = more[:0]
			for {
				x, ok := p.int()
				if !ok {
					return p.fail()
				}
				if n < len(v) {
					v[n] = x
				} else {
					more = append(more, x)
				}
				n++
				if p.consume(']') {
					break
				}
				if !p.consume(',') {
					return p.fail()
				}
			}
			if n < 5 {
				return fmt.Errorf("state: turn with %d numbers, want 5 at least", n)
			}
			t := Turn{TokensBefore: int(v[1]), TokensAfter: int(v[2]), InputTokens: int(v[3]), Compacted: v[4] != 0,
				CachedTokens: int(v[5]), CacheWriteTokens: int(v[6]), ServerCompactionInput: int(v[7]), ServerCompactionOutput: int(v[8]),
				Edits: readEdits(more)}
			if v[0] != 0 {
				t.At = time.UnixMilli(v[0]).UTC()
			}
			out = append(out, t)
			if p.consume(']') {
				break
			}
			if !p.consume(',') {
				return p.fail()
			}
		}
	}
	*ts = out
	return nil
}

// turnParser scans the turns array; consume and int skip leading whitespace.
type turnParser struct {
	b []byte
	i int
}

func (p *turnParser) skipSpace() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *turnParser) consume(c byte) bool {
	p.skipSpace()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *turnParser) int() (int64, bool) {
	p.skipSpace()
	j := p.i
	if j < len(p.b) && p.b[j] == '-' {
		j++
	}
	for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
		j++
	}
	v, err := strconv.ParseInt(string(p.b[p.i:j]), 10, 64)
	if err != nil {
		return 0, false
	}
	p.i = j
	return v, true
}

func (p *turnParser) fail() error {
	return fmt.Errorf("state: turns: unexpected input at offset %d", p.i)
}

// diskStamp is the part of a record that List and Sweep read for every record.
type diskStamp struct {
	UpdatedAt time.Time `json:"updated_at"`
}

// encodeRecord returns the stored bytes of r. (The bolt store encodes a
// record without its turns, which it keeps in chunks: see boltturns.go.)
func encodeRecord(r *Record) ([]byte, error) { return encodeRecordWithTurns(r, "turns", r.Turns, nil) }

// encodeRecordWithTurns returns the stored bytes of r with, instead of its
// Turns, the turns ts and then those already encoded in list (inner
// arrays, comma-separated) under field, when there are any: the bolt store
// keeps only a tail of them in the record (see boltturns.go).
func encodeRecordWithTurns(r *Record, field string, ts []Turn, list []byte) ([]byte, error) {
	d := diskRecord{
		Namespace:     r.Key.Namespace,
		ID:            r.Key.ID,
		Model:         r.Model,
		Title:         r.Title,
		Agent:         r.Agent,
		Requests:      r.Requests,
		TokensBefore:  r.TokensBefore,
		TokensAfter:   r.TokensAfter,
		TokensSaved:   r.TokensSaved,
		Compactions:   r.Compactions,
		Usage:         diskUsage(r.Usage),
		Summary:       diskUsage(r.Summary),
		Direct:        diskUsage(r.Direct),
		ServerCompact: diskUsage(r.ServerCompaction),
		ForceNext:     r.ForceNext,
		CreatedAt:     utc(r.CreatedAt),
		UpdatedAt:     utc(r.UpdatedAt),
	}
	for _, l := range r.Lines {
		c := l.Calibration
		d.Lines = append(d.Lines, diskLine{
			ID: l.ID, Tip: l.Tip, Messages: l.Messages, Model: l.Model,
			LastInputTokens: c.LastInput, LastEstimate: c.LastEstimate, Calibration: finite(c.Ratio),
			Slope: finite(c.Slope), Growth: l.Growth, Breaker: toDiskBreaker(l.Breaker), Dedups: convertMarks(l.Dedups, toDiskDedup),
			Prunes: convertMarks(l.Prunes, toDiskPrune),
			UsedAt: utc(l.UsedAt), Turns: l.Turns, CacheSeen: l.Cache.Seen, UncachedPrompts: l.Cache.Uncached, LastSent: l.LastSent, Window: l.Window,
		})
	}
	for _, b := range r.Branches {
		d.Branches = append(d.Branches, diskBranch{
			Summary: b.Summary, Covered: b.Covered, Hash: b.Hash, Parent: b.Parent, Since: b.Since, Prepared: b.Prepared, ApplyAt: b.ApplyAt, Observed: b.Observed,
			CreatedAt: utc(b.CreatedAt), UsedAt: utc(b.UsedAt), Kept: diskKept(b.Kept),
		})
	}
	for _, s := range r.RecentSummaries {
		d.RecentSummaries = append(d.RecentSummaries, diskSummary{
			At: utc(s.At), Summary: s.Summary, CoveredMessages: s.CoveredMessages,
			TokensBefore: s.TokensBefore, TokensAfter: s.TokensAfter, Kept: diskKept(s.Kept),
		})
	}
	// The turns are spliced in after the rest rather than encoded as a
	// field. Key order does not matter to the decoder.
	size := diskRecordSizeHint(&d)
	if len(ts) > 0 || len(list) > 0 {
		size += len(`,"":[]`) + len(field) + len(ts)*40 + len(list)
	}
	b, err := appendDiskRecord(make([]byte, 0, size), &d)
	if err != nil {
		return nil, fmt.Errorf("state: encode %s: %w", r.Key, err)
	}
	if len(ts) == 0 && len(list) == 0 {
		return b, nil
	}
	b = append(append(append(b[:len(b)-1], `,"`...), field...), `":[`...)
	for i, t := range ts {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendTurn(b, t)
	}
	if len(ts) > 0 && len(list) > 0 {
		b = append(b, ',')
	}
	return append(append(b, list...), "]}"...), nil
}

// decodeRecord decodes stored bytes. The Key comes from the storage key, which
// is authoritative; the copy inside the JSON is for people reading the file.
func decodeRecord(key Key, data []byte) (Record, error) {
	var d diskRecord
	if err := json.Unmarshal(data, &d); err != nil {
		return Record{}, fmt.Errorf("state: decode %s: %w: %w", key, ErrCorrupt, err)
	}
	r := Record{
		Key:              key,
		Model:            d.Model,
		Title:            d.Title,
		Agent:            d.Agent,
		Requests:         d.Requests,
		TokensBefore:     d.TokensBefore,
		TokensAfter:      d.TokensAfter,
		TokensSaved:      d.TokensSaved,
		Compactions:      d.Compactions,
		Usage:            Usage(d.Usage),
		Summary:          Usage(d.Summary),
		Direct:           Usage(d.Direct),
		ServerCompaction: Usage(d.ServerCompact),
		ForceNext:        d.ForceNext || d.LegacyBreaker.ForceNext,
		CreatedAt:        d.CreatedAt,
		UpdatedAt:        d.UpdatedAt,
	}
	for _, l := range d.Lines {
		r.Lines = append(r.Lines, Line{
			ID: l.ID, Tip: l.Tip, Messages: l.Messages,
			Numbers: history.Numbers{Model: l.Model,
				Calibration: history.Calibration{LastInput: l.LastInputTokens, LastEstimate: l.LastEstimate,
					Ratio: finite(l.Calibration), Slope: finite(l.Slope)},
				Breaker: fromDiskBreaker(l.Breaker), Turns: l.Turns,
				Cache: history.CacheEvidence{Seen: l.CacheSeen, Uncached: l.UncachedPrompts}, Growth: l.Growth, Window: l.Window},
			Dedups: convertMarks(l.Dedups, fromDiskDedup), Prunes: convertMarks(l.Prunes, fromDiskPrune),
			UsedAt: l.UsedAt, LastSent: l.LastSent,
		})
	}
	if len(d.Lines) == 0 && (d.LegacyLastInputTokens > 0 || d.LegacyCalibration > 0 || d.LegacyBreaker != (diskBreaker{ForceNext: d.LegacyBreaker.ForceNext})) {
		r.Lines = []Line{{Numbers: history.Numbers{Model: d.Model,
			Calibration: history.Calibration{LastInput: d.LegacyLastInputTokens, LastEstimate: d.LegacyLastEstimate, Ratio: finite(d.LegacyCalibration)},
			Breaker:     fromDiskBreaker(d.LegacyBreaker)}, UsedAt: d.UpdatedAt}}
	}
	for _, b := range d.Branches {
		r.Branches = append(r.Branches, Branch{
			Branch: history.Branch{Summary: b.Summary, Covered: b.Covered, Hash: b.Hash, Since: b.Since, Kept: history.Kept(b.Kept)},
			Parent: b.Parent, Prepared: b.Prepared, ApplyAt: b.ApplyAt, Observed: b.Observed, CreatedAt: b.CreatedAt, UsedAt: b.UsedAt,
		})
	}
	for _, s := range d.RecentSummaries {
		r.RecentSummaries = append(r.RecentSummaries, SummaryEntry{
			At: s.At, Summary: s.Summary, CoveredMessages: s.CoveredMessages,
			TokensBefore: s.TokensBefore, TokensAfter: s.TokensAfter, Kept: history.Kept(s.Kept),
		})
	}
	r.Turns = []Turn(d.Turns)
	return r, nil
}

// convertMarks converts a line's marks to or from their disk form (nil
// stays nil, so an empty list is not written).
func convertMarks[From, To any](ms []From, conv func(From) To) []To {
	var out []To
	for _, m := range ms {
		out = append(out, conv(m))
	}
	return out
}

func toDiskDedup(m history.DedupMark) diskDedup {
	return diskDedup{Index: m.Index, Result: m.Result, Digest: m.Digest}
}

func fromDiskDedup(d diskDedup) history.DedupMark {
	return history.DedupMark{Index: d.Index, Result: d.Result, Digest: d.Digest}
}

func toDiskPrune(m history.PruneMark) diskPrune {
	return diskPrune{Index: m.Index, Result: m.Result, Digest: m.Digest, Turn: m.Turn}
}

func fromDiskPrune(d diskPrune) history.PruneMark {
	return history.PruneMark{Index: d.Index, Result: d.Result, Digest: d.Digest, Turn: d.Turn}
}

func toDiskBreaker(b history.Breaker) diskBreaker {
	return diskBreaker{Tripped: b.Tripped, ConsecutiveOverTrigger: b.ConsecutiveOverTrigger,
		FailureCount: b.FailureCount, BackoffUntil: utc(b.BackoffUntil), Reason: b.Reason}
}

func fromDiskBreaker(d diskBreaker) history.Breaker {
	return history.Breaker{Tripped: d.Tripped, ConsecutiveOverTrigger: d.ConsecutiveOverTrigger,
		FailureCount: d.FailureCount, BackoffUntil: d.BackoffUntil, Reason: d.Reason}
}

// decodeStamp reads only UpdatedAt; ok is false for undecodable bytes.
func decodeStamp(data []byte) (time.Time, bool) {
	var s diskStamp
	if err := json.Unmarshal(data, &s); err != nil {
		return time.Time{}, false
	}
	return s.UpdatedAt, true
}
