package compactor

import (
	"fmt"
	"testing"

	"github.com/ctxpress/ctxpress/internal/chatcheck"
	"github.com/ctxpress/ctxpress/wire"
)

// Message builders for readable tables.
func sys(text string) Message  { return Message{Role: wire.RoleInstruction, Text: text} }
func user(text string) Message { return Message{Role: wire.RoleUser, Text: text} }
func asst(text string) Message { return Message{Role: wire.RoleAssistant, Text: text} }
func result(id string) Message {
	return Message{Role: wire.RoleTool, ToolCallID: id, Text: "output of " + id}
}
func calls(ids ...string) Message {
	m := Message{Role: wire.RoleAssistant, Text: "calling tools"}
	for _, id := range ids {
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: id, Name: "bash", Arguments: `{"command":"ls"}`})
	}
	return m
}

// flat counts every message as 100 tokens.
func flat(int) int { return 100 }

func TestLeadingSystem(t *testing.T) {
	for _, tc := range []struct {
		msgs []Message
		want int
	}{
		{nil, 0},
		{[]Message{user("hi")}, 0},
		{[]Message{sys("a"), {Role: wire.RoleInstruction}, user("hi"), sys("late")}, 2},
	} {
		if got := LeadingSystem(tc.msgs); got != tc.want {
			t.Errorf("LeadingSystem(%d msgs) = %d, want %d", len(tc.msgs), got, tc.want)
		}
	}
}

func TestCut(t *testing.T) {
	chat := []Message{sys("s"), user("u1"), asst("a1"), user("u2"), asst("a2"), user("u3"), asst("a3"), user("u4"), asst("a4")}
	// An agent loop after a later user message: the three results of one
	// assistant message must stay with it.
	parallel := []Message{
		sys("s"), user("task"), calls("c1"), result("c1"),
		calls("p1", "p2", "p3"), result("p1"), result("p2"), result("p3"),
		user("now fix it"), calls("c2"), result("c2"), calls("c3"), result("c3"), asst("done"),
	}
	// Several user turns then a long tool loop after the last one.
	loop := []Message{
		sys("s"), user("u1"), asst("a1"), user("u2"), asst("a2"), user("last ask"),
		calls("x1"), result("x1"), calls("x2"), result("x2"), calls("x3"), result("x3"), calls("x4"), result("x4"),
	}
	// A tool loop after a "/compact" exchange, which is never forwarded.
	omit := func(m Message) Message { m.Omit = true; return m }
	afterCommand := []Message{
		sys("s"), user("task"), calls("x1"), result("x1"), calls("x2"), result("x2"), calls("x3"), result("x3"),
		omit(user("/compact")), omit(asst("[ctxpress] compacted")), user("go on"),
		calls("y1"), result("y1"), calls("y2"), result("y2"),
	}
	tests := []struct {
		name       string
		msgs       []Message
		from       int
		keepRecent int
		keepTokens int
		tokens     func(int) int
		want       int
		wantOK     bool
	}{
		{name: "keepRecent raw, cut moves back to the user turn", msgs: chat, from: 1, keepRecent: 3, want: 5, wantOK: true},
		{name: "keepRecent 2", msgs: chat, from: 1, keepRecent: 2, want: 7, wantOK: true},
		{name: "keepRecent 0 still keeps the latest user message", msgs: chat, from: 1, keepRecent: 0, want: 7, wantOK: true},
		{name: "keepRecentTokens: 350 tokens need the last 4 messages", msgs: chat, from: 1, keepRecent: 1, keepTokens: 350, tokens: flat, want: 5, wantOK: true},
		{name: "keepRecentTokens larger than keepRecent", msgs: chat, from: 1, keepRecent: 2, keepTokens: 550, tokens: flat, want: 3, wantOK: true},
		{name: "keepRecentTokens over everything", msgs: chat, from: 1, keepRecent: 2, keepTokens: 10000, tokens: flat, want: 1, wantOK: false},
		{name: "keepRecentTokens ignored without a counter", msgs: chat, from: 1, keepRecent: 2, keepTokens: 10000, want: 7, wantOK: true},
		{name: "parallel results stay with their call", msgs: parallel, from: 1, keepRecent: 8, want: 4, wantOK: true},
		{name: "parallel: cut before the user turn", msgs: parallel, from: 1, keepRecent: 6, want: 8, wantOK: true},
		{name: "parallel: inside the results moves before the call", msgs: parallel, from: 1, keepRecent: 7, want: 4, wantOK: true},
		{name: "an older latest user message may be summarised", msgs: loop, from: 1, keepRecent: 2, want: 12, wantOK: true},
		{name: "from > 0 respected", msgs: chat, from: 3, keepRecent: 3, want: 5, wantOK: true},
		{name: "from at the last cut point: nothing new", msgs: chat, from: 5, keepRecent: 4, want: 5, wantOK: false},
		{name: "one new message after from", msgs: chat, from: 5, keepRecent: 3, want: 6, wantOK: true},
		{name: "fewer messages than keepRecent after from", msgs: chat, from: 4, keepRecent: 6, want: 4, wantOK: false},
		{name: "from past the end", msgs: chat, from: 20, keepRecent: 1, want: 20, wantOK: false},
		{name: "empty", msgs: nil, from: 0, keepRecent: 6, want: 0, wantOK: false},
		{name: "single-ask agent loop compacts", msgs: parallel[:8], from: 1, keepRecent: 2, want: 4, wantOK: true},
		{name: "a /compact exchange in the tail is not counted in keepRecent", msgs: afterCommand, from: 1, keepRecent: 6, want: 6, wantOK: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Cut(tc.msgs, tc.from, tc.keepRecent, tc.keepTokens, tc.tokens)
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("Cut = (%d, %v), want (%d, %v)", got, ok, tc.want, tc.wantOK)
			}
			if ok {
				if err := checkCut(tc.msgs, tc.from, got); err != nil {
					t.Fatal(err)
				}
				if raw := len(tc.msgs) - got; raw < tc.keepRecent {
					t.Errorf("%d raw messages, keepRecent %d", raw, tc.keepRecent)
				}
				if tc.tokens != nil {
					sum := 0
					for i := got; i < len(tc.msgs); i++ {
						sum += tc.tokens(i)
					}
					if sum < tc.keepTokens {
						t.Errorf("raw tail has %d tokens, keepRecentTokens %d", sum, tc.keepTokens)
					}
				}
			}
		})
	}
}

// TestCutOrphanTail: a result whose call is already summarised is never
// the first raw message, even when it has no call id the cut can see.
func TestCutOrphanTail(t *testing.T) {
	msgs := []Message{
		sys("s"), user("u1"), asst("a"), user("u2"),
		{Role: wire.RoleAssistant, ToolCalls: []ToolCall{{Name: "legacy"}}}, {Role: wire.RoleTool, Name: "legacy", Text: "x"},
		user("u3"), asst("a3"),
	}
	for keep := 1; keep <= len(msgs); keep++ {
		cut, ok := Cut(msgs, 1, keep, 0, nil)
		if !ok {
			continue
		}
		if err := checkCut(msgs, 1, cut); err != nil {
			t.Errorf("keepRecent %d: %v", keep, err)
		}
		if cut == 5 {
			t.Errorf("keepRecent %d: the function result opens the raw tail", keep)
		}
	}
}

// checkCut verifies the invariants every cut must hold.
func checkCut(msgs []Message, from, cut int) error {
	if cut <= from || cut >= len(msgs) {
		return fmt.Errorf("cut %d outside (%d, %d)", cut, from, len(msgs))
	}
	if msgs[cut].isResult() {
		return fmt.Errorf("first raw message %d is a %s result", cut, msgs[cut].Role)
	}
	summarised := map[string]bool{}
	for _, m := range msgs[:cut] {
		for _, tc := range m.ToolCalls {
			summarised[tc.ID] = true
		}
	}
	raw := map[string]bool{}
	for i, m := range msgs[cut:] {
		for _, tc := range m.ToolCalls {
			raw[tc.ID] = true
		}
		if m.Role == wire.RoleTool && summarised[m.ToolCallID] && !raw[m.ToolCallID] {
			return fmt.Errorf("raw result %d (%s) of a summarised call", cut+i, m.ToolCallID)
		}
	}
	return nil
}

// TestCutCorpus compacts every corpus trace repeatedly (each cut becomes
// the next from, as the stored summary's coverage grows) and at a few
// arbitrary starting points, and checks each compacted request is one a
// strict server accepts, with a user or a system summary placeholder.
func TestCutCorpus(t *testing.T) {
	cuts := 0
	for _, tr := range loadTraces(t) {
		t.Run(tr.name, func(t *testing.T) {
			lead := LeadingSystem(tr.msgs)
			tokens := tokensOf(tr.msgs)
			try := func(from, keepTokens int) (int, bool) {
				cut, ok := Cut(tr.msgs, from, 6, keepTokens, tokens)
				if !ok {
					if cut != from {
						t.Errorf("from %d: Cut = (%d, false), want cut == from", from, cut)
					}
					return cut, false
				}
				cuts++
				if err := checkCut(tr.msgs, from, cut); err != nil {
					t.Errorf("from %d: %v", from, err)
				}
				placeholders := []string{`{"role":"user","content":"<conversation_summary>…</conversation_summary>"}`}
				reinsert := []string{}
				if u := LatestUserIn(tr.msgs, from, cut); u >= 0 {
					reinsert = append(reinsert, tr.raw[u]) // kept verbatim after the summary
				}
				if from <= lastUser(tr.msgs) {
					// Past the last user message (only the arbitrary froms
					// below), the raw tail has none, so only summary_placement
					// user gives a request with a user message.
					placeholders = append(placeholders, `{"role":"system","content":"<conversation_summary>…</conversation_summary>"}`)
				}
				for _, placeholder := range placeholders {
					raw := append(append(append(append([]string{}, tr.raw[:lead]...), placeholder), reinsert...), tr.raw[cut:]...)
					if err := chatcheck.ValidateChat(chatBody(raw)); err != nil {
						t.Errorf("from %d cut %d: compacted request invalid: %v", from, cut, err)
					}
				}
				return cut, true
			}
			for _, keepTokens := range []int{0, 200, 2000} {
				for from, ok := lead, true; ok; {
					from, ok = try(from, keepTokens)
				}
			}
			for _, from := range []int{lead + 1, lead + 3, len(tr.msgs) / 2} {
				try(from, 200)
			}
		})
	}
	if cuts == 0 {
		t.Error("no corpus trace could be compacted at all")
	}
	t.Logf("%d compactions checked", cuts)
}

// TestCutCorpusSingleAsk: agent loops whose only user message is the
// opening task compact too; the ask is kept verbatim after the summary.
func TestCutCorpusSingleAsk(t *testing.T) {
	loops := 0
	for _, tr := range loadTraces(t) {
		users := 0
		for _, m := range tr.msgs {
			if m.Role == wire.RoleUser {
				users++
			}
		}
		lead := LeadingSystem(tr.msgs)
		if users != 1 || tr.msgs[lead].Role != wire.RoleUser || len(tr.msgs) < lead+12 {
			continue
		}
		loops++
		cut, ok := Cut(tr.msgs, lead, 6, 0, nil)
		if !ok {
			t.Errorf("%s: single-ask loop of %d messages not compactable", tr.name, len(tr.msgs))
			continue
		}
		if u := LatestUserIn(tr.msgs, lead, cut); u != lead {
			t.Errorf("%s: LatestUserIn = %d, want the ask at %d", tr.name, u, lead)
		}
	}
	if loops == 0 {
		t.Error("no single-ask agent loop in the corpus")
	}
}

// TestCutNeverSummarisesLeadingSystem: a from of 0 cannot fold the system
// prompt into the summary that is placed inside it.
func TestCutNeverSummarisesLeadingSystem(t *testing.T) {
	msgs := []Message{sys("s1"), sys("s2"), user("u1"), asst("a1"), user("u2"), asst("a2")}
	cut, ok := Cut(msgs, 0, 1, 0, nil)
	if !ok || cut != 4 {
		t.Fatalf("Cut = (%d, %v), want (4, true)", cut, ok)
	}
	if cut, ok := Cut(msgs[:2], 0, 1, 0, nil); ok || cut != 2 {
		t.Errorf("system only: Cut = (%d, %v), want (2, false)", cut, ok)
	}
}

// A history limit cuts in blocks: past the limit down to about half, on a
// turn boundary, and then not again until the limit is passed, whatever
// prefix of the conversation a request carries.
func TestTrimHistory(t *testing.T) {
	chat := []Message{sys("s"), user("u1"), asst("a1"), user("u2"), asst("a2"), user("u3"), asst("a3"), user("u4"), asst("a4"), user("u5"), asst("a5")}
	loop := []Message{sys("s"), user("task")}
	for i := range 12 {
		id := fmt.Sprintf("c%d", i)
		loop = append(loop, calls(id), result(id))
	}
	loop = append(loop, asst("done"), user("now the docs"), calls("d1"), result("d1"), asst("docs done"))
	tests := []struct {
		name string
		msgs []Message
		max  int
		want int
	}{
		{"no limit: nothing left out", chat, 0, 1},
		{"within the limit: nothing left out", chat, 10, 1},
		{"one past the limit: down to half, before a user turn", chat[:7], 5, 5},
		{"the cut stays while the history grows back to the limit", chat[:10], 5, 5},
		{"past the limit again: the next block goes", chat, 5, 9},
		{"limit 4: the user turn nearest half", chat, 4, 9},
		{"an agent loop is cut before a call, never between it and its result", loop[:26], 5, 22},
		{"the nearest user turn wins over a call", loop, 5, 27},
		{"limit 1 still keeps a call with its result", loop[:8], 1, 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := TrimHistory(tc.msgs, tc.max); got != tc.want {
				t.Fatalf("TrimHistory(%d messages, %d) = %d, want %d", len(tc.msgs), tc.max, got, tc.want)
			}
		})
	}
	// Over every prefix of both conversations: the cut only moves forward,
	// on a turn boundary, and moves once per block, not once per message.
	for _, conv := range [][]Message{chat, loop} {
		for _, limit := range []int{2, 4, 6, 9} {
			prev, moves := 1, 0
			for k := 2; k <= len(conv); k++ {
				cut := TrimHistory(conv[:k], limit)
				switch {
				case cut < prev:
					t.Fatalf("limit %d, %d messages: the cut moved back from %d to %d", limit, k, prev, cut)
				case cut > prev:
					moves++
					if err := checkCut(conv[:k], 1, cut); err != nil {
						t.Fatalf("limit %d, %d messages: %v", limit, k, err)
					}
				}
				prev = cut
			}
			if most := (len(conv)-1)/max(limit/2, 1) + 1; moves > most {
				t.Errorf("limit %d over %d messages: the cut moved %d times, at most %d expected", limit, len(conv), moves, most)
			}
		}
	}
}

// The cut never treats ctxpress's own /compact exchange as a user turn.
func TestCutSkipsOmittedUser(t *testing.T) {
	cmd := Message{Role: wire.RoleUser, Text: "/compact", Omit: true}
	reply := Message{Role: wire.RoleAssistant, Text: "[ctxpress] compacted", Omit: true}
	msgs := []Message{sys("s"), user("u1"), asst("a1"), cmd, reply, calls("c1"), result("c1"), asst("a2")}
	if got, ok := Cut(msgs, 1, 2, 0, nil); !ok || got != 5 {
		t.Errorf("Cut = %d, %v; want 5, before the call (the /compact is no user turn to move back to)", got, ok)
	}
	if u := LatestUserIn(msgs, 1, len(msgs)); u != 1 {
		t.Errorf("LatestUserIn = %d, want 1: the /compact command is not an ask", u)
	}
}

func TestFitCut(t *testing.T) {
	// sys, user, (assistant call, tool result) x3, user: tokens 10 each.
	msgs := []Message{{Role: wire.RoleInstruction}, {Role: wire.RoleUser}}
	for i := range 3 {
		id := string(rune('a' + i))
		msgs = append(msgs, Message{Role: wire.RoleAssistant, ToolCalls: []ToolCall{{ID: id}}}, Message{Role: wire.RoleTool, ToolCallID: id})
	}
	msgs = append(msgs, Message{Role: wire.RoleUser})
	ten := func(int) int { return 10 }
	for _, c := range []struct {
		what   string
		budget int
		want   int
		wantOK bool
	}{
		{"everything fits: the first boundary", 70, 2, true},
		{"the oldest turn goes", 50, 4, true},
		{"never between a call and its result", 45, 6, true},
		{"only the last message fits", 10, 8, true},
		{"nothing fits: keep the last boundary", 5, 8, true},
	} {
		got, ok := FitCut(msgs, 1, c.budget, ten)
		if got != c.want || ok != c.wantOK {
			t.Errorf("%s: FitCut(budget %d) = %d, %v; want %d, %v", c.what, c.budget, got, ok, c.want, c.wantOK)
		}
	}
}
