package compactor

import (
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/wire"
)

func TestHistoryPrompt(t *testing.T) {
	first := Message{Role: wire.RoleUser, Text: "Now run the tests\nand fix what fails."}
	rows := []struct {
		name      string
		in        HistoryInput
		want      []string
		wantNot   []string
		firstLine string
	}{
		{"it stops the agent, says what to keep by count and quote, and ends with the template",
			HistoryInput{Kept: 6, FirstKept: first},
			[]string{"Do not call any tool", `the conversation above up to the user's message "Now run the tests and fix what fails."`,
				"(6 in all)", "leave them out", "## Active Task as of the point where the summarised part ends", SummaryTemplate},
			[]string{blockOpen}, HistoryLead},
		{"a previous summary in the conversation is folded in",
			HistoryInput{Kept: 2, FirstKept: first, Prev: true},
			[]string{blockOpen + " of turns compacted earlier", "fold every fact", "ONE summary"}, nil, HistoryLead},
		{"nothing kept: the whole conversation",
			HistoryInput{Kept: 0},
			[]string{"the whole conversation above."}, []string{"up to the"}, HistoryLead},
		{"a small window gets the compact instruction and template",
			HistoryInput{Window: 2048, Kept: 3, FirstKept: first},
			[]string{"call no tool", compactTemplate, `before the user's message "Now run the tests and fix what fails.": from it on (3 messages)`}, []string{SummaryTemplate}, HistoryLead},
		{"a small window folds a previous summary in, briefly",
			HistoryInput{Window: 2048, Kept: 3, FirstKept: first, Prev: true},
			[]string{"Fold the " + blockOpen + " at its start into yours"}, []string{SummaryTemplate}, HistoryLead},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			p := HistoryPrompt(r.in)
			if !strings.HasPrefix(p, r.firstLine) || !IsSummaryPrompt(p) {
				t.Errorf("prompt does not open with %q: %.80q", r.firstLine, p)
			}
			for _, w := range r.want {
				if !strings.Contains(p, w) {
					t.Errorf("prompt lacks %.60q:\n%s", w, p)
				}
			}
			for _, w := range r.wantNot {
				if strings.Contains(p, w) {
					t.Errorf("prompt has %.60q", w)
				}
			}
			if !strings.HasSuffix(p, "## Active Task") && !strings.HasSuffix(p, activeTaskLine()) {
				t.Errorf("the template is not last: %q", p[len(p)-60:])
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	long := strings.Repeat("é", 200)
	rows := []struct {
		name string
		m    Message
		want string
	}{
		{"a user message by its text", Message{Role: wire.RoleUser, Text: "fix it"}, `the user's message "fix it"`},
		{"a tool result by its call and text", Message{Role: wire.RoleTool, ToolCallID: "call_7", Text: "ok\n"}, `the result of tool call call_7 "ok"`},
		{"a legacy result by its function", Message{Role: wire.RoleTool, Name: "bash", Text: "ok"}, `the result of tool call bash "ok"`},
		{"an assistant call without text by its first call", Message{Role: wire.RoleAssistant, ToolCalls: []ToolCall{{Name: "bash", Arguments: `{"command":"make"}`}, {Name: "read"}}},
			`the assistant's call to bash({"command":"make"})`},
		{"an assistant message with text by its text", Message{Role: wire.RoleAssistant, Text: "Looking.", ToolCalls: []ToolCall{{Name: "bash"}}}, `the assistant's message "Looking."`},
		{"a long text is cut on a rune", Message{Role: wire.RoleUser, Text: long}, `the user's message "` + long[:quoteChars] + `…"`},
		{"a system message", Message{Role: wire.RoleInstruction, Text: "Be brief."}, `the system message "Be brief."`},
	}
	for _, r := range rows {
		if got := Describe(r.m); got != r.want {
			t.Errorf("%s: %q, want %q", r.name, got, r.want)
		}
	}
}

func TestIsSummaryPrompt(t *testing.T) {
	rows := []struct {
		name string
		text string
		want bool
	}{
		{"a transcript prompt", BuildPromptFor(0, "", "[USER]: hi"), true},
		{"a history instruction alone", HistoryPrompt(HistoryInput{}), true},
		{"a history instruction after the user's text", "run the tests\n\n" + HistoryPrompt(HistoryInput{}), true},
		{"a history instruction after the user's text part", "run the tests\n" + HistoryPrompt(HistoryInput{}), true},
		{"a user turn", "run the tests", false},
		{"a user turn naming the lead mid-line", "what is " + HistoryLead + "?", false},
	}
	for _, r := range rows {
		if got := IsSummaryPrompt(r.text); got != r.want {
			t.Errorf("%s: %v, want %v", r.name, got, r.want)
		}
	}
}
