package rewrite

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/internal/messagestest"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// shapes reads a history written as one letter per message: u user ask,
// a assistant with thinking, A assistant without, t tool results, s a
// standing system message, c an omitted /compact command.
func shapes(h string) []boundShape {
	out := make([]boundShape, len(h))
	for i, c := range h {
		switch c {
		case 'u':
			out[i].role = wire.RoleUser
		case 'c':
			out[i] = boundShape{role: wire.RoleUser, omit: true}
		case 'a':
			out[i] = boundShape{role: wire.RoleAssistant, bound: true}
		case 'A':
			out[i].role = wire.RoleAssistant
		case 't':
			out[i].role = wire.RoleTool
		case 's':
			out[i].role = wire.RoleInstruction
		}
	}
	return out
}

func TestThinkingRulesAfterASummary(t *testing.T) {
	for _, tc := range []struct {
		rule             string
		history          string
		cut, since       int
		leaveOutBefore   int
		askToDrop        bool
		onlyThinkingKept bool // the messages left out before end have nothing but thinking
	}{
		{"no summary, no cut: nothing changes", "usatatu", 0, 7, -1, false, false},
		{"compacted at a new user turn: the kept turns' thinking is left out, nothing to drop",
			"usatatatAu", 5, 10, 9, false, false},
		{"the next request of that turn's tool loop forwards the new thinking, and asks to drop",
			"usatatatAuat", 5, 10, 9, true, false},
		{"later user turns leave nothing more out: the compaction's ask stays the end",
			"usatatatAuatAuat", 5, 10, 9, true, false},
		{"compacted inside a tool loop whose ask is kept: earlier turns left out, the loop asks to drop",
			"usatatAuatatat", 3, 14, 7, true, false},
		{"compacted inside a tool loop whose ask is covered: nothing left out, the loop asks to drop",
			"usatatatatat", 5, 12, -1, true, false},
		{"since unknown (a branch stored before it was kept): nothing left out, drop asked",
			"usatatatAuat", 5, 0, -1, true, false},
		{"a /compact command is no user ask", "usatatAuatc", 3, 11, 7, true, false},
		{"a message of thinking alone cannot be emptied: it is kept, and dropping is asked",
			"usatataAu", 5, 9, 8, true, true},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			ms := shapes(tc.history)
			end := leaveOutBefore(ms, 0, tc.cut, tc.since)
			if end != tc.leaveOutBefore {
				t.Fatalf("leave out before %d, want %d", end, tc.leaveOutBefore)
			}
			if got := dropAsked(ms, 0, tc.cut, end, func(int) bool { return tc.onlyThinkingKept }); got != tc.askToDrop {
				t.Fatalf("drop asked %v, want %v", got, tc.askToDrop)
			}
		})
	}
}

// claudeAsks is a short session of three asks with tool loops.
func claudeAsks(t *testing.T) []step {
	s := claudeScript(t)
	return append(s[:12:12], s[18:]...) // asks 1 and 2 and the summary ask
}

// TestThinkingOfKeptTurnsIsLeftOutAtANewUserTurn: a compaction at a new
// user turn leaves out the thinking of the turns it keeps (their prefix
// changed) and does not ask the upstream to drop any; the next requests
// of the turn keep them out and forward the new thinking.
func TestThinkingOfKeptTurnsIsLeftOutAtANewUserTurn(t *testing.T) {
	s := newClaudeSession(t, Config{Squash: &squash.Config{}, Dedup: DefaultDedupConfig()})
	s.run(claudeAsks(t)[:9], map[int]bool{6: true}, 4)
	at := s.results[6]
	if at.Applied != 0 || at.ThinkingLeftOut == 0 || at.DropMismatched || strings.Contains(string(s.bodies[6]), `"thinking","thinking"`) {
		t.Fatalf("at the compaction: applied %d, %d left out, drop %v", at.Applied, at.ThinkingLeftOut, at.DropMismatched)
	}
	for i := 7; i < len(s.results); i++ {
		if r := s.results[i]; r.ThinkingLeftOut != at.ThinkingLeftOut || !r.DropMismatched || len(s.forwarded[i].Dropped) != 0 {
			t.Errorf("request %d: %d left out, drop %v, %d dropped", i, r.ThinkingLeftOut, r.DropMismatched, len(s.forwarded[i].Dropped))
		}
	}
	if b := s.breaks(); fmt.Sprint(b) != "[6]" {
		t.Errorf("prompts break at %v", b)
	}
}

// TestCompactionInsideAToolLoopAsksToDropMismatchedThinking: the latest
// thinking block of a tool loop may not be left out, so a compaction there
// keeps it and asks the upstream to drop what no longer matches; every
// later request with the summary asks so too.
func TestCompactionInsideAToolLoopAsksToDropMismatchedThinking(t *testing.T) {
	s := newClaudeSession(t, Config{Squash: &squash.Config{}, Dedup: DefaultDedupConfig()})
	s.run(claudeAsks(t), map[int]bool{9: true}, 4)
	at := s.results[9]
	if at.Applied != 0 || !at.DropMismatched || len(s.forwarded[9].Dropped) == 0 {
		t.Fatalf("at the compaction: applied %d, drop %v, %v dropped", at.Applied, at.DropMismatched, s.forwarded[9].Dropped)
	}
	if !gjson.GetBytes(s.bodies[9], `thinking.block_binding.prefix_mismatch_behavior`).Exists() ||
		gjson.GetBytes(s.bodies[9], "thinking.display").String() != "omitted" {
		t.Fatalf("thinking: %s", gjson.GetBytes(s.bodies[9], "thinking").Raw)
	}
	for i := 10; i < len(s.results); i++ {
		if !s.results[i].DropMismatched || !s.forwarded[i].DropBlock {
			t.Errorf("request %d does not ask to drop", i)
		}
	}
}

// TestRepeatedResultIsStubbedNotTheEarlierOne: in a history with thinking,
// a Read that returns what an earlier Read of the same file returned is
// replaced by a stub pointing back to it, from its first request on; the
// earlier result is sent as it was on every turn.
func TestRepeatedResultIsStubbedNotTheEarlierOne(t *testing.T) {
	s := newClaudeSession(t, Config{Dedup: DefaultDedupConfig()})
	s.run(claudeAsks(t)[:11], nil, 4)
	first := `"content":` + string(wire.AppendJSONString(nil, catN("ops", 120)))
	for i := 8; i < len(s.bodies); i++ {
		body := string(s.bodies[i])
		if strings.Count(body, first) != 1 || strings.Contains(body, fmt.Sprintf(RepeatStub, "toolu_008_0")) != (i >= 10) {
			t.Fatalf("request %d: the first read %d times, stub %v", i, strings.Count(body, first), strings.Contains(body, "toolu_008_0 above"))
		}
	}
	if s.results[10].Deduped != 1 || s.results[10].DedupSavedTokens <= 0 {
		t.Errorf("deduped %d, saved %d", s.results[10].Deduped, s.results[10].DedupSavedTokens)
	}
	if b := s.breaks(); len(b) != 0 {
		t.Errorf("prompts break at %v", b)
	}
}

// TestClaudeCodeSystemMessageIsNeverSummarised: the role:"system" message
// Claude Code sends as messages[1] (its environment, CLAUDE.md) is kept
// verbatim at the end of the top-level system when a summary covers it,
// before the summary, and is not in what the summariser reads.
func TestClaudeCodeSystemMessageIsNeverSummarised(t *testing.T) {
	s := newClaudeSession(t, Config{Squash: &squash.Config{}, Dedup: DefaultDedupConfig()})
	s.run(claudeAsks(t)[:7], map[int]bool{6: true}, 4)
	env := gjson.Parse(s.msgs[1]).Get("content").String()
	sys := gjson.GetBytes(s.bodies[6], "system").Array()
	if len(sys) != 5 || sys[3].Get("text").String() != env || !strings.HasPrefix(sys[4].Get("text").String(), "<conversation_summary>") {
		t.Fatalf("system: %d blocks", len(sys))
	}
	for _, m := range gjson.GetBytes(s.bodies[6], "messages").Array() {
		if m.Get("role").String() == "system" {
			t.Fatal("the system message is still among the messages")
		}
	}
	res := s.p.RewriteWith(s.body(), Options{})
	c, ok := res.Compaction(4, 0)
	if !ok || c.From != 0 || !c.Messages[1].Omit || c.Messages[0].Omit {
		t.Fatalf("compaction: ok %v from %d, omit %v %v", ok, c.From, c.Messages[0].Omit, c.Messages[1].Omit)
	}
}

// TestSummaryGoesAtTheEndOfTheTopLevelSystem: Messages has no leading
// instruction message (Lead 0) but a system of its own: the summary block
// ends it, the client's markers untouched (3 of them, Claude Code's), and
// no user message carries it.
func TestSummaryGoesAtTheEndOfTheTopLevelSystem(t *testing.T) {
	s := newClaudeSession(t, Config{})
	s.run(claudeAsks(t)[:7], map[int]bool{6: true}, 4)
	body := s.bodies[6]
	if n := strings.Count(string(body), "<conversation_summary>"); n != 1 || s.results[6].Lead != 0 {
		t.Fatalf("%d blocks, lead %d", n, s.results[6].Lead)
	}
	sys := gjson.GetBytes(body, "system").Array()
	if !strings.HasPrefix(sys[len(sys)-1].Get("text").String(), "<conversation_summary>") || sys[len(sys)-1].Get("cache_control").Exists() {
		t.Fatalf("last system block %s", sys[len(sys)-1].Raw)
	}
	in := gjson.GetBytes(s.body(), "system").Array()
	for i, b := range in {
		if sys[i].Raw != b.Raw {
			t.Fatalf("system block %d changed", i)
		}
	}
	if s.forwarded[6].Markers != 3 {
		t.Errorf("%d markers", s.forwarded[6].Markers)
	}
}

// TestSquashAtFirstSightIsStickyAcrossTurnsAndRestarts: a squashed test
// log is forwarded with the same bytes from its first request on, by the
// pipeline that squashed it and by a new one (request checks a restarted
// pipeline on every request).
func TestSquashAtFirstSightIsStickyAcrossTurnsAndRestarts(t *testing.T) {
	s := newClaudeSession(t, Config{Squash: &squash.Config{}})
	s.run(claudeAsks(t)[:10], nil, 4)
	first := gjson.GetBytes(s.bodies[7], "messages.15.content.0.content").Raw
	if s.results[7].Squashed != 1 || len(first) >= len(testLog(400, 17, 230)) {
		t.Fatalf("request 7: squashed %d, %d bytes", s.results[7].Squashed, len(first))
	}
	for i := 8; i < len(s.bodies); i++ {
		if got := gjson.GetBytes(s.bodies[i], "messages.15.content.0.content").Raw; got != first {
			t.Fatalf("request %d forwards the log otherwise", i)
		}
	}
	if b := s.breaks(); len(b) != 0 {
		t.Errorf("prompts break at %v", b)
	}
}

// TestCutNeverOpensTheKeptHistoryWithTheSystemMessage: a cut right after
// Claude Code's opening ask would open the kept history with its
// role:"system" message, which the API refuses there; the cut moves past
// it (it is kept in the top-level system anyway).
func TestCutNeverOpensTheKeptHistoryWithTheSystemMessage(t *testing.T) {
	s := newClaudeSession(t, Config{})
	s.run(claudeAsks(t)[:3], nil, 4)
	in := s.body()
	n := len(s.msgs)
	c, ok := s.p.RewriteWith(in, Options{}).Compaction(n-1, 0)
	if !ok || c.Cut != 2 {
		t.Fatalf("ok %v, cut %d, want 2", ok, c.Cut)
	}
	res := s.p.RewriteWith(in, Options{Branches: []history.Branch{{Summary: "s", Covered: c.Covered, Hash: c.Hash, Since: c.Since}}})
	if _, err := messagestest.Check(res.Body, messagestest.Options{}); err != nil || res.Applied != 0 {
		t.Fatalf("applied %d: %v", res.Applied, err)
	}
}
