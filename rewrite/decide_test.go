package rewrite

import "testing"

func TestTriggerAndContextWindow(t *testing.T) {
	c := TriggerConfig{Models: map[string]int{"stories": 2048}, DefaultContextWindow: 32768}
	for _, tc := range []struct {
		model        string
		window, trig int
	}{
		{"stories", 2048, 1638},
		{"gpt-4o-mini", 128000, 102400},
		{"openai/gpt-4o", 128000, 102400},
		{"gpt-4", 8192, 6553},
		{"gpt-4-turbo-2024-04-09", 128000, 102400},
		{"claude-sonnet-4-20250514", 200000, 160000},
		{"my-local-model", 32768, 26214},
	} {
		if w := c.ContextWindow(tc.model); w != tc.window {
			t.Errorf("ContextWindow(%s) = %d, want %d", tc.model, w, tc.window)
		}
		if tr := c.Trigger(tc.model); tr != tc.trig {
			t.Errorf("Trigger(%s) = %d, want %d", tc.model, tr, tc.trig)
		}
	}
	if got := (TriggerConfig{ThresholdTokens: 5000}).Trigger("gpt-4o"); got != 5000 {
		t.Errorf("absolute threshold: %d", got)
	}
}
