package replay

import (
	"fmt"
	"strings"
	"testing"
)

// text is a message content of about n tokens, different for each seed.
func text(seed string, n int) string {
	return strings.Repeat(seed+" ", n)
}

// chatBody is a chat request of model with tools and messages (JSON).
func chatBody(model, tools string, msgs ...string) string {
	return fmt.Sprintf(`{"model":%q,"tools":[%s],"messages":[%s]}`, model, tools, strings.Join(msgs, ","))
}

func user(content string) string { return fmt.Sprintf(`{"role":"user","content":%q}`, content) }

func assistant(content string) string {
	return fmt.Sprintf(`{"role":"assistant","content":%q}`, content)
}

const (
	toolA = `{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}`
	toolB = `{"type":"function","function":{"name":"bash","description":"run it","parameters":{"type":"object"}}}`
)

// prefixTokens is what a request of the elements of body costs before its
// reply priming: the tokens a cache serving all of it would report.
func prefixTokens(t *testing.T, tok *Tokens, f Format, body string) int {
	t.Helper()
	p, err := tok.prompt(f, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return p.tokens - p.conv.Priming
}

func TestPrefixCacheServesTheLongestSharedPrefix(t *testing.T) {
	tok := NewTokens()
	sys := `{"role":"system","content":"You are an agent."}`
	u1, a1, u2, a2, u3 := user(text("alpha", 1100)), assistant(text("beta", 600)), user(text("gamma", 600)),
		assistant(text("delta", 600)), user(text("omega", 600))
	turn1 := chatBody("m", toolA, sys, u1)
	turn2 := chatBody("m", toolA, sys, u1, a1, u2)
	turn3 := chatBody("m", toolA, sys, u1, a1, u2, a2, u3)
	for _, tc := range []struct {
		rule    string
		format  Format
		earlier []string
		request string
		want    int // cached tokens
	}{
		{"the first request of a session: nothing cached", Chat, nil, turn2, 0},
		{"a history replayed unchanged: all of the earlier request cached", Chat,
			[]string{turn1, turn2}, turn3, prefixTokens(t, tok, Chat, turn2)},
		{"the same request again: all of it cached", Chat, []string{turn2}, turn2, prefixTokens(t, tok, Chat, turn2)},
		{"the tools changed: nothing cached (tools come first)", Chat,
			[]string{turn2}, chatBody("m", toolB, sys, u1, a1, u2, a2, u3), 0},
		{"another model: nothing cached", Chat, []string{turn2}, chatBody("m2", toolA, sys, u1, a1, u2, a2, u3), 0},
		{"a message edited in the middle: cached up to it", Chat,
			[]string{turn3}, chatBody("m", toolA, sys, u1, assistant("edited"), u2, a2, u3), prefixTokens(t, tok, Chat, turn1)},
		{"a shared prefix under 1024 tokens: nothing cached", Chat,
			[]string{chatBody("m", toolA, sys, user(text("alpha", 500)))},
			chatBody("m", toolA, sys, user(text("alpha", 500)), assistant("x"), user("y")), 0},
		{"the longest prefix with any earlier request, not only the last", Chat,
			[]string{turn3, chatBody("m", toolA, sys, user("another branch"))}, turn3 + "", prefixTokens(t, tok, Chat, turn3)},
		{"whitespace and key order are not what the provider reads: still cached", Chat,
			[]string{turn2}, strings.Replace(turn3, `{"role":"system","content":"You are an agent."}`,
				`{ "content" : "You are an agent.", "role":"system" }`, 1), prefixTokens(t, tok, Chat, turn2)},
		{"Messages: a cache_control marker moved on is not a change", Messages,
			[]string{`{"model":"m","max_tokens":9,"system":"You are an agent.","messages":[` +
				`{"role":"user","content":[{"type":"text","text":"` + text("alpha", 1100) + `","cache_control":{"type":"ephemeral"}}]}]}`},
			`{"model":"m","max_tokens":9,"system":"You are an agent.","messages":[` +
				`{"role":"user","content":[{"type":"text","text":"` + text("alpha", 1100) + `"}]},` +
				`{"role":"assistant","content":"ok"},{"role":"user","content":"go on"}]}`,
			prefixTokens(t, tok, Messages, `{"model":"m","max_tokens":9,"system":"You are an agent.","messages":[`+
				`{"role":"user","content":"`+text("alpha", 1100)+`"}]}`)},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			c := newPrefixCache()
			for _, b := range tc.earlier {
				p, err := tok.prompt(tc.format, []byte(b))
				if err != nil {
					t.Fatal(err)
				}
				c.serve(p.elements)
			}
			p, err := tok.prompt(tc.format, []byte(tc.request))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.serve(p.elements); got != tc.want {
				t.Errorf("cached %d tokens, want %d (request %d)", got, tc.want, p.tokens)
			}
		})
	}
}
