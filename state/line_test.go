package state

import (
	"fmt"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/history"
)

// chainOf is the chain of a history whose i-th prefix hashes to "<name>:i":
// two histories with the same name agree on every prefix.
func chainOf(name string, messages int) func(n int) (ChainHash, bool) {
	return func(n int) (ChainHash, bool) {
		if n > messages {
			return ChainHash{}, false
		}
		return hashOf(fmt.Sprintf("%s:%d", name, n)), true
	}
}

func TestMatchLine(t *testing.T) {
	r := Record{Lines: []Line{
		{ID: hashOf("a"), Tip: hashOf("a:4"), Messages: 4},
		{ID: hashOf("a2"), Tip: hashOf("a:10"), Messages: 10},
		{ID: hashOf("b"), Tip: hashOf("b:6"), Messages: 6},
	}}
	for _, c := range []struct {
		what    string
		history func(int) (ChainHash, bool)
		want    int
	}{
		{"extends the longest line it shares", chainOf("a", 12), 1},
		{"a request as long as the tip extends it", chainOf("a", 10), 1},
		{"shorter than the long line: the short one", chainOf("a", 8), 0},
		{"another history under the same key", chainOf("b", 7), 2},
		{"a side request extends no line", chainOf("title", 2), -1},
		{"shorter than every tip", chainOf("a", 3), -1},
	} {
		if got := r.MatchLine(c.history); got != c.want {
			t.Errorf("%s: MatchLine = %d, want %d", c.what, got, c.want)
		}
	}
}

func TestPutLineEvictsLeastRecentlyUsed(t *testing.T) {
	var r Record
	for i := range MaxLines {
		r.PutLine(Line{ID: hashOf(fmt.Sprint(i)), UsedAt: t0.Add(time.Duration(i) * time.Minute)})
	}
	// Line 0 is used again: line 1 becomes the least recently used.
	l := *r.LineByID(hashOf("0"))
	l.UsedAt = t0.Add(time.Hour)
	r.PutLine(l)
	if len(r.Lines) != MaxLines {
		t.Fatalf("replacing a line changed the count to %d", len(r.Lines))
	}
	r.PutLine(Line{ID: hashOf("new"), UsedAt: t0.Add(2 * time.Hour)})
	if len(r.Lines) != MaxLines || r.LineByID(hashOf("1")) != nil || r.LineByID(hashOf("0")) == nil || r.LineByID(hashOf("new")) == nil {
		t.Errorf("after a ninth line: %d lines, line 1 kept %v, line 0 kept %v", len(r.Lines), r.LineByID(hashOf("1")) != nil, r.LineByID(hashOf("0")) != nil)
	}
	if cur := r.CurrentLine(); cur.ID != hashOf("new") {
		t.Errorf("CurrentLine = %v, want the newest", cur.ID)
	}
}

func TestCalibrationForIsPerModel(t *testing.T) {
	r := Record{Lines: []Line{
		{ID: hashOf("main"), Numbers: history.Numbers{Model: "gpt-4o", Calibration: history.Calibration{Ratio: 1.3}}, UsedAt: t0},
		{ID: hashOf("title"), Numbers: history.Numbers{Model: "gpt-4o-mini", Calibration: history.Calibration{Ratio: 0.7}}, UsedAt: t0.Add(time.Minute)},
		{ID: hashOf("old"), Numbers: history.Numbers{Model: "gpt-4o", Calibration: history.Calibration{Ratio: 2}}, UsedAt: t0.Add(-time.Hour)},
	}}
	for model, want := range map[string]float64{"gpt-4o": 1.3, "gpt-4o-mini": 0.7, "other": 0} {
		if got := r.CalibrationFor(model); got != want {
			t.Errorf("CalibrationFor(%s) = %v, want %v", model, got, want)
		}
	}
}
