package proxy

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/state"
)

// TestLineEditorEditsAsUpdateLineDoes: the edits overlay makes in place
// leave the record as one updateLine (one clone) per edit would, new lines
// and evictions included, and never touch a copy of the record that shares
// its lines (the store's cached one).
func TestLineEditorEditsAsUpdateLineDoes(t *testing.T) {
	id := func(n int) state.ChainHash { return state.ChainHash{byte(n)} }
	t0 := time.Unix(1000, 0)
	var base state.Record
	for n := range state.MaxLines - 1 {
		base.Lines = append(base.Lines, state.Line{ID: id(n), Tip: id(n), Messages: 4, UsedAt: t0.Add(time.Duration(n) * time.Second)})
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
	} {
		t.Run(name, func(t *testing.T) {
			shared := base
			shared.Lines = append([]state.Line(nil), base.Lines...)
			want, got := shared, shared
			e := lineEditor{rec: &got}
			for i, ed := range edits {
				ref := lineRef{id: id(ed.line), tip: id(100 + i), messages: ed.messages}
				now := t0.Add(time.Hour + time.Duration(i)*time.Second)
				fn := func(l *state.Line) { l.Turns++; l.LastSent = i }
				updateLine(&want, ref, now, fn)
				e.update(ref, now, fn)
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

func linesOf(r state.Record) string {
	var s string
	for _, l := range r.Lines {
		s += fmt.Sprintf("  %d tip %d messages %d turns %d sent %d at %d\n", l.ID[0], l.Tip[0], l.Messages, l.Turns, l.LastSent, l.UsedAt.Unix())
	}
	return s
}
