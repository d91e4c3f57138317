package rewrite

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ctxpress/ctxpress/history"
)

// The chain a Pipeline remembers must be the chain of the request in
// hand: for a history growing turn by turn, a retry, a rewound one and one
// with an earlier message edited, it equals the chain a fresh Pipeline
// computes from the messages themselves.
func TestRememberedChainIsTheRequestsOwn(t *testing.T) {
	sys := `{"role":"system","content":"You are a coding agent."}`
	var msgs []string
	msgs = append(msgs, sys, `{"role":"user","content":"fix the bug"}`)
	for i := range 12 {
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs, callMsg(id, "bash", jsonString(fmt.Sprintf(`{"command":"step %d"}`, i))), resultMsg(id, fmt.Sprintf("output %d", i)))
	}
	edited := slices.Clone(msgs)
	edited[3] = resultMsg("c0", "output 0, edited")
	var bodies [][]byte
	for _, n := range []int{2, 4, 6, 6, 8, 14, 26, 12, 26} { // growing, a retry, rewound
		bodies = append(bodies, chat("gpt-4o", msgs[:n]...))
	}
	bodies = append(bodies, chat("gpt-4o", edited[:26]...), chat("gpt-4o", edited[:8]...), chat("gpt-4o", msgs[:26]...))
	for _, tr := range loadTraces(t) {
		req, _ := parseRequest(tr.body)
		n := len(req.messages)
		for _, k := range []int{n / 2, n/2 + 2, n, n} {
			bodies = append(bodies, prefixBody(t, tr.body, k))
		}
	}
	p := New(Config{Format: chatFormat})
	// With a stored summary to match, the chain is made in two steps (to
	// the branch, then to the end) from keys made once.
	branched := Options{Branches: []history.Branch{{Summary: "s", Covered: 1}}}
	for i, body := range bodies {
		for _, opts := range []Options{{}, branched} {
			got := p.RewriteWith(body, opts).HistoryChain()
			want := New(Config{Format: chatFormat}).RewriteWith(body, opts).HistoryChain()
			if len(want) < 2 || !slices.Equal(got, want) {
				t.Fatalf("body %d: remembered chain of %d hashes differs from its own %d", i, len(got), len(want))
			}
		}
	}
}
