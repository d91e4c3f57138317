package turn

import (
	"cmp"
	"testing"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

func TestRescueBudget(t *testing.T) {
	noSize := []byte(`{"error":{"message":"Your input exceeds the context window of this model.","code":"context_length_exceeded"}}`)
	sized := []byte(`{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 10000 tokens. Please reduce the length of the messages.","code":"context_length_exceeded"}}`)
	for _, tc := range []struct {
		rule              string
		window, refused   int
		answer            []byte
		ratio             float64 // the line's calibration (0: none)
		budget, shownWant int
		status            int // 0: 400
	}{
		{"the refusal names its window: the request scaled to it, that window shown", 128_000, 10_000, sized, 0, 7_782, 8_192, 0},
		{"no size, over the window ctxpress knows: that window's budget, nothing new shown", 8_000, 10_000, noSize, 0, 7_600, 0, 0},
		{"no size, within it: the real window is smaller, a quarter off the refused size", 128_000, 16_000, noSize, 0, 12_000, 12_000, 0},
		{"the same on a line whose upstream counts a fifth more: the window shown in its tokens", 128_000, 16_000, noSize, 1.2, 12_000, 14_400, 0},
		{"exactly at the window's budget counts as within", 16_000, 15_200, noSize, 0, 11_400, 11_400, 0},
		{"a 5xx without sizes (a shared KV cache full): the window's budget, nothing shown", 128_000, 16_000,
			[]byte(`{"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}`), 0, 121_600, 0, 500},
	} {
		status := cmp.Or(tc.status, 400)
		refused := rewrite.Result{TokensAfter: tc.refused, Body: []byte(`{"model":"m","messages":[]}`)}
		budget, shown := rescueBudget(chatAPI, tc.window, refused, status, tc.answer, state.Line{Numbers: history.Numbers{Calibration: history.Calibration{Ratio: tc.ratio}}})
		if budget != tc.budget || shown != tc.shownWant {
			t.Errorf("%s: rescueBudget = %d, %d; want %d, %d", tc.rule, budget, shown, tc.budget, tc.shownWant)
		}
	}
}
