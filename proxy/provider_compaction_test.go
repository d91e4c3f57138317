package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/internal/responsestest"
)

// A codex-shaped agent whose model calls shell, apply_patch, computer or
// MCP approval tools (in parallel), each answered by its own output kind,
// is compacted, cut to fit and rescued through ctxpress against an
// upstream that pairs every call with its output by id as OpenAI does:
// no turn is refused, whole or streamed.
func TestEveryCallKindSurvivesCompaction(t *testing.T) {
	for _, kind := range []string{"shell_call", "apply_patch_call", "computer_call", "mcp_approval_request"} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", kind, stream), func(t *testing.T) {
				up := newResponsesUpstream(t)
				up.callKind, up.parallel = kind, 2
				deps, _ := responsesDeps(t)
				p := startProxyWith(t, compactionConfig(up.BaseURL()), deps)
				a := newResponsesAgent(t, p.BaseURL(), "kinds-"+kind)
				compacted, want := 0, 2
				if kind == "mcp_approval_request" {
					want = 1 // approvals are small: one compaction in 40 turns
				}
				for turn := 1; turn <= 40 && compacted < want; turn++ {
					a.turn(stream) // fails the test on any refusal
					if a.header.Get(HeaderCompacted) == "true" {
						compacted++
					}
				}
				if compacted < want {
					t.Fatalf("compacted %d times", compacted)
				}
				for range 3 {
					a.turn(stream)
				}
				turns, summaries := up.turns()
				if len(summaries) < want {
					t.Fatalf("%d summary calls", len(summaries))
				}
				last := turns[len(turns)-1]
				if summaryItem(last.body) < 0 {
					t.Fatal("the summary is not applied on the last turn")
				}
				if kind != "mcp_approval_request" && !strings.Contains(string(last.body), `"type":"`+kind+`"`) {
					t.Fatalf("no %s in the last turn: the test proves nothing", kind)
				}
			})
		}
	}
	t.Run("rescued", func(t *testing.T) {
		up := newResponsesUpstream(t)
		up.callKind, up.parallel, up.overflowInStream = "shell_call", 2, true
		deps, _ := responsesDeps(t)
		cfg := compactionConfig(up.BaseURL())
		cfg.Compaction.Trigger.ThresholdTokens = 1 << 20 // ctxpress does not know the real window
		cfg.Compaction.Summarizer.MaxTokens = 300
		p := startProxyWith(t, cfg, deps)
		a := newResponsesAgent(t, p.BaseURL(), "kinds-rescued")
		for range 10 {
			a.turn(true)
		}
		refused, answered := refuseNextTurn(t, up, a)
		if refused.refusal != "context_length_exceeded" || answered.status != http.StatusOK || answered.refusal != "" {
			t.Fatalf("last two upstream answers: %d %q, %d %q", refused.status, refused.refusal, answered.status, answered.refusal)
		}
		if !strings.Contains(string(answered.body), `"type":"shell_call_output"`) {
			t.Fatal("the rescued request has no shell output left: the test proves nothing")
		}
	})
}

// codex's remote compaction through ctxpress, with ctxpress compacting
// before, during and after it: the request that carries compaction_trigger
// is not compacted or cut again, but goes as the turn before it went (the
// summary ctxpress applied stays: the provider compacts what it has
// cached), the trigger last, and gets its one compaction item; the history after it starts at that item, which every
// later request carries byte for byte where the client put it; ctxpress
// counts only what follows it, summarises only items after it and puts its
// summary right after it; nothing is refused.
func TestCodexRemoteCompactionThroughCtxpress(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			up := newResponsesUpstream(t)
			deps, _ := responsesDeps(t)
			p := startProxyWith(t, compactionConfig(up.BaseURL()), deps)
			a := newResponsesAgent(t, p.BaseURL(), "remote-compaction")
			for turn := 1; turn <= 40 && a.header.Get(HeaderCompacted) != "true"; turn++ {
				a.turn(stream)
			}
			if a.header.Get(HeaderCompacted) != "true" {
				t.Fatal("ctxpress never compacted before the provider")
			}
			a.turn(stream)
			_, before := up.turns()

			// The client asks the provider to compact.
			a.items = append(a.items, rawItem(`{"type":"compaction_trigger"}`))
			r, err := a.send(stream)
			if err != nil {
				t.Fatalf("the compaction request was refused: %v", err)
			}
			turns, summaries := up.turns()
			sent := turns[len(turns)-1]
			if len(summaries) != len(before) || a.header.Get(HeaderCompacted) == "true" {
				t.Fatal("ctxpress compacted the client's compaction request")
			}
			sentItems := inputItems(sent.body)
			if !isPrefix(inputItems(turns[len(turns)-2].body), sentItems) || sentItems[len(sentItems)-1] != `{"type":"compaction_trigger"}` || summaryItem(sent.body) < 0 {
				t.Fatalf("the compaction request does not extend the turn before it with the trigger (summary at %d)", summaryItem(sent.body))
			}
			if len(r.Output) != 1 || r.Output[0].Type != "compaction" {
				t.Fatalf("the client got %d output items", len(r.Output))
			}

			// codex starts its history again from the compaction item.
			cmp := r.Output[0].RawJSON()
			a.items = append(a.items[:1:1], rawItem(cmp))
			a.ask("Go on with the fix.")
			compactedAfter := false
			for turn := 1; turn <= 40 && !compactedAfter; turn++ {
				a.turn(stream)
				compactedAfter = a.header.Get(HeaderCompacted) == "true"
			}
			if !compactedAfter {
				t.Fatal("ctxpress never compacted after the provider")
			}
			for range 3 {
				a.turn(stream)
			}
			turns, summaries = up.turns()
			last := turns[len(turns)-1].body
			items := gjson.GetBytes(last, "input").Array()
			if len(items) < 3 || items[1].Raw != cmp || summaryItem(last) != 2 {
				t.Fatalf("the provider's compaction is not kept in place, its summary after it (summary at %d): %.300s", summaryItem(last), last)
			}
			if _, err := responsestest.Check(last, responsestest.Options{Ledger: up.ledger}); err != nil {
				t.Fatal(err.Message)
			}
			tokens := a.header.Get(HeaderTokensBefore)
			if tokens == "" || len(summaries) <= len(before) {
				t.Fatalf("tokens before %q, %d summary calls", tokens, len(summaries))
			}
		})
	}
}

// A request over the trigger only by the items before the provider's
// latest compaction item is not compacted again: ctxpress never summarises
// across the provider's compaction, and the items before it go on as the
// client placed them.
func TestWhatTheProviderCompactedIsNotCompactedAgain(t *testing.T) {
	up := newResponsesUpstream(t)
	up.toolTurns = 0
	deps, _ := responsesDeps(t)
	p := startProxyWith(t, compactionConfig(up.BaseURL()), deps)
	a := newResponsesAgent(t, p.BaseURL(), "compacted-before")
	for i := range 20 {
		a.items = append(a.items,
			rawItem(fmt.Sprintf(`{"type":"function_call","call_id":"old_%d","name":"exec_command","arguments":"{\"cmd\":\"cat f%d\"}"}`, i, i)),
			rawItem(fmt.Sprintf(`{"type":"function_call_output","call_id":"old_%d","output":%s}`, i, jsonText(toolOutput(i)))))
	}
	history := a.items
	a.items = append(a.items, rawItem(`{"type":"compaction_trigger"}`))
	r, err := a.send(false)
	if err != nil || len(r.Output) != 1 {
		t.Fatalf("the compaction request: %v", err)
	}
	a.items = append(history, rawItem(r.Output[0].RawJSON()))
	a.ask("Carry on.")
	a.turn(false)
	turns, summaries := up.turns()
	if len(summaries) != 0 || a.header.Get(HeaderCompacted) == "true" {
		t.Fatalf("compacted what the provider had compacted (%d summary calls)", len(summaries))
	}
	if last := turns[len(turns)-1]; !strings.Contains(string(last.body), "old_19") || last.input < testTrigger {
		t.Fatalf("an item before the compaction was dropped, or the request was under the trigger (%d tokens)", last.input)
	}
}
