package rewrite

import (
	"slices"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// Regression tests over scripted multi-turn conversations: what a client
// and its upstream see, turn after turn.

// userTurns returns a chat of n user/assistant exchanges after lead.
func userTurns(lead []string, n int) []string {
	msgs := append([]string{}, lead...)
	for i := range n {
		msgs = append(msgs,
			`{"role":"user","content":"question `+itoa(i)+`: what does step `+itoa(i)+` of the build do?"}`,
			`{"role":"assistant","content":"Step `+itoa(i)+` compiles package `+itoa(i)+` and runs its tests."}`)
	}
	return msgs
}

// agentSession returns an agent conversation after lead with several user
// asks, each followed by a loop of tool calls and a closing remark.
func agentSession(lead []string, asks, loop int) []string {
	msgs := append([]string{}, lead...)
	for a := range asks {
		msgs = append(msgs, `{"role":"user","content":"ask `+itoa(a)+`: fix the failing test in pkg`+itoa(a)+`"}`)
		for i := range loop {
			id := "c" + itoa(a) + "_" + itoa(i)
			msgs = append(msgs,
				callMsg(id, "bash", jsonString(`{"command":"go test ./pkg`+itoa(a)+` -run T`+itoa(i)+`"}`)),
				resultMsg(id, "--- FAIL: T"+itoa(i)+"\n"+strings.Repeat("expected 1, got 2\n", 3)))
		}
		msgs = append(msgs, `{"role":"assistant","content":"Fixed pkg`+itoa(a)+`."}`)
	}
	return msgs
}

// Item 9. A history cap must not break the prompt cache on every turn: the
// cut moves in blocks, and between two moves every forwarded request
// extends the previous one byte for byte. The first message kept is a user
// message, or the latest user message before it is re-sent, so the roles
// still alternate.
func TestHistoryCapKeepsPromptCacheBetweenTrims(t *testing.T) {
	sys := []string{`{"role":"system","content":"agent"}`}
	tests := []struct {
		name string
		msgs []string
		max  int
	}{
		{"chat", userTurns(sys, 30), 10},
		{"chat, small cap", userTurns(sys, 30), 4},
		{"agent loops", agentSession(sys, 4, 6), 10},
		{"agent loops, cap inside one loop", agentSession(sys, 3, 8), 6},
		{"no system message", agentSession(nil, 4, 5), 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := New(Config{Format: chatFormat})
			ts := replay(t, p, tc.msgs, everyTurn(tc.msgs, 2), Options{MaxHistoryMessages: tc.max})
			trims := 0
			for i, tr := range ts {
				res := tr.res
				if kept := res.Messages - res.Lead - res.Trimmed; res.Trimmed > 0 && kept > max(tc.max, 2)+1 {
					t.Errorf("turn %d: %d messages forwarded over a cap of %d", tr.k, kept, tc.max)
				}
				if i == 0 {
					continue
				}
				moved := res.Trimmed != ts[i-1].res.Trimmed || (res.view.resend >= 0) != (ts[i-1].res.view.resend >= 0)
				if moved {
					trims++
				} else if !extends(ts[i-1].res.Body, res.Body) {
					t.Errorf("turn %d does not extend turn %d, and the cut did not move", tr.k, ts[i-1].k)
				}
			}
			t.Logf("%d turns, %d trims, %d breaks of the cached prefix", len(ts), trims, len(breaks(ts)))
			// A trim goes down to about half the cap: the next one is
			// about cap/2 messages later, not one turn later.
			if most := len(tc.msgs)/max(tc.max/2-1, 1) + 1; trims > most || len(breaks(ts)) > most {
				t.Errorf("%d trims, %d breaks of the cached prefix over %d turns; at most %d expected", trims, len(breaks(ts)), len(ts), most)
			}
		})
	}
}

// Item 10. With the user placement, the summary block must not be a user
// message followed by another user message (strict chat templates refuse
// that): it is merged into the user message that follows, the same bytes
// on every turn until the next compaction.
func TestUserPlacementNeverSendsTwoUserMessagesInARow(t *testing.T) {
	sys := []string{`{"role":"system","content":"agent"}`}
	parts := append([]string{}, userTurns(sys, 12)...)
	for i := 1; i < len(parts); i += 2 {
		parts[i] = `{"role":"user","content":[{"type":"text","text":"question ` + itoa(i) + `"},{"type":"image_url","image_url":{"url":"data:,x"}}]}`
	}
	tests := []struct {
		name string
		msgs []string
		keep int
		opts Options
	}{
		{"the tail starts with a user message", userTurns(sys, 12), 6, Options{Placement: PlacementUser}},
		{"the tail starts with a call: the block joins the re-sent ask", agentSession(sys, 2, 8), 5, Options{Placement: PlacementUser}},
		{"array content: the block is a first text part", parts, 6, Options{Placement: PlacementUser}},
		{"with the concise instruction", agentSession(sys, 3, 4), 7, Options{Placement: PlacementUser, ConciseOutput: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := New(Config{Format: chatFormat})
			turns := everyTurn(tc.msgs, 2)
			k0 := turns[len(turns)/2]
			b, c := proposeBranch(t, p, chat("gpt-4o", tc.msgs[:k0]...), tc.opts, tc.keep, 0)
			opts := tc.opts
			opts.Branches = []history.Branch{b}
			ts := replay(t, p, tc.msgs, everyTurn(tc.msgs, k0), opts)
			for _, tr := range ts {
				if tr.res.Applied != 0 {
					t.Fatalf("turn %d: branch not applied", tr.k)
				}
				checkApplied(t, p, tr.in, tr.res, opts, b)
			}
			if bs := breaks(ts); len(bs) > 0 {
				t.Errorf("turn %d does not extend the one before: the merged block is not sticky", ts[bs[0]].k)
			}
			// The proposal's estimate is what the compacted request counts.
			applied := p.RewriteWith(chat("gpt-4o", tc.msgs[:k0]...), opts)
			if got := c.KeptTokens + c.SummaryTokens(b.Summary, ""); got != applied.TokensAfter {
				t.Errorf("KeptTokens + SummaryTokens = %d, the compacted request counts %d", got, applied.TokensAfter)
			}
		})
	}
}

// Item 12. A client that sends no system message may be talking to a model
// or template without a system role: by default (auto) neither a summary
// nor the concise instruction adds one; they go at the head of the first
// user message. PlacementSystem still adds one, as configured.
func TestNoSystemRoleGetsNoSystemMessage(t *testing.T) {
	tests := []struct {
		name       string
		msgs       []string
		opts       Options
		wantSystem bool
	}{
		{"chat, summary", userTurns(nil, 12), Options{}, false},
		{"agent loops, summary and concise", agentSession(nil, 3, 5), Options{ConciseOutput: true}, false},
		{"agent loops, auto spelled out", agentSession(nil, 3, 5), Options{Placement: PlacementAuto}, false},
		{"system placement as configured", userTurns(nil, 12), Options{Placement: PlacementSystem}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := New(Config{Format: chatFormat})
			turns := everyTurn(tc.msgs, 2)
			// Before any compaction: the concise instruction alone.
			for _, tr := range replay(t, p, tc.msgs, turns[:3], tc.opts) {
				if want := tc.wantSystem && tc.opts.ConciseOutput; hasSystem(tr.res.Body) != want {
					t.Errorf("turn %d: a system message %v, want %v", tr.k, !want, want)
				}
			}
			k0 := turns[len(turns)/2]
			b, _ := proposeBranch(t, p, chat("gpt-4o", tc.msgs[:k0]...), tc.opts, 6, 0)
			opts := tc.opts
			opts.Branches = []history.Branch{b}
			ts := replay(t, p, tc.msgs, everyTurn(tc.msgs, k0), opts)
			for _, tr := range ts {
				checkApplied(t, p, tr.in, tr.res, opts, b)
				if hasSystem(tr.res.Body) != tc.wantSystem {
					t.Fatalf("turn %d: a system message %v, want %v:\n%.600s", tr.k, !tc.wantSystem, tc.wantSystem, tr.res.Body)
				}
			}
			if bs := breaks(ts); len(bs) > 0 {
				t.Errorf("turn %d does not extend the one before", ts[bs[0]].k)
			}
		})
	}
}

// hasSystem reports whether body has a system or developer message.
func hasSystem(body []byte) bool {
	found := false
	gjson.GetBytes(body, "messages").ForEach(func(_, m gjson.Result) bool {
		r := m.Get("role").Str
		found = r == "system" || r == "developer"
		return !found
	})
	return found
}

// Item 15. A /compact command and ctxpress's reply to it are not part of
// the conversation: the requests after it do not send them upstream, nor
// count, dedup or summarise them, wherever they sit, and every other byte
// is forwarded as sent, turn after turn.
func TestCompactExchangeIsNotForwarded(t *testing.T) {
	const (
		cmd   = `{"role":"user","content":"/compact"}`
		reply = `{"role":"assistant","content":"[ctxpress] compacted this conversation: 9 earlier messages are now a summary; context 900 → 300 tokens."}`
	)
	sys := []string{`{"role":"system","content":"agent"}`}
	// at inserts the exchange before message i of msgs.
	at := func(msgs []string, i int) []string {
		out := append(append([]string{}, msgs[:i]...), cmd, reply)
		return append(out, msgs[i:]...)
	}
	loop := agentSession(sys, 3, 4) // asks at 1, 11, 21
	chatTurns := userTurns(nil, 10) // users at even indexes
	twice := at(at(loop, 21), 11)   // two exchanges
	tests := []struct {
		name   string
		msgs   []string
		from   int // the first turn replayed
		branch int // a summary covering msgs[lead:branch] first; 0: none
	}{
		{"in the middle of the raw tail", at(loop, 11), 13, 0},
		{"in the raw tail after a summary", at(loop, 11), 13, 6},
		{"right after the summary's coverage", at(loop, 11), 13, 11},
		{"first message, no system message", at(chatTurns, 0), 3, 0},
		{"two exchanges", twice, 15, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPipeline()
			opts := Options{ForceCommand: true}
			if tc.branch > 0 {
				var raw [][]byte
				lead := compactor.LeadingSystem(rolesOf(tc.msgs))
				for _, m := range tc.msgs[lead:tc.branch] {
					raw = append(raw, []byte(m))
				}
				opts.Branches = []history.Branch{{Summary: "## Active Task\nfake", Covered: tc.branch - lead, Hash: chainHashOf(raw)}}
			}
			// The command turn itself is answered by ctxpress, and a client
			// sends a new message after the reply.
			var turns []int
			for _, k := range everyTurn(tc.msgs, tc.from) {
				if last := tc.msgs[k-1]; last != cmd && last != reply {
					turns = append(turns, k)
				}
			}
			ts := replay(t, p, tc.msgs, turns, opts)
			for _, tr := range ts {
				body := string(tr.res.Body)
				if strings.Contains(body, `"/compact"`) || strings.Contains(body, CompactReplyPrefix) {
					t.Fatalf("turn %d forwards the /compact exchange:\n%.800s", tr.k, body)
				}
				if tc.branch > 0 && tr.res.Applied != 0 {
					t.Fatalf("turn %d: branch not applied", tr.k)
				}
				// The same as a client that never sent the exchange gets.
				plain := p.RewriteWith(without(tr.in, cmd, reply), Options{Branches: opts.Branches})
				if body != string(plain.Body) || tr.res.TokensAfter != plain.TokensAfter {
					t.Fatalf("turn %d: not the request without the exchange, every other byte as sent (%d tokens, %d):\n got %.600s\nwant %.600s",
						tr.k, tr.res.TokensAfter, plain.TokensAfter, body, plain.Body)
				}
				if c, ok := tr.res.Compaction(2, 0); ok && strings.Contains(compactor.Transcript(c.Messages[c.From:c.Cut], 0), "/compact") {
					t.Errorf("turn %d: the /compact exchange is in the transcript", tr.k)
				}
			}
			if bs := breaks(ts); len(bs) > 0 {
				t.Errorf("turn %d does not extend the one before", ts[bs[0]].k)
			}
		})
	}
}

// Only ctxpress's own reply right after a /compact is left out: the marker
// elsewhere, or a /compact the upstream answered (compaction off), is
// conversation like any other.
func TestCompactExchangeNeedsBothHalves(t *testing.T) {
	tests := []struct {
		name string
		msgs []string
	}{
		{"the marker without a command before it", []string{
			`{"role":"user","content":"what does ctxpress print?"}`,
			`{"role":"assistant","content":"[ctxpress] compacted this conversation"}`,
			`{"role":"user","content":"thanks"}`}},
		{"a command the upstream answered", []string{
			`{"role":"user","content":"hi"}`, `{"role":"assistant","content":"hello"}`,
			`{"role":"user","content":"/compact"}`,
			`{"role":"assistant","content":"I cannot compact, but here is a recap."}`,
			`{"role":"user","content":"thanks"}`}},
		{"a command that is the last message", []string{
			`{"role":"user","content":"hi"}`, `{"role":"assistant","content":"hello"}`,
			`{"role":"user","content":"/compact"}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := New(Config{Format: chatFormat})
			in := chat("gpt-4o", tc.msgs...)
			if res := p.RewriteWith(in, Options{}); string(res.Body) != string(in) {
				t.Errorf("changed:\n%s", res.Body)
			}
		})
	}
}

// rolesOf returns the compactor skeleton (roles only) of raw messages, the
// roles as the chat adapter reads them.
func rolesOf(msgs []string) []compactor.Message {
	c, _ := chatFormat.Parse(chat("gpt-4o", msgs...))
	out := make([]compactor.Message, len(msgs))
	for i := range out {
		out[i].Role = c.Messages[i].Role
	}
	return out
}

// without returns body with the messages equal to one of drop removed:
// a run of them goes with the separator before it, or after it at the
// start of the array.
func without(body []byte, drop ...string) []byte {
	req, _ := parseRequest(body)
	ms := req.messages
	gone := func(i int) bool { return slices.Contains(drop, string(ms[i].bytes())) }
	var edits []wire.Edit
	for i := 0; i < len(ms); {
		if !gone(i) {
			i++
			continue
		}
		j := i
		for j < len(ms) && gone(j) {
			j++
		}
		switch {
		case i > 0:
			edits = append(edits, wire.Edit{Start: ms[i-1].end, End: ms[j-1].end})
		case j < len(ms):
			edits = append(edits, wire.Edit{Start: ms[0].start, End: ms[j].start})
		default:
			edits = append(edits, wire.Edit{Start: ms[0].start, End: ms[j-1].end})
		}
		i = j
	}
	return wire.Splice(body, edits)
}
