package wire

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"
)

func TestAppendUserText(t *testing.T) {
	f := UserText{
		IsUser:    func(m []byte) bool { return gjson.GetBytes(m, "role").Str == "user" },
		CanFollow: func(m []byte) bool { return gjson.GetBytes(m, "role").Str != "system" },
		Part:      func(s string) []byte { return append(append([]byte(`{"t":`), AppendJSONString(nil, s)...), '}') },
		Message: func(s string) []byte {
			return append(append([]byte(`{"role":"user","c":`), AppendJSONString(nil, s)...), '}')
		},
		Bridge: func(m []byte) []byte {
			if gjson.GetBytes(m, "role").Str == "tool" {
				return []byte(`{"role":"assistant"}`)
			}
			return nil
		},
	}
	rows := []struct {
		name, body, want string
		ok               bool
	}{
		{"a string content gets the text after a blank line, escaped as JSON",
			`{"m":[{"role":"user","content":"a\u00e9"}]}`, `{"m":[{"role":"user","content":"a\u00e9\n\n\"x\""}]}`, true},
		{"a list gets one more part", `{"m":[{"role":"user","content":[ {"t":"a"} ]}]}`, `{"m":[{"role":"user","content":[ {"t":"a"} ,{"t":"\"x\""}]}]}`, true},
		{"an empty list gets its first part", `{"m":[{"role":"user","content":[ ]}]}`, `{"m":[{"role":"user","content":[ {"t":"\"x\""}]}]}`, true},
		{"a user message without content is followed by a new one", `{"m":[{"role":"user"}]}`, `{"m":[{"role":"user"},{"role":"user","c":"\"x\""}]}`, true},
		{"after an assistant: a new user message", `{"m": [ {"role":"assistant","content":"hi"} ] ,"z":1}`, `{"m": [ {"role":"assistant","content":"hi"},{"role":"user","c":"\"x\""} ] ,"z":1}`, true},
		{"after a tool result: the bridge, then the user", `{"m":[{"role":"tool","content":"ok"}]}`, `{"m":[{"role":"tool","content":"ok"},{"role":"assistant"},{"role":"user","c":"\"x\""}]}`, true},
		{"the key is the top level's, not a nested one", `{"o":{"m":[1]},"m":[{"role":"user","content":"a"}]}`, `{"o":{"m":[1]},"m":[{"role":"user","content":"a\n\n\"x\""}]}`, true},
		{"nothing may follow a system message", `{"m":[{"role":"system","content":"a"}]}`, ``, false},
		{"no messages", `{"m":[]}`, ``, false},
		{"no array", `{"m":"text"}`, ``, false},
		{"an element that is no object", `{"m":["x"]}`, ``, false},
	}
	for _, r := range rows {
		out, ok := AppendUserText([]byte(r.body), "m", `"x"`, f)
		if ok != r.ok || string(out) != r.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s (%v)", r.name, out, ok, r.want, r.ok)
		}
		if ok && !json.Valid(out) {
			t.Errorf("%s: invalid JSON", r.name)
		}
	}
}
