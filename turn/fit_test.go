package turn

import (
	"fmt"
	"testing"
)

// fitLimit takes what a request reserves for its answer off the model's
// window only while that is under half of it: so the limit is always over
// half the window, which lets fit skip reading the body of a request
// that counts no more than that.
func TestFitLimitTakesOffTheAnswersReserveUnderHalfTheWindow(t *testing.T) {
	const window = 128_000
	for _, row := range []struct {
		rule  string
		caps  string
		limit int
	}{
		{"no reserve: the whole window", ``, window},
		{"max_completion_tokens comes off", `,"max_completion_tokens":1000`, window - 1000},
		{"max_tokens comes off", `,"max_tokens":2000`, window - 2000},
		{"max_completion_tokens before max_tokens", `,"max_tokens":2000,"max_completion_tokens":1000`, window - 1000},
		{"just under half comes off", fmt.Sprintf(`,"max_tokens":%d`, window/2-1), window - (window/2 - 1)},
		{"half the window or more does not", fmt.Sprintf(`,"max_tokens":%d`, window/2), window},
		{"nor does a negative one", `,"max_tokens":-5`, window},
	} {
		body := []byte(`{"model":"gpt-4o","messages":[]` + row.caps + `}`)
		got := fitLimit(chatAPI, window, body)
		if got != row.limit {
			t.Errorf("%s: limit %d, want %d", row.rule, got, row.limit)
		}
		if got <= window/2 {
			t.Errorf("%s: limit %d is not over half the window %d", row.rule, got, window)
		}
	}
}
