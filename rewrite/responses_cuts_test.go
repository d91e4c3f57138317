package rewrite

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/internal/responsestest"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/wire/responses"
	"github.com/tidwall/gjson"
)

// issuedLedger is what the upstream of a captured conversation issued, as
// the capture shows it: each reasoning item with the item codex sent right
// after it (codex sends a response's items back in the order it got them).
func issuedLedger(body []byte) *responsestest.Ledger {
	l := responsestest.NewLedger()
	items := gjson.GetBytes(body, "input").Array()
	for i, it := range items {
		if it.Get("type").Str == "reasoning" && i+1 < len(items) {
			l.Record([]byte(`{"id":"resp_`+it.Get("id").Str+`","output":[`+it.Raw+`,`+items[i+1].Raw+`]}`), false)
		}
	}
	return l
}

// Every cut ctxpress can make in a real codex 0.171 conversation with
// parallel calls — a compaction keeping any number of recent messages, a
// history cap of any size, a cut to fit any budget — forwards a request
// OpenAI accepts: no reasoning item apart from the call it preceded, no
// call of a batch apart from the others or from its output, nothing
// changed that must not change. In the neutral conversation each
// function_call is a message of its own; the cuts' turn boundaries are
// what keep a batch together.
func TestCutsOfRealCodexParallelCallsKeepEveryRule(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("..", "internal", "responsestest", "testdata", "codex171-parallel-calls.json"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(body), `"type":"function_call"`); n != 12 {
		t.Fatalf("the capture has %d calls", n)
	}
	ledger := issuedLedger(body)
	check := func(what string, out []byte) {
		t.Helper()
		if _, err := responsestest.Check(out, responsestest.Options{Ledger: ledger, Client: body}); err != nil {
			t.Fatalf("%s: refused: %s", what, err.Message)
		}
	}
	check("the capture itself", body)
	p := New(Config{Format: responses.Format{}, Squash: &squash.Config{}, Dedup: DefaultDedupConfig()})
	base := p.RewriteWith(body, Options{})
	if !base.Understood {
		t.Fatal("not understood")
	}
	check("squashed and deduped", base.Body)
	cuts := everyCut(t, p, body, 250, func(what string, res Result) { check(what, res.Body) })
	if cuts < 8 {
		t.Fatalf("only %d distinct cuts tried", cuts)
	}
}

// everyCut rewrites body with every cut ctxpress can make — a compaction
// keeping any number of recent messages (its summary applied), a history
// cap of any size, a cut to fit any budget down by step — and hands each
// result to check; it returns how many distinct cuts were tried.
func everyCut(t *testing.T, p *Pipeline, body []byte, step int, check func(what string, res Result)) int {
	t.Helper()
	base := p.RewriteWith(body, Options{})
	cuts := map[int]bool{}
	for keep := 1; keep < base.Messages; keep++ {
		prop, ok := base.Compaction(keep, 0)
		if !ok {
			continue
		}
		cuts[prop.Cut] = true
		res := p.RewriteWith(body, Options{Branches: []history.Branch{{Summary: "## Active Task\nList the functions.", Covered: prop.Covered, Hash: prop.Hash}}})
		if res.Applied != 0 {
			t.Fatalf("keep %d: the summary of %d messages does not apply", keep, prop.Covered)
		}
		check("a compaction keeping "+strconv.Itoa(keep), res)
	}
	for limit := 1; limit < base.Messages; limit++ {
		res := p.RewriteWith(body, Options{MaxHistoryMessages: limit})
		if res.Trimmed > 0 {
			cuts[-limit] = true
		}
		check("a history cap of "+strconv.Itoa(limit), res)
	}
	for budget := base.TokensAfter; budget > 0; budget -= step {
		check("a cut to fit "+strconv.Itoa(budget), p.RewriteWith(body, Options{FitTokens: budget}))
	}
	return len(cuts)
}
