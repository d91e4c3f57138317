package rewrite

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/squash"
	"github.com/tidwall/gjson"
)

// claudeResults are the tool results of the captured Claude Code run, by
// the command or file they answer, and its persisted-output stub.
func claudeResults(t testing.TB) map[string]string {
	out := map[string]string{}
	turn6 := messagesCapture(t, "turn6")
	inputs := map[string]string{}
	gjson.GetBytes(turn6, "messages").ForEach(func(_, m gjson.Result) bool {
		m.Get("content").ForEach(func(_, b gjson.Result) bool {
			switch b.Get("type").String() {
			case "tool_use":
				inputs[b.Get("id").String()] = b.Get("input.command").String() + b.Get("input.file_path").String()
			case "tool_result":
				out[inputs[b.Get("tool_use_id").String()]] = b.Get("content").String()
			}
			return true
		})
		return true
	})
	out["seq 1 60000"] = gjson.GetBytes(messagesCapture(t, "persisted-output"), "messages.3.content.0.content").String()
	return out
}

// catN is a file of n lines as Claude Code's Read returns it (cat -n).
func catN(name string, n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\tdef %s_%d(a, b):  # %s helper number %d\n", i, name, i, name, i)
	}
	return b.String()
}

// testLog is a `pytest` run of n tests with the failures named.
func testLog(n int, failing ...int) string {
	var b strings.Builder
	b.WriteString("============================= test session starts ==============================\nplatform linux -- Python 3.12.3, pytest-8.3.2\ncollected " + itoa(n) + " items\n\n")
	bad := map[int]bool{}
	for _, f := range failing {
		bad[f] = true
	}
	for i := 0; i < n; i++ {
		status := "PASSED"
		if bad[i] {
			status = "FAILED"
		}
		fmt.Fprintf(&b, "tests/test_ops.py::test_case_%04d %s                                   [%3d%%]\n", i, status, (i+1)*100/n)
	}
	for _, f := range failing {
		fmt.Fprintf(&b, "FAILED tests/test_ops.py::test_case_%04d - AssertionError: assert add(2, 2) == 5\n", f)
	}
	fmt.Fprintf(&b, "========================= %d failed, %d passed in 3.21s =========================\n", len(failing), n-len(failing))
	return b.String()
}

// claudeScript is a long tool-using Claude Code session: the captured
// ask and its five calls, then two more asks with test runs to squash,
// file reads repeated word for word (dedup), parallel calls and Claude
// Code's own persisted-output stub.
func claudeScript(t testing.TB) []step {
	r := claudeResults(t)
	repo := "/tmp/h12-cc/base/repo/"
	read := func(file, content string) step {
		return step{Tool: "Read", Input: `{"file_path":"` + repo + file + `"}`, Result: content}
	}
	bash := func(cmd, out string) step {
		return step{Tool: "Bash", Input: `{"command":` + jsonString(cmd) + `,"description":"Run"}`, Result: out}
	}
	ops := catN("ops", 120)
	par := read("ops.py", ops)
	par.Parallel = &step{Tool: "Read", Input: `{"file_path":"` + repo + `b.py"}`, Result: r[repo+"b.py"]}
	return []step{
		bash("ls -la", r["ls -la"]),
		read("a.py", r[repo+"a.py"]),
		bash("grep -n def *.py", r["grep -n def *.py"]),
		read("b.py", r[repo+"b.py"]),
		bash("git log --oneline", r["git log --oneline"]),
		{Text: "a.py defines add and sub; b.py defines mul.", Ask: "Run the test suite and fix what fails."},
		bash("python -m pytest", testLog(400, 17, 230)), // 6: a new user turn
		read("ops.py", ops),
		bash("python -m pytest", testLog(400, 230)),
		par, // ops.py again, word for word, and b.py
		bash("seq 1 60000", r["seq 1 60000"]),
		{Text: "Both failures are fixed.", Ask: "Now add a test for mul and run everything again."},
		read("ops.py", ops), // 12
		bash("python -m pytest", testLog(401)),
		bash("cat a.py", r[repo+"a.py"]),
		bash("python -m pytest -q", testLog(401, 400)), // 15: inside the tool loop
		read("ops.py", ops),
		bash("git diff --stat", " a.py | 2 +-\n tests/test_ops.py | 4 ++++\n 2 files changed, 5 insertions(+), 1 deletion(-)"),
		{Text: "Added test_mul; all 401 pass.", Ask: "Summarise what changed."},
		{Text: "a.py: fixed add; tests: test_mul."}, // 19
	}
}

// TestClaudeCodeSessionThroughThePipelineKeepsEveryThinkingBlockValid
// plays a long Claude Code session through the pipeline with squash,
// dedup and compaction on — compactions at a new user turn, inside a tool
// loop, and again at a user turn — against an upstream that binds each
// thinking block's signature to its prefix: every forwarded request is
// accepted, each turn's prompt extends the previous one's except where a
// compaction changed it, and a restarted pipeline forwards the same bytes.
func TestClaudeCodeSessionThroughThePipelineKeepsEveryThinkingBlockValid(t *testing.T) {
	s := newClaudeSession(t, Config{Squash: &squash.Config{}, Dedup: DefaultDedupConfig()})
	compactAt := map[int]bool{6: true, 15: true, 19: true}
	s.run(claudeScript(t), compactAt, 4)
	if len(s.forwarded) != 20 {
		t.Fatalf("%d requests", len(s.forwarded))
	}
	squashed, deduped := 0, 0
	for i, res := range s.results {
		squashed, deduped = max(squashed, res.Squashed), max(deduped, res.Deduped)
		t.Logf("request %2d: %d messages, applied %d covering %d, squashed %d, deduped %d, thinking left out of %d, drop_block %v (dropped %d), tokens %d -> %d",
			i, res.Messages, res.Applied, res.Covered, res.Squashed, res.Deduped, res.ThinkingLeftOut, res.DropMismatched, len(s.forwarded[i].Dropped), res.TokensBefore, res.TokensAfter)
	}
	if squashed == 0 || deduped == 0 {
		t.Errorf("squashed %d, deduped %d: the session exercises neither", squashed, deduped)
	}
	var want []int
	for i, c := range s.compacted {
		if c {
			want = append(want, i)
		}
	}
	if got := s.breaks(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("prompts break at requests %v, want only at the compactions %v", got, want)
	}
	if s.ledger.Verified() == 0 {
		t.Error("no thinking block was verified")
	}
}

// Without Branch.Since nothing is left out: every kept thinking block is
// forwarded and the upstream asked to drop those whose prefix changed, so
// every request is still accepted and still extends the previous one.
func TestClaudeCodeSessionWithoutSinceIsAcceptedToo(t *testing.T) {
	s := newClaudeSession(t, Config{Squash: &squash.Config{}, Dedup: DefaultDedupConfig()})
	s.noSince = true
	s.run(claudeScript(t), map[int]bool{6: true, 15: true, 19: true}, 4)
	for i, res := range s.results {
		if res.ThinkingLeftOut != 0 || res.DropMismatched != (res.Applied >= 0) {
			t.Errorf("request %d: %d left out, drop %v, applied %d", i, res.ThinkingLeftOut, res.DropMismatched, res.Applied)
		}
	}
	if b := s.breaks(); fmt.Sprint(b) != "[6 15 19]" {
		t.Errorf("prompts break at %v", b)
	}
}

// BenchmarkRewriteWarmMessages: a warm turn of the Claude Code session
// (40 messages, squash, dedup, a summary applied, thinking rules).
func BenchmarkRewriteWarmMessages(b *testing.B) {
	s := newClaudeSession(b, Config{Squash: &squash.Config{}, Dedup: DefaultDedupConfig()})
	s.run(claudeScript(b)[:19], map[int]bool{6: true, 15: true}, 4)
	body, opts := s.body(), s.opts
	s.p.RewriteWith(body, opts)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s.p.RewriteWith(body, opts)
	}
}
