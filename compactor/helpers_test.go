package compactor

import (
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/corpustest"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// corpusDir returns the shared corpus, skipping the test when it is absent.
func corpusDir(tb testing.TB) string { return corpustest.Dir(tb) }

// trace is one corpus request body, its messages as the compactor sees
// them, and each message's raw JSON.
type trace struct {
	name string
	body []byte
	msgs []Message
	raw  []string
}

// loadTraces reads every corpus trace, sorted by name.
func loadTraces(tb testing.TB) []trace {
	tb.Helper()
	var ts []trace
	for _, c := range corpustest.Traces(tb) {
		msgs, raw := parseMessages(tb, c.Body)
		ts = append(ts, trace{name: c.Name, body: c.Body, msgs: msgs, raw: raw})
	}
	return ts
}

// bigTrace returns the corpus trace with the most message text.
func bigTrace(tb testing.TB) trace {
	tb.Helper()
	var best trace
	bestN := -1
	for _, t := range loadTraces(tb) {
		if n := textBytes(t.msgs); n > bestN {
			best, bestN = t, n
		}
	}
	return best
}

// textBytes is the size of the text a transcript is made from.
func textBytes(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Text)
		for _, tc := range m.ToolCalls {
			n += len(tc.Name) + len(tc.Arguments)
		}
	}
	return n
}

// parseMessages converts a chat request body to []Message the way the
// rewrite package does: string content, or the text parts joined with "\n".
func parseMessages(tb testing.TB, body []byte) ([]Message, []string) {
	tb.Helper()
	if !gjson.ValidBytes(body) {
		tb.Fatal("body is not valid JSON")
	}
	var msgs []Message
	var raw []string
	for _, m := range gjson.GetBytes(body, "messages").Array() {
		msg := Message{
			Role:       roleOf(m.Get("role").String()),
			ToolCallID: m.Get("tool_call_id").String(),
			Name:       m.Get("name").String(),
		}
		switch c := m.Get("content"); {
		case c.IsArray():
			var parts []string
			for _, p := range c.Array() {
				if p.Get("type").String() == "text" {
					parts = append(parts, p.Get("text").String())
				}
			}
			msg.Text = strings.Join(parts, "\n")
		case c.Type == gjson.String:
			msg.Text = c.Str
		}
		for _, tc := range m.Get("tool_calls").Array() {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{
				ID:        tc.Get("id").String(),
				Name:      tc.Get("function.name").String(),
				Arguments: tc.Get("function.arguments").String(),
			})
		}
		msgs = append(msgs, msg)
		raw = append(raw, m.Raw)
	}
	return msgs, raw
}

// approxTokens is the 4-chars-per-token estimate the tests count with.
func approxTokens(s string) int { return len(s) / 4 }

// tokensOf returns a Cut token counter over msgs.
func tokensOf(msgs []Message) func(int) int {
	return func(i int) int {
		n := 4 + approxTokens(msgs[i].Text) // 4: per-message overhead
		for _, tc := range msgs[i].ToolCalls {
			n += approxTokens(tc.Name) + approxTokens(tc.Arguments)
		}
		return n
	}
}

// chatBody assembles a request body from raw message JSON.
func chatBody(raw []string) []byte {
	return []byte(`{"model":"m","messages":[` + strings.Join(raw, ",") + `]}`)
}

// roleOf is the neutral role of a chat role, as wire/chat reads it.
func roleOf(role string) wire.Role {
	switch role {
	case "system", "developer":
		return wire.RoleInstruction
	case "user":
		return wire.RoleUser
	case "assistant":
		return wire.RoleAssistant
	case "tool", "function":
		return wire.RoleTool
	}
	return wire.RoleOther
}

// Fake credentials are assembled at run time so secret scanners do not
// flag this file.
var (
	fakeOpenAI = "sk-" + "proj-" + strings.Repeat("aB3dE5", 8)
	fakeJWT    = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjMifQ." + "c2lnbmF0dXJlMTIz"
	fakeGitHub = "ghp_" + strings.Repeat("a1B2c3", 6)
	fakePEM    = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1234567890abcdef\nQWERTYuiop+/asdfGHJKL==\n-----END RSA PRIVATE KEY-----"
)
