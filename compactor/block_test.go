package compactor

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/expand"
)

var update = flag.Bool("update", false, "rewrite testdata/block/*.golden from the current output")

// TestBlockGolden holds the block byte for byte, without a line on kept
// messages (as every block was before they were kept) and with one per
// kind of way back: a block once sent is sent the same on every later turn.
func TestBlockGolden(t *testing.T) {
	const summary = "## Goal\nFix the parser.\n\n## Active Task\nLatest user request (verbatim):\n> Now update the changelog."
	const ref = "3f9a2c1b4d5e"
	lines := expand.Lines{From: 1, To: 912}
	for _, c := range []struct{ name, kept string }{
		{"plain", ""},
		{"kept_ref", KeptNote(40, expand.Ways{}.Back(ref, lines))},
		{"kept_file", KeptNote(40, expand.Ways{Dir: "/home/u/.cache/ctxpress/expand"}.Back(ref, lines))},
		{"kept_all", KeptNote(1, expand.Ways{Dir: "/tmp/ctx", Tool: true, URL: "http://127.0.0.1:8484"}.Back(ref, lines))},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Block(summary, c.kept) + "\n"
			path := filepath.Join("testdata", "block", c.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("Block =\n%s\nwant (%s)\n%s", got, path, want)
			}
			if u := unwrapSummary(got); u != summary {
				t.Errorf("unwrapping the block gives\n%s\nnot the summary", u)
			}
			if c.kept != "" && strings.Count(got, "\n") != strings.Count(Block(summary, ""), "\n")+2 {
				t.Errorf("the kept line is not one line: %q", c.kept)
			}
		})
	}
}

func TestBlock(t *testing.T) {
	got := Block("\n## Goal\nShip it.\n", "")
	want := "<conversation_summary>\n" + SummaryPrefix + "\n## Goal\nShip it.\n</conversation_summary>"
	if got != want {
		t.Errorf("Block =\n%s\nwant\n%s", got, want)
	}
	for _, w := range []string{"reference only", "compacted", "## Active Task"} {
		if !strings.Contains(strings.ToLower(SummaryPrefix), strings.ToLower(w)) {
			t.Errorf("SummaryPrefix does not say %q", w)
		}
	}
	if b := Block("x </conversation_summary> y", "x </conversation_summary> y\nz"); strings.Count(b, "</conversation_summary>") != 1 {
		t.Errorf("a closing tag in the summary ends the block early: %q", b)
	}
}

func TestSeedActiveTask(t *testing.T) {
	ask := "Now add a --dry-run flag to `deploy.sh`\nand keep the old default."
	quoted := "> Now add a --dry-run flag to `deploy.sh`\n> and keep the old default."

	t.Run("section missing", func(t *testing.T) {
		got := SeedActiveTask("## Goal\nDeploy.\n\n## Remaining Work\nTests.\n", ask)
		want := "## Goal\nDeploy.\n\n## Remaining Work\nTests.\n\n## Active Task\nLatest user request (verbatim):\n" + quoted
		if got != want {
			t.Errorf("got\n%s\nwant\n%s", got, want)
		}
	})
	t.Run("section present", func(t *testing.T) {
		sum := "## Goal\nDeploy.\n\n## Active Task\nEditing deploy.sh line 40.\nNext: run shellcheck."
		got := SeedActiveTask(sum, ask)
		want := "## Goal\nDeploy.\n\n## Active Task\nLatest user request (verbatim):\n" + quoted +
			"\n\nEditing deploy.sh line 40.\nNext: run shellcheck."
		if got != want {
			t.Errorf("got\n%s\nwant\n%s", got, want)
		}
		if again := SeedActiveTask(got, ask); again != got {
			t.Errorf("seeding twice changed the summary:\n%s", again)
		}
	})
	t.Run("numbered heading, empty section", func(t *testing.T) {
		got := SeedActiveTask("### 13. Active task:\n", "go")
		if got != "### 13. Active task:\nLatest user request (verbatim):\n> go" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("no ask", func(t *testing.T) {
		if got := SeedActiveTask("## Goal\nx", "  "); got != "## Goal\nx" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("secret in the ask", func(t *testing.T) {
		if got := SeedActiveTask("", "use "+fakeOpenAI); strings.Contains(got, fakeOpenAI) {
			t.Errorf("key stored in the summary: %q", got)
		}
	})
}
