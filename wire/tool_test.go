package wire

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"
)

func TestAppendToList(t *testing.T) {
	rows := []struct {
		name, body, want string
		ok               bool
	}{
		{"after the last element, every other byte as it was", `{"a":1, "l": [ 1 ,2 ] ,"z":{}}`, `{"a":1, "l": [ 1 ,2 ,"x",{"y":2}] ,"z":{}}`, true},
		{"an empty list gets its first elements", `{"l":[ ]}`, `{"l":[ "x",{"y":2}]}`, true},
		{"the top level's member, not a nested one", `{"o":{"l":[]},"l":[0]}`, `{"o":{"l":[]},"l":[0,"x",{"y":2}]}`, true},
		{"no such member", `{"m":[]}`, ``, false},
		{"not a list", `{"l":"text"}`, ``, false},
		{"not an object", `[1]`, ``, false},
	}
	for _, r := range rows {
		out, ok := AppendToList([]byte(r.body), "l", []byte(`"x"`), []byte(`{"y":2}`))
		if ok != r.ok || string(out) != r.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s (%v)", r.name, out, ok, r.want, r.ok)
		}
		if ok && !json.Valid(out) {
			t.Errorf("%s: invalid JSON", r.name)
		}
	}
}

func TestOfferTool(t *testing.T) {
	nameOf := func(tool []byte) string { return gjson.GetBytes(tool, "name").String() }
	def := []byte(`{"name":"own"}`)
	rows := []struct {
		name, body, want string
		ok               bool
	}{
		{"last in the tools", `{"tools":[{"name":"bash"}],"m":[]}`, `{"tools":[{"name":"bash"},{"name":"own"}],"m":[]}`, true},
		{"a request without tools gets none", `{"m":[]}`, `{"m":[]}`, false},
		{"nor one with an empty list", `{"tools":[],"m":[]}`, `{"tools":[],"m":[]}`, false},
		{"nor one whose tools are not a list", `{"tools":null}`, `{"tools":null}`, false},
		{"the client's own tool of that name is left to it", `{"tools":[{"name":"own","x":1}]}`, `{"tools":[{"name":"own","x":1}]}`, false},
	}
	for _, r := range rows {
		out, ok := OfferTool([]byte(r.body), "own", def, nameOf)
		if ok != r.ok || string(out) != r.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s (%v)", r.name, out, ok, r.want, r.ok)
		}
	}
}

func TestAnswerIsStream(t *testing.T) {
	for s, want := range map[string]bool{
		` {"id":1}`:                     false,
		"data: {\"id\":1}\n\n":          true,
		"event: message_start\ndata:{}": true,
		"":                              false,
	} {
		if got := AnswerIsStream([]byte(s)); got != want {
			t.Errorf("AnswerIsStream(%q) = %v, want %v", s, got, want)
		}
	}
}
