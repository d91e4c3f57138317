package compactor

import (
	"strings"
	"testing"
)

func TestDefaultMaxTokens(t *testing.T) {
	for _, tc := range []struct{ trigger, want int }{
		{0, 4000}, {-1, 4000}, {8000, 2000}, {16000, 4000}, {102400, 4000}, {2, 1},
	} {
		if got := DefaultMaxTokens(tc.trigger); got != tc.want {
			t.Errorf("DefaultMaxTokens(%d) = %d, want %d", tc.trigger, got, tc.want)
		}
	}
}

func TestTranscriptBudget(t *testing.T) {
	t.Run("4 chars per token", func(t *testing.T) { testTranscriptBudget(t, func(s string) int { return len(s) / 4 }) })
	// A counter whose ratio varies along the transcript (code and logs
	// are denser than prose): the ratio is measured on a sample of a long
	// transcript, and the budget must still fit.
	t.Run("dense punctuation", func(t *testing.T) {
		testTranscriptBudget(t, func(s string) int {
			n, letters := 0, 0
			for i := 0; i < len(s); i++ {
				if c := s[i] | 0x20; c >= 'a' && c <= 'z' {
					letters++
				} else {
					n++
				}
			}
			return n + letters/4
		})
	})
}

func testTranscriptBudget(t *testing.T, counter func(string) int) {
	tr := bigTrace(t)
	msgs := tr.msgs[LeadingSystem(tr.msgs):]
	// Measured on the transcript, and given as the caller's cached counts
	// of the texts (with a few tokens of framing per message).
	cached := 0
	for _, m := range msgs {
		cached += counter(m.Text) + 4
		for _, c := range m.ToolCalls {
			cached += counter(c.Name) + counter(c.Arguments)
		}
	}
	for _, known := range []int{0, cached} {
		testTranscriptBudgetWith(t, counter, msgs, known)
	}
}

func testTranscriptBudgetWith(t *testing.T, counter func(string) int, msgs []Message, known int) {
	for _, tc := range []struct {
		window, maxTokens int
		prev              string
	}{
		{2048, 409, ""},
		{8192, 1024, ""},
		{32768, 4000, ""},
		{32768, 4000, strings.Repeat("previous summary line\n", 300)},
		{131072, 4000, ""},
	} {
		budget := TranscriptBudget(tc.window, tc.maxTokens, counter, tc.prev, msgs, known)
		if budget <= 0 {
			t.Fatalf("window %d: budget %d", tc.window, budget)
		}
		prompt := BuildPromptFor(tc.window, tc.prev, Transcript(msgs, budget))
		if used := counter(prompt) + tc.maxTokens; used > tc.window {
			t.Errorf("known %d, window %d: prompt %d + max_tokens %d = %d tokens, over the window", known,
				tc.window, counter(prompt), tc.maxTokens, used)
		}
		if used := counter(prompt) + tc.maxTokens; used < tc.window/2 && budget < len(Transcript(msgs, 0)) {
			t.Errorf("window %d: only %d tokens used while the transcript was cut", tc.window, used)
		}
	}
	if b := TranscriptBudget(2000, 1800, counter, "", msgs, known); b > 0 {
		t.Errorf("no room left, yet budget %d", b)
	}
	if b := TranscriptBudget(100000, 1000, nil, "", nil, 0); b <= 0 {
		t.Errorf("nil counter: budget %d", b)
	}
}
