package compactor

import (
	"strings"
	"testing"
)

func TestSummaryTemplate(t *testing.T) {
	var heads []string
	for _, l := range strings.Split(SummaryTemplate, "\n") {
		if strings.HasPrefix(l, "## ") {
			heads = append(heads, l)
		}
	}
	if len(heads) != 13 {
		t.Fatalf("%d sections, want 13: %q", len(heads), heads)
	}
	if heads[len(heads)-1] != "## Active Task" {
		t.Errorf("last section %q, want ## Active Task", heads[len(heads)-1])
	}
	all := strings.ToLower(strings.Join(heads, "|"))
	for _, topic := range []string{"goal", "constraints", "preferences", "completed actions", "active state", "blocked",
		"decisions", "resolved questions", "pending user asks", "relevant files", "remaining work", "critical context"} {
		if !strings.Contains(all, topic) {
			t.Errorf("no section about %q", topic)
		}
	}
	for _, want := range []string{"numbered", "past tense", "outcome", "paths", "error strings", "commands"} {
		if !strings.Contains(SummaryTemplate, want) {
			t.Errorf("template does not ask for %q", want)
		}
	}
}

func TestBuildPrompt(t *testing.T) {
	transcript := Transcript([]Message{user("rename foo to bar in main.go"), asst("Done: renamed.")}, 0)

	first := BuildPromptFor(0, "", transcript)
	for _, want := range []string{SummarizerPreamble, "create a structured checkpoint summary", transcript, SummaryTemplate} {
		if !strings.Contains(first, want) {
			t.Errorf("first prompt lacks %.50q", want)
		}
	}
	if !strings.HasPrefix(first, SummarizerPreamble) || !strings.HasSuffix(first, "## Active Task\n"+activeTaskLine()) {
		t.Error("first prompt: preamble not first or template not last")
	}
	if strings.Contains(first, "PREVIOUS SUMMARY") {
		t.Error("first prompt mentions a previous summary")
	}

	prev := "## Goal\nRename foo.\n## Active Task\nRun the tests."
	second := BuildPromptFor(0, prev, transcript)
	for _, want := range []string{SummarizerPreamble, "PREVIOUS SUMMARY:", prev, transcript, SummaryTemplate, "updated summary"} {
		if !strings.Contains(second, want) {
			t.Errorf("update prompt lacks %.50q", want)
		}
	}
	if i, j := strings.Index(second, prev), strings.Index(second, transcript); i > j {
		t.Error("the previous summary should come before the new turns")
	}
	if strings.Contains(second, "create a structured checkpoint summary") {
		t.Error("update prompt asks for a new summary")
	}

	// A rendered block passed as prev is unwrapped: no nested summaries.
	nested := BuildPromptFor(0, Block(prev, ""), transcript)
	if strings.Contains(nested, "<conversation_summary>") || strings.Contains(nested, SummaryPrefix) {
		t.Error("a previous Block was nested into the prompt")
	}
	if nested != second {
		t.Error("BuildPromptFor(0, Block(prev)) differs from BuildPromptFor(0, prev)")
	}
	// Its line on the messages kept is the block's, not the summary's.
	if withKept := BuildPromptFor(0, Block(prev, KeptNote(40, "original kept by ctxpress as ref 3f9a2c1b4d5e")), transcript); withKept != second {
		t.Errorf("a previous Block with its kept line was not unwrapped to the summary:\n%s", withKept)
	}
}

// activeTaskLine is the template's text under its last heading.
func activeTaskLine() string {
	_, after, _ := strings.Cut(SummaryTemplate, "## Active Task\n")
	return after
}

// A small summariser window gets the compact prompt: the same 13 sections
// and rules, far fewer tokens; the first sentence marks both.
func TestCompactPromptForSmallWindows(t *testing.T) {
	full, compact := BuildPromptFor(128000, "", "T"), BuildPromptFor(2048, "", "T")
	if full != BuildPromptFor(0, "", "T") {
		t.Fatal("a large window does not get the full prompt")
	}
	if len(compact) > len(full)/3 {
		t.Fatalf("compact prompt %d bytes, full %d", len(compact), len(full))
	}
	for _, p := range []string{full, compact} {
		if !strings.HasPrefix(p, SummarizerLead) || strings.Count(p, "\n## ") != 13 || !strings.Contains(p, "\n## Active Task") {
			t.Fatalf("prompt lacks the lead or the 13 sections:\n%s", p)
		}
	}
	if upd := BuildPromptFor(2048, "old summary", "T"); !strings.Contains(upd, "PREVIOUS SUMMARY:") || !strings.Contains(upd, "old summary") {
		t.Fatal("compact update prompt lacks the previous summary")
	}
}
