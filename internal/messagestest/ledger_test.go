package messagestest

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// loop is a tool loop against a ledger-keeping upstream: each turn the
// upstream answers with an (omitted-text) thinking block and a tool call,
// and the client appends the call's result.
type loop struct {
	l    *Ledger
	msgs []string
	n    int
}

func newLoop(t *testing.T, turns int) *loop {
	c := &loop{l: NewLedger(), msgs: []string{ask}}
	for i := 0; i < turns; i++ {
		c.turn(t)
	}
	return c
}

func (c *loop) turn(t *testing.T) {
	t.Helper()
	r, err := Check(req(strings.Join(c.msgs, ","), `"thinking":{"type":"adaptive"}`), Options{Ledger: c.l})
	if err != nil {
		t.Fatalf("turn %d refused: %v", c.n+1, err)
	}
	c.n++
	ans := fmt.Sprintf("msg_%d", c.n)
	sig := c.l.Think(r, ans, "")
	id := fmt.Sprintf("toolu_%d", c.n)
	c.l.ToolUse(ans, id)
	c.msgs = append(c.msgs,
		fmt.Sprintf(`{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":%q},{"type":"text","text":"Running."},{"type":"tool_use","id":%q,"name":"Bash","input":{"command":"ls"}}]}`, sig, id),
		fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":%q,"content":"output %d"}]}`, id, c.n))
}

var thinkingBlock = regexp.MustCompile(`\{"type":"thinking","thinking":"","signature":"[^"]*"\},`)

func TestThinkingAsTheUpstreamIssuedIt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		edit     func(msgs []string) []string
		thinking string
		want     string   // refusal; "" accepted
		dropped  []string // with drop_block
	}{
		{name: "sent back unchanged", edit: func(m []string) []string { return m }},
		{name: "a marker moved and a string turned into its text block", edit: func(m []string) []string {
			m[0] = `{"role":"user","content":[{"type":"text","text":"List the files.",` + marker + `}]}`
			return m
		}},
		{name: "a thinking text changed", edit: func(m []string) []string {
			m[1] = strings.Replace(m[1], `"thinking":""`, `"thinking":"x"`, 1)
			return m
		}, want: "messages.1.content.0: Invalid `signature` in `thinking` block"},
		{name: "a signature the upstream never issued", edit: func(m []string) []string {
			m[3] = thinkingBlock.ReplaceAllString(m[3], `{"type":"thinking","thinking":"","signature":"Zm9yZ2Vk"},`)
			return m
		}, want: "messages.3.content.0: Invalid `signature` in `thinking` block"},
		{name: "an earlier tool result changed after it was sent", edit: func(m []string) []string {
			m[2] = strings.Replace(m[2], "output 1", "output 1 squashed", 1)
			return m
		}, want: "messages.3.content.0: Invalid `signature` in `thinking` block"},
		{name: "an earlier tool result changed, with the drop_block opt-out", edit: func(m []string) []string {
			m[2] = strings.Replace(m[2], "output 1", "output 1 squashed", 1)
			return m
		}, thinking: `"thinking":{"type":"adaptive","block_binding":{"prefix_mismatch_behavior":"drop_block"}}`,
			dropped: []string{"messages.3.content.0", "messages.5.content.0"}},
		{name: "the system prompt changed", edit: func(m []string) []string { return m },
			thinking: `"system":"changed","thinking":{"type":"adaptive"}`, want: "messages.1.content.0: Invalid `signature` in `thinking` block"},
		{name: "the latest thinking dropped inside the tool loop", edit: func(m []string) []string {
			m[5] = thinkingBlock.ReplaceAllString(m[5], "")
			return m
		}, want: "`thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified. These blocks must remain as they were in the original response."},
		{name: "a marker added to the latest thinking", edit: func(m []string) []string {
			m[5] = strings.Replace(m[5], `"thinking":"",`, `"thinking":"",`+marker+`,`, 1)
			return m
		}, want: "messages.5.content.0.thinking.cache_control: Extra inputs are not permitted"},
		{name: "all earlier thinking left out at a new user turn", edit: func(m []string) []string {
			for i := range m {
				m[i] = thinkingBlock.ReplaceAllString(m[i], "")
			}
			return append(m, answer, `{"role":"user","content":"Now read a.py."}`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newLoop(t, 3)
			thinking := tc.thinking
			if thinking == "" {
				thinking = `"thinking":{"type":"adaptive"}`
			}
			r, err := Check(req(strings.Join(tc.edit(c.msgs), ","), thinking), Options{Ledger: c.l})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted, want %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Message, tc.want):
				t.Fatalf("got %q, want %q", err.Message, tc.want)
			case tc.want == "" && fmt.Sprint(r.Dropped) != fmt.Sprint(tc.dropped):
				t.Fatalf("dropped %v, want %v", r.Dropped, tc.dropped)
			}
		})
	}
}

// A long tool loop sent back as issued is accepted on every turn, each
// kept thinking block verified.
func TestLongToolLoopKeepsEveryThinkingBlockValid(t *testing.T) {
	c := newLoop(t, 12)
	// Turn k verifies the k-1 thinking blocks sent back: 0+1+...+11.
	if got := c.l.Verified(); got != 66 {
		t.Fatalf("verified %d thinking blocks, want 66", got)
	}
}
