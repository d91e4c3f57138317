package recorder

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
)

// TestLineEditorEditsAsUpdateLineDoes: the edits a run of turns makes in place
// leave the record as one UpdateLine (one clone) per edit would, new lines
// and evictions included, and never touch a copy of the record that shares
// its lines (the store's cached one).
func TestLineEditorEditsAsUpdateLineDoes(t *testing.T) {
	id := func(n int) state.ChainHash { return state.ChainHash{byte(n)} }
	t0 := time.Unix(1000, 0)
	var base state.Record
	for n := range state.MaxLines - 1 {
		base.Lines = append(base.Lines, state.Line{ID: id(n), Tip: id(n), Messages: 4, UsedAt: t0.Add(time.Duration(n) * time.Second),
			Numbers: history.Numbers{Model: []string{"gpt-4o-mini", "gpt-4o"}[n%2], Calibration: history.Calibration{Ratio: 1 + float64(n)/10}}})
	}
	type edit struct {
		line, messages int
	}
	for name, edits := range map[string][]edit{
		"one line, several edits":           {{2, 5}, {2, 5}, {2, 6}},
		"a shorter request keeps the tip":   {{3, 6}, {3, 2}},
		"lines in turn":                     {{0, 5}, {4, 5}, {0, 6}, {6, 5}},
		"a new line, then an eviction":      {{1, 5}, {20, 1}, {21, 1}, {1, 7}, {21, 2}},
		"a new line first, then known ones": {{30, 1}, {30, 2}, {2, 9}},
		// Turns of gpt-4o on lines of gpt-4o-mini take the calibration of
		// the record's most recently used gpt-4o line.
		"another model's lines": {{1, 5}, {2, 5}, {4, 5}, {3, 5}, {2, 6}, {6, 5}, {4, 6}},
	} {
		t.Run(name, func(t *testing.T) {
			shared := base
			shared.Lines = append([]state.Line(nil), base.Lines...)
			want, got := shared, shared
			e := lineEditor{rec: &got}
			for i, ed := range edits {
				ref := state.LineRef{ID: id(ed.line), Tip: id(100 + i), Messages: ed.messages}
				now := t0.Add(time.Hour + time.Duration(i)*time.Second)
				tr := editOf(i, ref)
				want.UpdateLine(ref, now, func(l *state.Line) { applyAnswered(&want, l, tr) })
				e.update(ref, now, tr)
			}
			if !reflect.DeepEqual(got.Lines, want.Lines) {
				t.Errorf("in place:\n%s\nupdateLine:\n%s", linesOf(got), linesOf(want))
			}
			if !reflect.DeepEqual(shared.Lines, base.Lines) {
				t.Errorf("a copy of the record sharing its lines changed:\n%s", linesOf(shared))
			}
		})
	}
}

// editOf is the i-th turn of a run, each kind in turn: usage that reads
// the calibration of the record's other lines of its model, a turn with
// cached tokens and dedups, one without usage.
func editOf(i int, ref state.LineRef) *Turn {
	u := wire.Usage{Found: true, InputTokens: 1000 + 100*i, CachedTokens: 50 * i}
	tr := &Turn{Line: ref, Model: "gpt-4o", RawAfter: 900 + 10*i, Forwarded: true, TokensBefore: 1000, Usage: u}
	switch i % 3 {
	case 1:
		tr.Dedups = []history.DedupMark{{Index: i}}
	case 2:
		tr.Usage = wire.Usage{}
	}
	return tr
}

func linesOf(r state.Record) string {
	var s string
	for _, l := range r.Lines {
		s += fmt.Sprintf("  %d tip %d messages %d turns %d calibration %.4f dedups %v at %d\n",
			l.ID[0], l.Tip[0], l.Messages, l.Turns, l.Calibration.Ratio, l.Dedups, l.UsedAt.Unix())
	}
	return s
}
