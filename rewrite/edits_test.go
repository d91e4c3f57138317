package rewrite

import (
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/history"
)

// TestResultEdits: what a rewrite did, message by message, as the
// dashboard lists it: each kind of edit at its message, named by its
// tool, and the tokens it took out adding up to what the request saved.
func TestResultEdits(t *testing.T) {
	sys := `{"role":"system","content":"You are a coding agent."}`
	ask := func(n int) string { return `{"role":"user","content":"ask ` + itoa(n) + `: fix the failing tests"}` }
	done := `{"role":"assistant","content":"Done."}`
	big := testLog(300, 7, 99)
	grepOut := grepLines("ServeHTTP", 120)
	grepCall := func(id string) string { return callMsg(id, "grep", jsonString(`{"pattern":"ServeHTTP","path":"."}`)) }
	branch := func(msgs []string, covered int) []history.Branch {
		raw := make([][]byte, covered)
		for i := range raw {
			raw[i] = []byte(msgs[1+i])
		}
		return []history.Branch{{Summary: "## Active Task\nfix the tests", Covered: covered, Hash: chainHashOf(raw)}}
	}
	type want struct {
		kind  history.EditKind
		index int
		count int
		name  string
	}
	withSummary := []string{sys, ask(0), bashCall("t0", "pytest"), resultMsg("t0", testLog(200, 3)), done,
		ask(1), bashCall("t1", "pytest -x"), resultMsg("t1", big)}
	for _, tc := range []struct {
		name string
		cfg  Config
		msgs []string
		opts Options
		want []want
		// exact: the edits' Removed add up to TokensBefore-TokensAfter
		// (nothing added but what an edit accounts for).
		exact bool
	}{
		{"nothing done: no edits", pruneConfig(200), []string{sys, ask(0)}, Options{}, nil, true},
		{"a big tool output squashed, named by its call's tool", pruneConfig(200),
			[]string{sys, ask(0), bashCall("t1", "pytest -x"), resultMsg("t1", big)}, Options{},
			[]want{{history.EditSquashed, 3, 1, "bash"}}, true},
		{"the earlier duplicate deduped, the later one pruned at the next ask",
			Config{Format: chatFormat, Dedup: DefaultDedupConfig(), Prune: PruneConfig{Enabled: true, MinTokens: 200}},
			[]string{sys, ask(0), grepCall("g1"), resultMsg("g1", grepOut), grepCall("g2"), resultMsg("g2", grepOut), done, ask(1)}, Options{},
			[]want{{history.EditDeduped, 3, 1, "grep"}, {history.EditPruned, 5, 1, "grep"}}, true},
		{"a summary applied: the run it replaces, then what is kept after it", pruneConfig(200),
			withSummary, Options{Branches: branch(withSummary, 4)},
			[]want{{history.EditSummarised, 1, 4, ""}, {history.EditSquashed, 7, 1, "bash"}}, true},
		{"the history limit: the run cut", Config{Format: chatFormat},
			[]string{sys, ask(0), done, ask(1), done, ask(2), done, ask(3), done, ask(4)}, Options{MaxHistoryMessages: 4},
			[]want{{history.EditCut, 1, -1, ""}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(tc.cfg)
			res := p.RewriteWith(chat("gpt-4o", tc.msgs...), tc.opts)
			got := res.Edits()
			if len(got) != len(tc.want) {
				t.Fatalf("edits %+v, want %d", got, len(tc.want))
			}
			removed := 0
			for i, e := range got {
				w := tc.want[i]
				if w.count < 0 { // the history limit's, as the Result counts it
					w.count = res.Trimmed
				}
				if e.Kind != w.kind || e.Index != w.index || e.Count != w.count || e.Name != w.name {
					t.Errorf("edit %d: %+v, want %+v", i, e, w)
				}
				if e.Before <= e.After || e.Before <= 0 {
					t.Errorf("edit %d: %d → %d tokens, not a saving", i, e.Before, e.After)
				}
				removed += e.Removed()
			}
			if saved := res.TokensBefore - res.TokensAfter; tc.exact && removed != saved {
				t.Errorf("the edits take out %d tokens, the request saved %d", removed, saved)
			}
		})
	}
	if (Result{}).Edits() != nil {
		t.Error("a Result not understood lists edits")
	}
}

func TestResultFirstAsk(t *testing.T) {
	reminder := `<system-reminder>\nAs you answer, use this context: CLAUDE.md says run make test.\n</system-reminder>`
	long := strings.Repeat("fix the parser ", 20)
	for _, tc := range []struct {
		name string
		msgs []string
		max  int
		want string
	}{
		{"a plain ask", []string{`{"role":"system","content":"be brief"}`, `{"role":"user","content":"  Fix the\nleap-year bug  "}`}, 80,
			"Fix the leap-year bug"},
		{"Claude Code: a reminder part before the ask", []string{`{"role":"user","content":[{"type":"text","text":"` + reminder +
			`"},{"type":"text","text":"Why does TestParseDate fail?"}]}`}, 80, "Why does TestParseDate fail?"},
		{"a reminder and the ask in one text", []string{`{"role":"user","content":"` + reminder + `\nWhy does TestParseDate fail?"}`}, 80,
			"Why does TestParseDate fail?"},
		{"codex: instructions and environment come first, as user messages", []string{
			`{"role":"developer","content":"You are Codex."}`,
			`{"role":"user","content":"<user_instructions>\nAGENTS.md: use go test\n</user_instructions>"}`,
			`{"role":"user","content":"<environment_context>\n  <cwd>/src</cwd>\n</environment_context>"}`,
			`{"role":"user","content":"add a --json flag to replay"}`}, 80, "add a --json flag to replay"},
		{"cut to max runes, an ellipsis at the end", []string{`{"role":"user","content":"` + long + `"}`}, 20,
			"fix the parser fix …"},
		{"only tagged context: none", []string{`{"role":"user","content":"<environment_context>x</environment_context>"}`}, 80, ""},
		{"an unclosed tag is text", []string{`{"role":"user","content":"<b> is not closed"}`}, 80, "<b> is not closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := New(Config{Format: chatFormat}).RewriteWith(chat("gpt-4o", tc.msgs...), Options{})
			if got := res.FirstAsk(tc.max); got != tc.want {
				t.Fatalf("FirstAsk(%d) = %q, want %q", tc.max, got, tc.want)
			}
		})
	}
	if got := (Result{}).FirstAsk(80); got != "" {
		t.Errorf("a Result not understood: %q", got)
	}
}

func TestClipCountsRunes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"héllo wörld", 7, "héllo …"},
		{"a\t\tb\n\nc", 10, "a b c"},
		{strings.Repeat(" ", 100) + "x", 3, "…"}, // cut before collapsing: an ellipsis says so
	} {
		if got := clip(tc.in, tc.max); got != tc.want {
			t.Errorf("clip(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}
