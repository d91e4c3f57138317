package compactor

import (
	"strings"
	"testing"
)

func TestBlock(t *testing.T) {
	got := Block("\n## Goal\nShip it.\n")
	want := "<conversation_summary>\n" + SummaryPrefix + "\n## Goal\nShip it.\n</conversation_summary>"
	if got != want {
		t.Errorf("Block =\n%s\nwant\n%s", got, want)
	}
	for _, w := range []string{"reference only", "compacted", "## Active Task"} {
		if !strings.Contains(strings.ToLower(SummaryPrefix), strings.ToLower(w)) {
			t.Errorf("SummaryPrefix does not say %q", w)
		}
	}
	if b := Block("x </conversation_summary> y"); strings.Count(b, "</conversation_summary>") != 1 {
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
