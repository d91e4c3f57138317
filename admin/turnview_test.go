package admin

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire/chat"
	"github.com/ctxpress/ctxpress/wire/messages"
)

func TestCompactionMarks(t *testing.T) {
	at := func(s int) time.Time { return keptT0.Add(time.Duration(s) * time.Second) }
	turn := func(s, before, after int, compacted bool, covered int) state.Turn {
		t := state.Turn{At: at(s), TokensBefore: before, TokensAfter: after, Compacted: compacted}
		if covered > 0 {
			t.Edits = []history.Edit{{Kind: history.EditSummarised, Index: 1, Count: covered, Before: before - after, After: 500}}
		}
		return t
	}
	summary := func(s float64, covered, before, after int) state.SummaryEntry {
		return state.SummaryEntry{At: keptT0.Add(time.Duration(s * float64(time.Second))), CoveredMessages: covered, TokensBefore: before, TokensAfter: after}
	}
	for _, tc := range []struct {
		name  string
		turns []state.Turn
		sums  []state.SummaryEntry
		want  map[int]CompactionMark
	}{
		{"no compaction: no mark", []state.Turn{turn(1, 100, 100, false, 0), turn(2, 200, 180, false, 0)}, nil, nil},
		{"a compaction before forwarding: the turn that wrote it, with its summary's numbers",
			[]state.Turn{turn(1, 9000, 9000, false, 0), turn(3, 9800, 2100, true, 30), turn(4, 10500, 2800, false, 30)},
			[]state.SummaryEntry{summary(2.4, 30, 9700, 2050)},
			map[int]CompactionMark{1: {TokensBefore: 9700, TokensAfter: 2050, CoveredMessages: 30}}},
		{"a summary prepared in the background: the first turn to send it",
			[]state.Turn{turn(1, 6000, 6000, false, 0), turn(3, 6500, 6500, false, 0), turn(5, 7000, 1900, false, 24), turn(6, 7600, 2500, false, 24)},
			[]state.SummaryEntry{summary(2, 24, 6000, 1800)},
			map[int]CompactionMark{2: {TokensBefore: 6000, TokensAfter: 1800, CoveredMessages: 24, Prepared: true}}},
		{"a prepared summary never sent marks nothing",
			[]state.Turn{turn(1, 6000, 6000, false, 0), turn(3, 6500, 6500, false, 0)},
			[]state.SummaryEntry{summary(2, 24, 6000, 1800)}, nil},
		{"a compaction older than the summary history: the turn's own numbers, the forwarded size before it",
			[]state.Turn{turn(1, 9000, 8800, false, 0), turn(3, 9800, 2100, true, 30)}, nil,
			map[int]CompactionMark{1: {TokensBefore: 8800, TokensAfter: 2100}}},
		{"turns of an earlier version (no edits): the compacted ones",
			[]state.Turn{turn(1, 9000, 2000, true, 0), turn(2, 9500, 2500, false, 0)},
			[]state.SummaryEntry{summary(0.5, 30, 8800, 1900)},
			map[int]CompactionMark{0: {TokensBefore: 8800, TokensAfter: 1900, CoveredMessages: 30}}},
		{"two compactions, each with its own summary",
			[]state.Turn{turn(2, 9000, 2000, true, 20), turn(3, 9500, 2500, false, 20), turn(5, 12000, 2200, true, 28)},
			[]state.SummaryEntry{summary(1.5, 20, 8900, 1950), summary(4.5, 28, 9000, 2150)},
			map[int]CompactionMark{0: {TokensBefore: 8900, TokensAfter: 1950, CoveredMessages: 20}, 2: {TokensBefore: 9000, TokensAfter: 2150, CoveredMessages: 28}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := compactionMarks(tc.turns, tc.sums)
			for i, m := range got {
				w, marked := tc.want[i]
				switch {
				case !marked && m != nil:
					t.Errorf("turn %d marked %+v", i, *m)
				case marked && (m == nil || *m != w):
					t.Errorf("turn %d: %v, want %+v", i, m, w)
				}
			}
		})
	}
}

// A chat body as the turn view shows it: each message's role, tool,
// size and text (the middle of a long one left out), the edit on it as
// sent, and the summary marked where it is forwarded.
func TestViewBody(t *testing.T) {
	long := strings.Repeat("line of build output\n", 400)
	sent := []byte(`{"model":"gpt-4o","messages":[{"role":"system","content":"You are a coding agent."},` +
		`{"role":"user","content":"fix it"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"make\"}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"` + strings.ReplaceAll(long, "\n", `\n`) + `"}]}`)
	edits := []history.Edit{{Kind: history.EditSquashed, Index: 3, Count: 1, Name: "bash", Before: 2400, After: 300}}
	v := viewBody(chat.Format{}, sent, edits)
	if v.Bytes != len(sent) || len(v.Messages) != 4 {
		t.Fatalf("view: %d bytes, %d messages", v.Bytes, len(v.Messages))
	}
	call, result := v.Messages[2], v.Messages[3]
	if call.Name != "bash" || !strings.Contains(call.Text, `→ bash {"command":"make"}`) {
		t.Errorf("the call: %+v", call)
	}
	if result.Role != "tool" || result.Name != "bash" || result.Edit != "squashed" || result.OmittedBytes == 0 ||
		!strings.Contains(result.Text, "bytes not shown") || len(result.Text) > viewHead+viewTail+100 {
		t.Errorf("the squashed result: %+v", result)
	}
	if v.Messages[1].Edit != "" || v.Messages[1].Text != "fix it" {
		t.Errorf("an untouched message: %+v", v.Messages[1])
	}
	forwarded := []byte(`{"model":"gpt-4o","messages":[{"role":"system","content":"You are a coding agent.\n\n<conversation_summary>\n## Active Task\nfix it\n</conversation_summary>"},{"role":"user","content":"go on"}]}`)
	fv := viewBody(chat.Format{}, forwarded, nil)
	if !fv.Messages[0].Summary || fv.Messages[1].Summary {
		t.Errorf("the summary's message is not marked: %+v", fv.Messages)
	}
	anthropic := []byte(`{"model":"claude-sonnet-4-5","max_tokens":100,"system":[{"type":"text","text":"You are Claude Code."},` +
		`{"type":"text","text":"<conversation_summary>s</conversation_summary>"}],"messages":[{"role":"user","content":"go on"}]}`)
	if got := viewBody(messages.Format{}, anthropic, nil); got.Instructions != "You are Claude Code.\n<conversation_summary>s</conversation_summary>" ||
		len(got.Messages) != 1 || got.Messages[0].Text != "go on" {
		t.Errorf("a Messages body, its system blocks: %+v", got)
	}
	if got := viewBody(nil, sent, nil); got.Bytes != len(sent) || len(got.Messages) != 0 {
		t.Errorf("no format: %+v", got)
	}
}

func TestCutMiddle(t *testing.T) {
	short := strings.Repeat("é", 100)
	if got, n := cutMiddle(short, 10, 10); got != short || n != 0 {
		t.Errorf("a short text was cut: %d", n)
	}
	long := strings.Repeat("é", 1000) // 2000 bytes
	got, n := cutMiddle(long, 101, 101)
	if n == 0 || !strings.HasPrefix(got, strings.Repeat("é", 50)+"\n… ") || !strings.HasSuffix(got, " …\n"+strings.Repeat("é", 50)) {
		t.Errorf("cut: %d bytes left out, %q", n, got)
	}
	if len(long)-n != 200 {
		t.Errorf("%d bytes kept, want 200 (on rune boundaries)", len(long)-n)
	}
	if !reflect.DeepEqual(editInfos(nil), []EditInfo{}) {
		t.Error("no edits are not an empty list")
	}
}
