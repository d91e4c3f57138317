package state

import (
	"slices"
	"time"

	"github.com/ctxpress/ctxpress/history"
)

// Line is one history seen under a key: the requests that extend one
// another, each re-sending the previous one's messages and appending. Two
// runs of one agent on one task (same fingerprint), a client that sends
// one app-wide prompt_cache_key, or a title request under the session's
// header share a key but not a line, so each line has its own numbers,
// breaker and backoff, and its own compaction lock.
type Line struct {
	// ID names the line for as long as it lives: the chain hash of the
	// request that started it (Tip moves on, ID does not).
	ID ChainHash
	// Tip is the chain hash of the first Messages messages (after the
	// leading system messages) of the line's latest recorded request. A
	// request extends the line when its own chain hash after Messages
	// messages equals Tip.
	Tip      ChainHash
	Messages int
	// Numbers are what the line has learnt: the model of its latest
	// request, the calibration for it, breaker, cache evidence, growth and
	// window. The caller computes them (rewrite); a NaN or ±Inf ratio is
	// stored as 0.
	history.Numbers
	// LastSent is the size the line's latest forwarded request would have
	// had sent as the client wrote it (rewrite.DirectUsage's Input): what
	// a client talking to the upstream directly would have had cached for
	// the next.
	LastSent int
	// Dedups are the tool results the line's latest forwarded request sent
	// as the dedup placeholder, so the next request sends them so again
	// (a cached prefix stays as it was) and dedup's minimum applies only
	// to what it adds.
	Dedups []history.DedupMark
	// Prunes are the tool results the line's latest forwarded request sent
	// as their pruned line, so the next request sends them so again.
	Prunes []history.PruneMark
	// UsedAt is when a request of the line was last recorded: the LRU clock.
	UsedAt time.Time
}

// MatchLine returns the index of the line a request extends: the one with
// the most Messages whose Tip equals hashAt(Messages), -1 when none does.
// hashAt returns the chain hash of the request's first n messages, and
// false when it has fewer than n.
func (r *Record) MatchLine(hashAt func(n int) (ChainHash, bool)) int {
	best := -1
	for i, l := range r.Lines {
		if best >= 0 && l.Messages <= r.Lines[best].Messages {
			continue
		}
		if h, ok := hashAt(l.Messages); ok && h == l.Tip {
			best = i
		}
	}
	return best
}

// LineByID returns the line with id, nil when there is none. The pointer
// is into r.Lines: valid until r.Lines changes.
func (r *Record) LineByID(id ChainHash) *Line {
	for i := range r.Lines {
		if r.Lines[i].ID == id {
			return &r.Lines[i]
		}
	}
	return nil
}

// PutLine stores l, replacing the line with the same ID, and then drops the
// least recently used lines beyond MaxLines (never l itself). It never
// writes into r.Lines' backing array, so a copy of the Record is unaffected.
func (r *Record) PutLine(l Line) {
	lines := slices.DeleteFunc(slices.Clone(r.Lines), func(o Line) bool { return o.ID == l.ID })
	for len(lines) >= MaxLines {
		lru := 0
		for j, o := range lines {
			if o.UsedAt.Before(lines[lru].UsedAt) {
				lru = j
			}
		}
		lines = slices.Delete(lines, lru, lru+1)
	}
	r.Lines = append(lines, l)
}

// CurrentLine returns the most recently used line, the one the dashboard
// shows; the zero Line when there is none.
func (r Record) CurrentLine() Line {
	cur := -1
	for i, l := range r.Lines {
		if cur < 0 || !l.UsedAt.Before(r.Lines[cur].UsedAt) {
			cur = i
		}
	}
	if cur < 0 {
		return Line{}
	}
	return r.Lines[cur]
}

// CalibrationFor returns the calibration of the most recently used line of
// model, 0 when no line has one: where a new line of that model starts.
func (r Record) CalibrationFor(model string) float64 {
	cal, at := 0.0, time.Time{}
	for _, l := range r.Lines {
		if l.Model == model && l.Calibration.Ratio > 0 && (cal == 0 || l.UsedAt.After(at)) {
			cal, at = l.Calibration.Ratio, l.UsedAt
		}
	}
	return cal
}
