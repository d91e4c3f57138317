package proxy

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/wire/messages"
)

// serverCompactEdits are Anthropic's server compaction over trigger input
// tokens, after Claude Code's own edits (others).
func serverCompactEdits(trigger int, others string) string {
	return `{"edits":[` + others + `{"type":"compact_20260112","trigger":{"type":"input_tokens","value":` +
		strconv.Itoa(trigger) + `},"pause_after_compaction":false}]}`
}

// withoutThinking makes the agent ask for no thinking (and so clear none).
func withoutThinking(a *messagesAgent) {
	for i := range a.top {
		switch a.top[i].key {
		case "thinking":
			a.top[i].raw = `{"type":"disabled"}`
		case "context_management":
			a.top[i].raw = `{"edits":[]}`
		}
	}
}

// setContextManagement sets the agent's context_management to raw and
// returns what it was.
func setContextManagement(a *messagesAgent, raw string) (was string) {
	for i := range a.top {
		if a.top[i].key == "context_management" {
			was, a.top[i].raw = a.top[i].raw, raw
		}
	}
	return was
}

// betaCompact is the anthropic-beta that opens server compaction.
var betaCompact = [2]string{"anthropic-beta", "compact-2026-01-12"}

// compactionMessage is the index of the agent's message that holds a
// compaction block, -1 when none does.
func compactionMessage(a *messagesAgent) int {
	for i, m := range a.msgs {
		for _, b := range m.blocks {
			if gjson.Get(b, "type").Str == "compaction" {
				return i
			}
		}
	}
	return -1
}

// Claude Code with Anthropic's server compaction, through ctxpress
// compacting before, during and after it: ctxpress compacts the requests
// that do not ask the server to compact; the requests that do are not
// compacted or cut again (no summary call) but go as the turns before
// went, ctxpress's summary kept (with thinking on, the thinking produced
// since is bound to it), and the server
// compacts one; the client keeps its compaction block. Later requests
// without the edit are compacted by ctxpress again, its summary replacing
// only messages after the compaction block, which goes with everything
// before it byte for byte. The strict upstream accepts every turn.
func TestClaudeServerCompactionThroughCtxpress(t *testing.T) {
	for _, tc := range []struct{ thinking, stream bool }{{false, false}, {false, true}, {true, false}, {true, true}} {
		stream := tc.stream
		t.Run(fmt.Sprintf("thinking=%v/stream=%v", tc.thinking, tc.stream), func(t *testing.T) {
			up := newMessagesUpstream(t)
			deps, _ := responsesDeps(t)
			p := startProxyWith(t, claudeCodeCompaction(up.BaseURL(), 16000), deps)
			a := newMessagesAgent(t, p.URL, "server-compaction-"+strconv.FormatBool(stream))
			others := `{"type":"clear_thinking_20251015","keep":"all"},`
			if !tc.thinking {
				withoutThinking(a)
				others = ""
			}
			for turn := 1; turn <= 40 && a.resp.Get(HeaderCompacted) != "true"; turn++ {
				a.turn(stream)
			}
			if a.resp.Get(HeaderCompacted) != "true" {
				t.Fatal("ctxpress never compacted before the server")
			}
			a.turn(stream)

			// The client asks the server to compact, until it does.
			was := setContextManagement(a, serverCompactEdits(16000, others))
			_, before := up.turns()
			for turn := 1; turn <= 30 && compactionMessage(a) < 0; turn++ {
				sent := len(a.msgs)
				a.turn(stream, betaCompact)
				turns, summaries := up.turns()
				g := turns[len(turns)-1]
				if len(summaries) != len(before) || a.resp.Get(HeaderCompacted) == "true" {
					t.Fatalf("ctxpress compacted a request that asks the server to compact (%d summary calls, were %d)", len(summaries), len(before))
				}
				// What the turns before sent stays: the thinking produced
				// since is bound to it.
				if n := len(gjson.GetBytes(g.body, "messages").Array()); n >= sent || !systemSummary(g.body) {
					t.Fatalf("the request went with %d messages of the client's %d, summary %v", n, sent, systemSummary(g.body))
				}
			}
			at := compactionMessage(a)
			if at < 0 {
				t.Fatal("the server never compacted")
			}
			a.turn(stream, betaCompact) // the turn after the server's compaction

			// The client stops asking; ctxpress compacts what follows.
			setContextManagement(a, was)
			compactedAt := compactAfterServer(t, a, up, stream)
			turns, summaries := up.turns()
			if len(summaries) <= len(before) {
				t.Fatalf("%d summary calls", len(summaries))
			}
			for _, g := range turns[compactedAt-1:] {
				fwd := gjson.GetBytes(g.body, "messages").Array()
				if !systemSummary(g.body) || len(fwd) <= at+1 {
					t.Fatalf("a turn after ctxpress's compaction: summary %v, %d messages", systemSummary(g.body), len(fwd))
				}
				for i := 0; i <= at; i++ {
					if fwd[i].Raw != a.message(i, a.msgs[i]) {
						t.Fatalf("message %d (the compaction in %d) not forwarded as the client sent it:\n%.300s\nclient:\n%.300s", i, at, fwd[i].Raw, a.message(i, a.msgs[i]))
					}
				}
			}
			last := summaries[len(summaries)-1]
			if !strings.Contains(string(last.body), compactor.HistoryLead) {
				t.Fatalf("summary call %.300s", last.body)
			}
			t.Logf("server compaction in message %d; ctxpress compacted again at turn %d; %d summary calls; %d thinking blocks verified",
				at, compactedAt, len(summaries), up.ledger.Verified())
		})
	}
}

// A Claude Code history whose messages before the server's compaction are
// far over ctxpress's trigger, and whose messages after it are not, is not
// compacted: the server reads from the compaction on, and so does
// ctxpress's count (X-Ctxpress-Tokens-Before).
func TestWhatTheServerCompactedDoesNotTrigger(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			up := newMessagesUpstream(t)
			deps, _ := responsesDeps(t)
			p := startProxyWith(t, claudeCodeCompaction(up.BaseURL(), 16000), deps)
			a := newMessagesAgent(t, p.URL, "server-compacted-before")
			was := setContextManagement(a, serverCompactEdits(1<<20, ""))
			for range 30 { // the client's compaction requests: ctxpress leaves them be
				a.turn(stream, betaCompact)
			}
			full, _ := strconv.Atoi(a.resp.Get(HeaderTokensBefore))
			if full < 16000*3/2 {
				t.Fatalf("the history is %d tokens: the test proves nothing", full)
			}
			setContextManagement(a, serverCompactEdits(16000, ""))
			a.turn(stream, betaCompact)
			if compactionMessage(a) < 0 {
				t.Fatal("the server did not compact")
			}
			setContextManagement(a, was)
			a.ask("Carry on.")
			a.turn(stream)
			turns, summaries := up.turns()
			if len(summaries) != 0 || a.resp.Get(HeaderCompacted) == "true" {
				t.Fatalf("ctxpress compacted what the server had compacted (%d summary calls)", len(summaries))
			}
			after, _ := strconv.Atoi(a.resp.Get(HeaderTokensBefore))
			if after == 0 || after >= 16000 {
				t.Fatalf("X-Ctxpress-Tokens-Before %d, want what follows the compaction only (the whole history is over %d)", after, full)
			}
			last := turns[len(turns)-1]
			if n := len(gjson.GetBytes(last.body, "messages").Array()); n != len(a.msgs)-2 || last.compacted {
				t.Fatalf("forwarded %d messages of %d", n, len(a.msgs)-2)
			}
			t.Logf("tokens before: %d with the whole history, %d from the compaction on (upstream counted %d)", full, after, last.prompt())
		})
	}
}

// A thinking tool loop whose history holds the server's compaction is
// compacted by ctxpress inside the loop after it: the compaction block
// and everything before it go as the client sent them, the latest thinking
// block stays and the request asks drop_block, and the strict upstream
// accepts every turn.
func TestClaudeThinkingLoopAroundServerCompaction(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			up := newMessagesUpstream(t)
			deps, _ := responsesDeps(t)
			p := startProxyWith(t, claudeCodeCompaction(up.BaseURL(), 16000), deps)
			a := newMessagesAgent(t, p.URL, "thinking-loop-server-compaction")
			was := setContextManagement(a, serverCompactEdits(14000, `{"type":"clear_thinking_20251015","keep":"all"},`))
			for turn := 1; turn <= 20 && compactionMessage(a) < 0; turn++ {
				a.turn(stream, betaCompact)
				if a.resp.Get(HeaderCompacted) == "true" {
					t.Fatal("ctxpress compacted a request that asks the server to compact")
				}
			}
			at := compactionMessage(a)
			if at < 0 {
				t.Fatal("the server never compacted")
			}
			setContextManagement(a, was)
			compactedAt := compactAfterServer(t, a, up, stream)
			turns, _ := up.turns()
			for _, g := range turns[compactedAt-1:] {
				fwd := gjson.GetBytes(g.body, "messages").Array()
				if !systemSummary(g.body) || !messages.AsksDropBlock(g.body) || len(fwd) <= at+1 {
					t.Fatalf("a turn after ctxpress's compaction: summary %v, drop_block %v, %d messages", systemSummary(g.body), messages.AsksDropBlock(g.body), len(fwd))
				}
				for i := 0; i <= at; i++ {
					if fwd[i].Raw != a.message(i, a.msgs[i]) {
						t.Fatalf("message %d (the compaction in %d) not forwarded as the client sent it", i, at)
					}
				}
			}
			t.Logf("server compaction in message %d, ctxpress's at turn %d; %d thinking blocks verified, dropped on the last turn: %v",
				at, compactedAt, up.ledger.Verified(), turns[len(turns)-1].dropped)
		})
	}
}

// compactAfterServer runs a's turns until ctxpress compacts one (failing
// the test if none of 40 is), then 3 more, and returns how many upstream
// turns there were when it did.
func compactAfterServer(t *testing.T, a *messagesAgent, up *messagesUpstream, stream bool) int {
	t.Helper()
	compactedAt := 0
	for turn := 1; turn <= 40 && compactedAt == 0; turn++ {
		a.turn(stream)
		if a.resp.Get(HeaderCompacted) == "true" {
			turns, _ := up.turns()
			compactedAt = len(turns)
		}
	}
	if compactedAt == 0 {
		t.Fatal("ctxpress never compacted after the server")
	}
	for range 3 {
		a.turn(stream)
	}
	return compactedAt
}
