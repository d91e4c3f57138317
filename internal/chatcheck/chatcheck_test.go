package chatcheck

import (
	"errors"
	"github.com/ctxpress/ctxpress/internal/corpustest"
	"strings"
	"testing"
)

func TestValidateChat(t *testing.T) {
	const (
		s    = `{"role":"system","content":"s"}`
		u    = `{"role":"user","content":"u"}`
		a    = `{"role":"assistant","content":"a"}`
		a2   = `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]}`
		r1   = `{"role":"tool","tool_call_id":"c1","content":"x"}`
		r2   = `{"role":"tool","tool_call_id":"c2","content":"y"}`
		fc   = `{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}}`
		fr   = `{"role":"function","name":"f","content":"z"}`
		body = `{"model":"m","messages":[%s]}`
	)
	join := func(m ...string) []byte { return []byte(strings.Replace(body, "%s", strings.Join(m, ","), 1)) }
	tests := []struct {
		name string
		body []byte
		want string // "" valid, else a substring of the error
	}{
		{"plain", join(s, u, a, u), ""},
		{"parallel calls answered", join(s, u, a2, r1, r2, a, u), ""},
		{"results in any order", join(u, a2, r2, r1), ""},
		{"system between results", join(u, a2, r1, s, r2), ""},
		{"legacy function", join(u, fc, fr, a), ""},
		{"no user", join(s, a), "no user message"},
		{"orphan first", join(s, r1, u), "messages[1]: tool result is the first message"},
		{"unknown result id", join(u, a2, r1, r2, `{"role":"tool","tool_call_id":"zz","content":""}`), `messages[4]: tool result "zz" answers no tool_call`},
		{"result after the next turn", join(u, a2, r1, u, r2), `messages[1]: tool_call "c2" has no tool result before the next user message (messages[3])`},
		{"call never answered", join(u, a2, r1), `messages[1]: tool_call "c2" has no tool result before the end`},
		{"result twice", join(u, a2, r1, r1, r2), `messages[3]: second tool result for tool_call "c1"`},
		{"result without id", join(u, a2, `{"role":"tool","content":"x"}`), "messages[2]: tool result without tool_call_id"},
		{"call without id", join(u, `{"role":"assistant","tool_calls":[{"type":"function"}]}`), "messages[1]: tool_calls[0] has no id"},
		{"function result without call", join(u, a, fr), "messages[2]: function result without"},
		{"unknown role", join(u, `{"role":"robot"}`), `messages[1]: unknown role "robot"`},
		{"no role", join(u, `{"content":"x"}`), "messages[1]: no role"},
		{"not json", []byte(`{"messages":[`), "not valid JSON"},
		{"no messages", []byte(`{"model":"m"}`), "no messages array"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateChat(tc.body)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("valid request rejected: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("accepted, want error %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			case err != nil && !errors.Is(err, ErrInvalidChat):
				t.Errorf("error %v does not wrap ErrInvalidChat", err)
			}
		})
	}
}

// TestValidateChatCorpus: every corpus trace is valid as sent.
func TestValidateChatCorpus(t *testing.T) {
	for _, tr := range corpustest.Traces(t) {
		if err := ValidateChat(tr.Body); err != nil {
			t.Errorf("%s: %v", tr.Name, err)
		}
	}
}

// The role rule of strict chat templates: after the system messages, user
// and assistant alternate, starting with a user; tool results and the
// assistant messages that call tools are left out of the count, as those
// templates do.
func TestValidateAlternation(t *testing.T) {
	const (
		s    = `{"role":"system","content":"s"}`
		u    = `{"role":"user","content":"u"}`
		a    = `{"role":"assistant","content":"a"}`
		call = `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
		r    = `{"role":"tool","tool_call_id":"c1","content":"x"}`
		body = `{"model":"m","messages":[%s]}`
	)
	join := func(m ...string) []byte { return []byte(strings.Replace(body, "%s", strings.Join(m, ","), 1)) }
	tests := []struct {
		name string
		body []byte
		want string // "" valid, else a substring of the error
	}{
		{"plain", join(s, u, a, u), ""},
		{"no system message", join(u, a, u), ""},
		{"tool loop between turns", join(s, u, call, r, call, r, a, u), ""},
		{"two user messages in a row", join(s, u, u, a), "messages[2]: role user where roles must alternate (assistant expected)"},
		{"assistant first", join(s, a, u), "messages[1]: role assistant where roles must alternate (user expected)"},
		{"a call first is left out, the text after it is not", join(s, call, r, a, u), "messages[3]: role assistant"},
		{"user after tool results, no reply in between", join(u, call, r, u), "messages[3]: role user"},
		{"system message later", join(s, u, a, s, u), "messages[3]: role system after the conversation started"},
		{"not json", []byte(`{"messages":[`), "not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateAlternation(tc.body)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("alternating request rejected: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("accepted, want error %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			case err != nil && !errors.Is(err, ErrInvalidChat):
				t.Errorf("error %v does not wrap ErrInvalidChat", err)
			}
		})
	}
}
