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

func TestEffective(t *testing.T) {
	for _, tc := range []struct {
		est, lastEst, lastIn int
		cal                  float64
		want                 int
	}{
		{1000, 0, 0, 0, 1000},       // nothing known
		{1000, 900, 1800, 2, 2000},  // calibrated
		{1000, 1000, 1234, 2, 1234}, // the very request the upstream counted
		{1000, 900, 450, 0.5, 500},
	} {
		if got := Effective(tc.est, tc.lastEst, tc.lastIn, tc.cal); got != tc.want {
			t.Errorf("Effective(%d,%d,%d,%v) = %d, want %d", tc.est, tc.lastEst, tc.lastIn, tc.cal, got, tc.want)
		}
	}
}
