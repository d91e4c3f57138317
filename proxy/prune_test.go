package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/internal/chatcheck"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/wire/chat"
)

// prunePipeline is the test pipeline with pruning on above 200 tokens.
func prunePipeline() *rewrite.Pipeline {
	return rewrite.New(rewrite.Config{
		Format: chat.Format{},
		Squash: &squash.Config{},
		Dedup:  rewrite.DefaultDedupConfig(),
		Prune:  rewrite.PruneConfig{Enabled: true, MinTokens: 200},
	})
}

// failingTests is a pytest run as mini-swe-agent frames it: exit 1, two
// failures among n tests.
func failingTests(n int) string {
	var b strings.Builder
	b.WriteString("<returncode>1</returncode>\n<output>\n============================= test session starts ==============================\n")
	for i := range n {
		fmt.Fprintf(&b, "tests/test_dates.py::test_leap_%04d %s\n", i, map[bool]string{true: "FAILED", false: "PASSED"}[i == 17 || i == 230])
	}
	b.WriteString("FAILED tests/test_dates.py::test_leap_0017 - AssertionError: assert is_leap(1900) is False\n")
	b.WriteString("FAILED tests/test_dates.py::test_leap_0230 - AssertionError: assert is_leap(2100) is False\n")
	fmt.Fprintf(&b, "========================= 2 failed, %d passed in 1.93s =========================\n</output>", n-2)
	return b.String()
}

// An old tool result through the proxy: the request that opens the next
// user turn forwards it as its pruned line; the requests after it, also
// after ctxpress restarts on the same db, forward it so again (the marks
// are in the line's record), each extending the previous forwarded
// request byte for byte. The upstream is priced as the hosted gpt-4o
// (cached input at half price), where the batch pays.
func TestPrunedResultIsForwardedAndKeptAcrossARestart(t *testing.T) {
	up := openaitest.New(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Enabled = false
	hosted := false
	cfg.LocalUpstream = &hosted
	dbPath := filepath.Join(t.TempDir(), "ctxpress.db")
	st := openStoreAt(t, dbPath)
	p := startProxyWith(t, cfg, Deps{Pipeline: prunePipeline(), Store: st})

	msgs := []map[string]any{{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Run the tests."}}
	call := func(cmd, output string) {
		id := fmt.Sprintf("call_%d", len(msgs))
		args, _ := json.Marshal(map[string]string{"command": cmd})
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": "bash", "arguments": string(args)}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": output})
	}
	send := func(base string) []string {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": msgs})
		if code, out, _ := send(t, http.MethodPost, base+"/chat/completions", string(body),
			map[string]string{"Authorization": "Bearer sk-agent", "X-Session-ID": "prune-restart"}); code != 200 {
			t.Fatalf("%d %s", code, out)
		}
		fwd := up.Last(t).Body
		if err := chatcheck.ValidateChat(fwd); err != nil {
			t.Fatalf("forwarded body invalid: %v", err)
		}
		return messagesOf(fwd)
	}
	pruned := func(fwd []string) string { return gjson.Get(fwd[3], "content").Str }

	call("pytest tests/test_dates.py", failingTests(300))
	msgs = append(msgs, map[string]any{"role": "assistant", "content": "Two leap-year tests fail."})
	send(p.BaseURL())
	msgs = append(msgs, map[string]any{"role": "user", "content": "Fix is_leap for centuries."})
	opening := send(p.BaseURL())
	line := pruned(opening)
	for _, w := range []string{"[bash] ran `pytest tests/test_dates.py`", "exit 1", "first error: tests/test_dates.py::test_leap_0017 FAILED",
		"summary: 2 failed, 298 passed in 1.93s", "re-run to see it"} {
		if !strings.Contains(line, w) {
			t.Errorf("the forwarded result lacks %q: %s", w, line)
		}
	}

	call("sed -i 's/% 4 == 0/% 4 == 0 and (y % 100 or y % 400 == 0)/' dates.py", "")
	loop := send(p.BaseURL())
	if pruned(loop) != line || !isPrefix(opening, loop) {
		t.Fatalf("the next request does not extend the pruned one: %s", pruned(loop))
	}
	waitFor(t, p.recorderDrained, "the turns recorded")
	// The two requests that sent it pruned are counted, and what it saved.
	waitFor(t, func() bool { return value(scrape(t, p.URL), "ctxpress_prune_hits_total") == 2 }, "two pruned results counted")
	if saved := value(scrape(t, p.URL), "ctxpress_prune_saved_tokens_total"); saved < 2*200 {
		t.Errorf("ctxpress_prune_saved_tokens_total %v", saved)
	}

	p2 := restartOnSameDB(t, p, st, dbPath, cfg, prunePipeline())
	call("pytest tests/test_dates.py", strings.Replace(failingTests(300), "<returncode>1", "<returncode>0", 1))
	after := send(p2.BaseURL())
	if pruned(after) != line || !isPrefix(loop, after) {
		t.Fatalf("after a restart the old result is not sent pruned as before: %s", pruned(after))
	}
}

// On a local server (priced by prefill: a cached token nearly free, a
// rebuilt one a whole prefill) the same batch does not pay two turns in:
// the old result goes on as it was, and the prefix with it.
func TestPruneBatchThatDoesNotPayOnALocalServerIsDeclined(t *testing.T) {
	up := openaitest.New(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Enabled = false
	st := openStoreAt(t, filepath.Join(t.TempDir(), "ctxpress.db"))
	t.Cleanup(func() { st.Close() })
	p := startProxyWith(t, cfg, Deps{Pipeline: prunePipeline(), Store: st})
	args, _ := json.Marshal(map[string]string{"command": "pytest tests/test_dates.py"})
	msgs := []map[string]any{{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Run the tests."},
		{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
			"function": map[string]any{"name": "bash", "arguments": string(args)}}}},
		{"role": "tool", "tool_call_id": "call_1", "content": failingTests(300)},
		{"role": "assistant", "content": "Two leap-year tests fail."}}
	var prev []string
	for _, next := range []map[string]any{nil, {"role": "user", "content": "Fix is_leap for centuries."}} {
		if next != nil {
			msgs = append(msgs, next)
		}
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": msgs})
		if code, out, _ := send(t, http.MethodPost, p.BaseURL()+"/chat/completions", string(body),
			map[string]string{"Authorization": "Bearer sk-agent", "X-Session-ID": "prune-local"}); code != 200 {
			t.Fatalf("%d %s", code, out)
		}
		waitFor(t, p.recorderDrained, "the turn recorded")
		fwd := messagesOf(up.Last(t).Body)
		if got := gjson.Get(fwd[3], "content").Str; strings.Contains(got, "[old output pruned by ctxpress") {
			t.Fatalf("the result was pruned on a local server where it does not pay: %s", got)
		}
		if prev != nil && !isPrefix(prev, fwd) {
			t.Fatal("the request does not extend the previous one")
		}
		prev = fwd
	}
}
