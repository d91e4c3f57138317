package rewrite

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/squash"
)

// What a compaction replaces is kept as the client sent it: Replaced
// gives the tool results whole where the summariser's messages have them
// squashed, from the first message after the leading system ones.
func TestCompactionReplacedAsSent(t *testing.T) {
	var log strings.Builder
	for i := range 3000 {
		log.WriteString("2026-01-02T03:04:05Z INFO GET /api/items/" + strconv.Itoa(i) + " 200 in 3ms\n")
	}
	log.WriteString("2026-01-02T03:04:06Z ERROR panic: nil map in handler items.go:88\n")
	msgs := []string{`{"role":"system","content":"You are a coding agent."}`, `{"role":"user","content":"Why does the server crash?"}`,
		callMsg("c1", "bash", jsonString(`{"command":"tail -n 3001 server.log"}`)), resultMsg("c1", log.String())}
	msgs = append(msgs, agentTurns(6)...)
	body := chat("gpt-4o", msgs...)
	p := New(Config{Format: chatFormat, Squash: &squash.Config{}})
	c, ok := p.RewriteWith(body, Options{}).Compaction(3, 0)
	if !ok || c.Cut <= 3 {
		t.Fatalf("no compaction over the log: %+v", c)
	}
	if len(c.Messages[3].Text) >= log.Len() {
		t.Fatalf("the log is not squashed for the summariser (%d bytes), nothing to test", len(c.Messages[3].Text))
	}
	first, sent := c.Replaced()
	if first != 1 || len(sent) != c.Covered {
		t.Fatalf("Replaced = %d, %d messages; want 1, %d", first, len(sent), c.Covered)
	}
	if sent[2].Text != log.String() || sent[2].ToolCallID != "c1" {
		t.Errorf("the log as kept is %d bytes, not the %d sent", len(sent[2].Text), log.Len())
	}
	if len(sent[1].ToolCalls) != 1 || sent[1].ToolCalls[0].Name != "bash" {
		t.Errorf("the call is not kept: %+v", sent[1])
	}
	if f, m := (Compaction{}).Replaced(); f != 0 || m != nil {
		t.Errorf("a Compaction not proposed replaces %d, %v", f, m)
	}
}

// A branch's line on the messages kept is in its block, byte for byte as
// compactor.Block places it, and counted in the request's tokens.
func TestAppliedBlockCarriesKeptNote(t *testing.T) {
	p := New(Config{Format: chatFormat})
	body := chat("gpt-4o", append([]string{`{"role":"system","content":"Be exact."}`}, agentTurns(6)...)...)
	b, c := proposeBranch(t, p, body, Options{}, 3, 0)
	b.Kept = history.Kept{Ref: "3f9a2c1b4d5e", First: 1, Last: c.Cut - 1, Note: compactor.KeptNote(c.Covered, "original kept by ctxpress as ref 3f9a2c1b4d5e")}
	res := p.RewriteWith(body, Options{Branches: []history.Branch{b}})
	checkApplied(t, p, body, res, Options{Branches: []history.Branch{b}}, b)
	if got := c.KeptTokens + res.SummaryTokens(b.Summary, b.Kept.Note); got != res.TokensAfter {
		t.Errorf("KeptTokens %d + SummaryTokens %d = %d, TokensAfter %d", c.KeptTokens, res.SummaryTokens(b.Summary, b.Kept.Note), got, res.TokensAfter)
	}
	if plain := res.SummaryTokens(b.Summary, ""); plain >= res.SummaryTokens(b.Summary, b.Kept.Note) {
		t.Errorf("the line costs no tokens: %d", plain)
	}
	next, ok := res.Compaction(3, 0)
	if ok && next.PrevKept != b.Kept.Note {
		t.Errorf("PrevKept = %q, want the applied branch's line", next.PrevKept)
	}
}
