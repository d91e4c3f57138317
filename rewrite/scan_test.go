package rewrite

import (
	"strconv"
	"testing"

	"github.com/tidwall/gjson"
)

// checkParseAgainstGjson fails unless parseRequest finds the same values
// gjson does (same first-key-wins rule): model, stream, tools, and each
// message's bytes, role, name, tool_call_id and content.
func checkParseAgainstGjson(tb testing.TB, body []byte) {
	tb.Helper()
	req, ok := parseRequest(body)
	msgs := gjson.GetBytes(body, "messages")
	if ok != (gjson.ParseBytes(body).IsObject() && msgs.IsArray()) {
		tb.Fatalf("parseRequest ok=%v, gjson disagrees", ok)
	}
	if !ok {
		return
	}
	if m := gjson.GetBytes(body, "model"); m.Type == gjson.String && m.Str != req.model {
		tb.Errorf("model %q, gjson %q", req.model, m.Str)
	}
	if req.stream != (gjson.GetBytes(body, "stream").Type == gjson.True) {
		tb.Errorf("stream %v", req.stream)
	}
	if got, want := string(body[req.tools.start:req.tools.end]), gjson.GetBytes(body, "tools").Raw; got != want {
		tb.Errorf("tools %.80q, gjson %.80q", got, want)
	}
	arr := msgs.Array()
	if len(arr) != len(req.messages) {
		tb.Fatalf("%d messages, gjson %d", len(req.messages), len(arr))
	}
	for i, g := range arr {
		m := &req.messages[i]
		if string(m.bytes()) != g.Raw {
			tb.Fatalf("message %d: %.80q, gjson %.80q", i, m.bytes(), g.Raw)
		}
		if !g.IsObject() {
			continue
		}
		str := func(path string) string {
			if v := g.Get(path); v.Type == gjson.String {
				return v.Str
			}
			return ""
		}
		if m.role != str("role") || m.name != str("name") || m.toolCallID != str("tool_call_id") {
			tb.Errorf("message %d: role %q name %q id %q", i, m.role, m.name, m.toolCallID)
		}
		if got := string(body[m.content.start:m.content.end]); got != g.Get("content").Raw {
			tb.Errorf("message %d content %.80q, gjson %.80q", i, got, g.Get("content").Raw)
		}
		if c := m.result(m.content); c.Str != g.Get("content").Str {
			tb.Errorf("message %d decoded content differs", i)
		}
	}
}

func TestParseRequestMatchesGjson(t *testing.T) {
	bodies := [][]byte{
		[]byte(`{"messages":[]}`),
		[]byte(` { "model" : "m" , "stream" : true , "messages" : [ { "role" : "user" , "content" : "a \"quoted\" \\ word" } , 1 , [ "x" ] , "s" , null ] , "tools" : [ ] } `),
		[]byte(`{"messages":[{"\u0072ole":"tool","content":"\\\\","tool_call_id":"a\"b"}],"model":"x","model":"y"}`),
		[]byte(`{"messages":[{"role":"tool","role":"user","content":{"deep":[{"a":"]}"}]}}]}`),
		[]byte(`{"model":1,"messages":[{"role":1,"content":-1.5e3}]}`),
	}
	if dir, _ := findCorpus(); dir != "" {
		for _, tr := range loadTraces(t) {
			bodies = append(bodies, tr.body)
		}
	}
	for i, b := range bodies {
		t.Run(strconv.Itoa(i), func(t *testing.T) { checkParseAgainstGjson(t, b) })
	}
}
