package messages

import "testing"

// A request that asks drop_block carries its beta merged into the
// client's anthropic-beta headers: the client's betas kept in order, the
// beta once, last.
func TestWithBeta(t *testing.T) {
	const b = BetaThinkingBinding
	rows := []struct {
		name   string
		values []string
		want   string // "" when nothing is added
	}{
		{"no header: the beta alone", nil, b},
		{"one beta: appended", []string{"claude-code-20250219"}, "claude-code-20250219," + b},
		{"a list: appended after it, in its order", []string{"claude-code-20250219,interleaved-thinking-2025-05-14"},
			"claude-code-20250219,interleaved-thinking-2025-05-14," + b},
		{"several headers: one list, in their order", []string{"z-beta", "a-beta, m-beta"}, "z-beta,a-beta,m-beta," + b},
		{"blanks and spaces left out", []string{" a-beta ,, b-beta", ""}, "a-beta,b-beta," + b},
		{"the client has it: nothing changes", []string{"a-beta," + b + ",c-beta"}, ""},
		{"the client has it in another header: nothing changes", []string{"a-beta", " " + b}, ""},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			got, added := WithBeta(r.values, b)
			if added != (r.want != "") || got != r.want {
				t.Fatalf("WithBeta(%q) = %q, %v; want %q", r.values, got, added, r.want)
			}
		})
	}
}
