package state

import (
	"math"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/ctxpress/ctxpress/history"
)

// utc is t in UTC, without a monotonic reading; the zero time stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// normalize makes r what decodeRecord(encodeRecord(r)) returns, so Update can
// return the stored record without decoding it again: times in UTC without a
// monotonic reading (Turn.At to the millisecond), a finite Calibration, nil
// for empty slices. TestNormalizeMatchesRoundTrip keeps the two in step.
func normalize(r *Record) {
	r.CreatedAt, r.UpdatedAt = utc(r.CreatedAt), utc(r.UpdatedAt)
	if len(r.Lines) == 0 {
		r.Lines = nil
	}
	// Lines and Branches may be shared with records other goroutines read
	// (the cache's copies share their arrays): what is already normal is
	// not written again.
	for i := range r.Lines {
		l := &r.Lines[i]
		setFinite(&l.Calibration.Ratio)
		setFinite(&l.Calibration.Slope)
		setUTC(&l.Breaker.BackoffUntil)
		setUTC(&l.UsedAt)
		if l.Dedups != nil && len(l.Dedups) == 0 {
			l.Dedups = nil
		}
		if l.Prunes != nil && len(l.Prunes) == 0 {
			l.Prunes = nil
		}
	}
	if len(r.Branches) == 0 {
		r.Branches = nil
	}
	for i := range r.Branches {
		b := &r.Branches[i]
		setUTC(&b.CreatedAt)
		setUTC(&b.UsedAt)
	}
	if len(r.RecentSummaries) == 0 {
		r.RecentSummaries = nil
	}
	for i := range r.RecentSummaries {
		r.RecentSummaries[i].At = utc(r.RecentSummaries[i].At)
	}
	r.Turns = normalTurns(r.Turns)
}

// normalTurns returns ts with every At in UTC to the millisecond and
// their Edits as stored (normalEdits), nil for none. It copies ts only
// when a turn needs it: the array may be shared with other copies of the
// record (see Record.Turns).
func normalTurns(ts []Turn) []Turn {
	if len(ts) == 0 {
		return nil
	}
	copied := false
	set := func(i int, t Turn) {
		if !copied {
			ts, copied = slices.Clone(ts), true
		}
		ts[i] = t
	}
	for i := range ts {
		t := ts[i]
		if !t.At.IsZero() {
			if n := time.UnixMilli(t.At.UnixMilli()).UTC(); n != t.At {
				t.At = n
				set(i, t)
			}
		}
		if es := normalEdits(t.Edits); (es == nil) != (t.Edits == nil) || len(es) > 0 && &es[0] != &t.Edits[0] {
			t.Edits = es
			set(i, t)
		}
	}
	return ts
}

// normalEdits returns es as stored: nil for none, names cut to
// MaxEditName bytes (on a rune boundary). It copies es only when a name
// needs it.
func normalEdits(es []history.Edit) []history.Edit {
	if len(es) == 0 {
		return nil
	}
	for i := range es {
		if len(es[i].Name) > MaxEditName {
			es = slices.Clone(es)
			for j := i; j < len(es); j++ {
				es[j].Name = truncate(es[j].Name, MaxEditName)
			}
			return es
		}
	}
	return es
}

// truncate is s cut to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// finite returns f, or 0 for NaN and ±Inf (JSON has no such numbers).
// setFinite and setUTC write f or t only when normalizing changes it.
func setFinite(f *float64) {
	if math.IsNaN(*f) || math.IsInf(*f, 0) {
		*f = 0
	}
}

func setUTC(t *time.Time) {
	if v := utc(*t); v != *t {
		*t = v
	}
}

func finite(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}
