package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyTree copies the files under src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}

// A directory is read recursively: every session under it, named by its
// path there, its requests read when it is replayed; the files that hold
// no session are listed with why; one that cannot be read is a failed
// session with the reason, and the others are still found.
func TestLoadFindsTheSessionsOfATree(t *testing.T) {
	root := t.TempDir()
	copyTree(t, fixtureHome, root)
	write := func(rel, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, rel), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".codex/sessions/2026/12/05/rollout-opened-and-left.jsonl", `{"timestamp":"t","type":"session_meta","payload":{"id":"x"}}`+"\n")
	write("bodies.jsonl", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`+"\n{cut short\n")
	write("notes.json", `{"todo":["replay"]}`)
	if err := os.Symlink(filepath.Join(root, "gone.jsonl"), filepath.Join(root, "dangling.jsonl")); err != nil {
		t.Fatal(err)
	}

	found, err := Load([]string{root}, LoadOptions{BodyModel: "replay-model"})
	if err != nil {
		t.Fatal(err)
	}
	turns := map[string]int{}
	failed := map[string]string{}
	for _, s := range found.Sessions {
		if s.Err != nil {
			failed[s.Name] = s.Err.Error()
			continue
		}
		if s.Requests != nil {
			t.Errorf("%s: its requests were kept from the first reading", s.Name)
		}
		turns[s.Name] = s.Turns
	}
	want := map[string]int{
		".claude/projects/-tmp-ctxpress-fixture-project/cbb6cffc-97bd-402d-8115-d7a42cd07eb1.jsonl":                                   16,
		".claude/projects/-tmp-ctxpress-fixture-project/fbe4a9f3-0bb3-4f6e-972b-bc98f6817ff8.jsonl":                                   8,
		".claude/projects/-tmp-ctxpress-fixture-project/fbe4a9f3-0bb3-4f6e-972b-bc98f6817ff8/subagents/agent-ab59b5f993f9b0617.jsonl": 1,
		".claude/projects/-tmp-ctxpress-fixture-project/fbe4a9f3-0bb3-4f6e-972b-bc98f6817ff8/subagents/agent-ac5f5e8a7447e8603.jsonl": 2,
		".codex/sessions/2026/12/05/rollout-2026-12-05T04-18-33-01a2446c-d5c5-77a3-a6f7-588b7b7a2746.jsonl":                           16,
		".codex/sessions/2026/12/05/rollout-2026-12-05T04-18-40-01a2446c-f1fe-7593-92ea-3b584f2173ca.jsonl":                           13,
	}
	for name, n := range want {
		if turns[name] != n {
			t.Errorf("%s: %d requests, want %d", name, turns[name], n)
		}
	}
	if len(turns) != len(want) {
		t.Errorf("found %v, want %d sessions", turns, len(want))
	}
	if !strings.Contains(failed["bodies.jsonl"], "line 2") || !strings.Contains(failed["dangling.jsonl"], "no such file") || len(failed) != 2 {
		t.Errorf("failed: %v; want bodies.jsonl (line 2) and dangling.jsonl, with why", failed)
	}
	skipped := map[string]string{}
	for _, s := range found.Skipped {
		rel, _ := filepath.Rel(root, s.Path)
		skipped[filepath.ToSlash(rel)] = s.Reason
	}
	if len(skipped) != 4 || skipped["notes.json"] != errNotSession.Error() ||
		skipped[".codex/sessions/2026/12/05/rollout-opened-and-left.jsonl"] != errNoModelCalls.Error() ||
		!strings.HasPrefix(skipped[".claude/projects/-tmp-ctxpress-fixture-project/fbe4a9f3-0bb3-4f6e-972b-bc98f6817ff8/subagents/agent-ab59b5f993f9b0617.meta.json"], "not a session") {
		t.Errorf("skipped %v: want the two meta files and notes.json, not sessions, and the rollout with no model call", skipped)
	}

	// Read gives a found session its requests, as ReadFile does.
	for _, s := range found.Sessions {
		if !strings.HasSuffix(s.Name, "agent-ac5f5e8a7447e8603.jsonl") {
			continue
		}
		read, err := s.Read()
		if err != nil || len(read.Requests) != 2 {
			t.Fatalf("Read: %v, %d requests", err, len(read.Requests))
		}
		direct, _ := ReadFile(filepath.Join(root, s.Name), s.Name, LoadOptions{})
		if string(read.Requests[1]) != string(direct[0].Requests[1]) {
			t.Error("Read and ReadFile give different requests")
		}
	}
}

func TestDefaultSourcesAreWhereTheAgentsKeepSessions(t *testing.T) {
	for _, tc := range []struct {
		rule                        string
		home, claudeConfig, codex   string
		wantClaude, wantCodexInHome string
	}{
		{"the defaults: ~/.claude/projects and ~/.codex/sessions", "/h", "", "", "/h/.claude/projects", "/h/.codex/sessions"},
		{"$CLAUDE_CONFIG_DIR and $CODEX_HOME move them", "/h", "/c", "/x", "/c/projects", "/x/sessions"},
	} {
		got := DefaultSources(tc.home, tc.claudeConfig, tc.codex)
		if len(got) != 2 || got[0] != (Source{"claude-code", tc.wantClaude}) || got[1] != (Source{"codex", tc.wantCodexInHome}) {
			t.Errorf("%s: %+v", tc.rule, got)
		}
	}
}
