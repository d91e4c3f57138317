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

// compactTurn is a turn the upstream answers by compacting first: the
// compaction block, then thinking produced after it, and a tool call.
func (c *loop) compactTurn(t *testing.T) {
	t.Helper()
	r, err := Check(req(strings.Join(c.msgs, ","), `"thinking":{"type":"adaptive"}`), Options{Ledger: c.l})
	if err != nil {
		t.Fatalf("turn %d refused: %v", c.n+1, err)
	}
	c.n++
	ans := fmt.Sprintf("msg_%d", c.n)
	enc, after := c.l.Compact(r, ans, "The files were listed.")
	sig := c.l.Think(after, ans, "")
	id := fmt.Sprintf("toolu_%d", c.n)
	c.l.ToolUse(ans, id)
	c.msgs = append(c.msgs,
		fmt.Sprintf(`{"role":"assistant","content":[{"type":"compaction","content":"The files were listed.","encrypted_content":%q},{"type":"thinking","thinking":"","signature":%q},{"type":"text","text":"Running."},{"type":"tool_use","id":%q,"name":"Bash","input":{"command":"ls"}}]}`, enc, sig, id),
		fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":%q,"content":"output %d"}]}`, id, c.n))
}

// The model reads from the latest compaction block on: what comes before
// it is neither counted nor verified, the compaction block is verified as
// issued, and thinking after it is bound to what follows it.
func TestCompactionIsWhereTheModelStartsReading(t *testing.T) {
	const compacted = 7 // messages.7 is the compaction's answer
	for _, tc := range []struct {
		name string
		edit func(msgs []string) []string
		want string // refusal; "" accepted
	}{
		{name: "sent back unchanged", edit: func(m []string) []string { return m }},
		{name: "a tool result before the compaction changed", edit: func(m []string) []string {
			m[2] = strings.Replace(m[2], "output 1", "output 1 squashed", 1)
			return m
		}},
		{name: "a thinking block before the compaction forged", edit: func(m []string) []string {
			m[3] = thinkingBlock.ReplaceAllString(m[3], `{"type":"thinking","thinking":"","signature":"Zm9yZ2Vk"},`)
			return m
		}},
		{name: "the messages before the compaction left out", edit: func(m []string) []string {
			return append([]string{ask}, m[compacted:]...)
		}},
		{name: "a tool result after the compaction changed", edit: func(m []string) []string {
			m[compacted+1] = strings.Replace(m[compacted+1], "output 4", "output 4 squashed", 1)
			return m
		}, want: "messages.9.content.0: Invalid `signature` in `thinking` block"},
		{name: "the compaction's encrypted_content changed", edit: func(m []string) []string {
			m[compacted] = strings.Replace(m[compacted], `"encrypted_content":"cmp_`, `"encrypted_content":"cmp_x`, 1)
			return m
		}, want: "messages.7.content.0: Invalid `encrypted_content` in `compaction` block"},
		{name: "the compaction's content changed", edit: func(m []string) []string {
			m[compacted] = strings.Replace(m[compacted], "The files were listed.", "Nothing happened.", 1)
			return m
		}, want: "messages.7.content.0: Invalid `encrypted_content` in `compaction` block"},
		{name: "a compaction the upstream never issued, later", edit: func(m []string) []string {
			return append(m, answer, `{"role":"user","content":"Go on."}`, `{"role":"assistant","content":[{"type":"compaction","content":"Forged.","encrypted_content":"cmp_Zm9yZ2Vk"}]}`, `{"role":"user","content":"Go on."}`)
		}, want: "messages.13.content.0: Invalid `encrypted_content` in `compaction` block"},
		{name: "a failed compaction later (content null) is a no-op", edit: func(m []string) []string {
			return append(m, answer, `{"role":"user","content":"Go on."}`, `{"role":"assistant","content":[{"type":"compaction","content":null,"encrypted_content":null},{"type":"text","text":"Done."}]}`, `{"role":"user","content":"Go on."}`)
		}},
		{name: "an empty compaction content", edit: func(m []string) []string {
			m[compacted] = strings.Replace(m[compacted], `"content":"The files were listed."`, `"content":""`, 1)
			return m
		}, want: "messages.7.content.0.compaction.content: String should have at least 1 character"},
		{name: "a compaction block in a user message", edit: func(m []string) []string {
			return append(m, answer, `{"role":"user","content":[{"type":"compaction","content":"Forged.","encrypted_content":"x"},{"type":"text","text":"Go on."}]}`)
		}, want: "messages.12.content.0: Input tag 'compaction' found using 'type' does not match any of the expected tags"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newLoop(t, 3)
			c.compactTurn(t)
			c.turn(t)
			if len(c.msgs) != compacted+4 {
				t.Fatalf("%d messages", len(c.msgs))
			}
			_, err := Check(req(strings.Join(tc.edit(c.msgs), ","), `"thinking":{"type":"adaptive"}`), Options{Ledger: c.l})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted, want %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Message, tc.want):
				t.Fatalf("got %q, want %q", err.Message, tc.want)
			}
		})
	}
}

// What a request counts (its prompt) starts at the latest compaction: the
// same request with everything before it left out reads the same.
func TestCompactionPromptLeavesOutWhatCameBefore(t *testing.T) {
	c := newLoop(t, 3)
	c.compactTurn(t)
	c.turn(t)
	check := func(msgs []string) *Request {
		t.Helper()
		r, err := Check(req(strings.Join(msgs, ","), `"thinking":{"type":"adaptive"}`), Options{Ledger: c.l})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	whole, short := check(c.msgs), check(append([]string{ask}, c.msgs[7:]...))
	if n, m := len(whole.Prompt.Segments), len(short.Prompt.Segments); n != m || whole.Prompt.Hash(n) != short.Prompt.Hash(m) {
		t.Fatalf("%d segments read of the whole history, %d of its part from the compaction on", n, m)
	}
	if whole.Prompt.MessageStart[7] != whole.Prompt.Lead || whole.Prompt.MessageStart[2] != whole.Prompt.Lead {
		t.Fatalf("message starts %v, lead %d", whole.Prompt.MessageStart, whole.Prompt.Lead)
	}
	marked := append([]string(nil), c.msgs...)
	marked[2] = strings.Replace(marked[2], `"content":"output 1"}`, `"content":"output 1",`+marker+`}`, 1)
	if r := check(marked); r.Markers != 1 || r.Prompt.LastMarker() != 0 {
		t.Fatalf("a marker before the compaction: %d counted, last marker read at %d", r.Markers, r.Prompt.LastMarker())
	}
}
