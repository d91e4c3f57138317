package chat

import (
	"strconv"
	"testing"

	"github.com/ctxpress/ctxpress/internal/corpustest"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// checkParseAgainstGjson fails unless Parse finds the same values gjson
// does (same first-key-wins rule): model, stream, tools, and each
// message's bytes, role, name, tool_call_id and content; and unless each
// message holds the items its role says, in order.
func checkParseAgainstGjson(tb testing.TB, body []byte) {
	tb.Helper()
	c, ok := Format{}.Parse(body)
	msgs := gjson.GetBytes(body, "messages")
	if ok != (gjson.ParseBytes(body).IsObject() && msgs.IsArray()) {
		tb.Fatalf("Parse ok=%v, gjson disagrees", ok)
	}
	if !ok {
		return
	}
	if m := gjson.GetBytes(body, "model"); m.Type == gjson.String && m.Str != c.Model {
		tb.Errorf("model %q, gjson %q", c.Model, m.Str)
	}
	if c.Stream != (gjson.GetBytes(body, "stream").Type == gjson.True) {
		tb.Errorf("stream %v", c.Stream)
	}
	if got, want := string(c.Counted[0].Of(body)), gjson.GetBytes(body, "tools").Raw; got != want {
		tb.Errorf("tools %.80q, gjson %.80q", got, want)
	}
	arr := msgs.Array()
	if len(arr) != len(c.Messages) {
		tb.Fatalf("%d messages, gjson %d", len(c.Messages), len(arr))
	}
	for i, g := range arr {
		m := &c.Messages[i]
		if string(c.Bytes(i)) != g.Raw {
			tb.Fatalf("message %d: %.80q, gjson %.80q", i, c.Bytes(i), g.Raw)
		}
		if !g.IsObject() {
			if m.Object || m.Items.End != m.Items.Start {
				tb.Errorf("message %d: a non-object has items", i)
			}
			continue
		}
		str := func(path string) string {
			if v := g.Get(path); v.Type == gjson.String {
				return v.Str
			}
			return ""
		}
		if m.WireRole != str("role") || m.Name != str("name") {
			tb.Errorf("message %d: role %q name %q", i, m.WireRole, m.Name)
		}
		checkItems(tb, c, i, g, str("tool_call_id"))
	}
}

// checkItems fails unless message i (g as gjson reads it) holds one item
// for its content (a result for role tool/function) and, for an
// assistant, one call item per tool_calls entry and function_call.
func checkItems(tb testing.TB, c *wire.Conversation, i int, g gjson.Result, toolCallID string) {
	tb.Helper()
	items := c.ItemsOf(i)
	first := items[0]
	if got := string(first.Content.Of(c.Body)); got != g.Get("content").Raw {
		tb.Errorf("message %d content %.80q, gjson %.80q", i, got, g.Get("content").Raw)
	}
	want := map[string]wire.Kind{"system": wire.KindInstruction, "developer": wire.KindInstruction, "user": wire.KindUser,
		"assistant": wire.KindAssistant, "tool": wire.KindToolResult, "function": wire.KindToolResult}[c.Messages[i].WireRole]
	if first.Kind != want || first.Message != i {
		tb.Errorf("message %d (%s): item kind %d, want %d", i, c.Messages[i].WireRole, first.Kind, want)
	}
	if want == wire.KindToolResult && (first.CallID != toolCallID || first.ByName != (c.Messages[i].WireRole == "function")) {
		tb.Errorf("message %d: result id %q byName %v", i, first.CallID, first.ByName)
	}
	var calls []gjson.Result
	if want == wire.KindAssistant {
		if tc := g.Get("tool_calls"); tc.IsArray() {
			calls = tc.Array()
		}
		if fc := g.Get("function_call"); fc.IsObject() {
			calls = append(calls, fc)
		}
	}
	if len(items) != 1+len(calls) {
		tb.Fatalf("message %d: %d items, want %d", i, len(items), 1+len(calls))
	}
	for j, call := range calls {
		it := items[1+j]
		fn := call.Get("function")
		if !fn.Exists() {
			fn = call // the legacy function_call
		}
		if it.Kind != wire.KindToolCall || it.CallID != call.Get("id").String() || it.Tool != fn.Get("name").String() ||
			string(it.Args.Of(c.Body)) != fn.Get("arguments").Raw {
			tb.Errorf("message %d call %d: %+v", i, j, it)
		}
	}
}

func TestParseMatchesGjson(t *testing.T) {
	bodies := [][]byte{
		[]byte(`{"messages":[]}`),
		[]byte(` { "model" : "m" , "stream" : true , "messages" : [ { "role" : "user" , "content" : "a \"quoted\" \\ word" } , 1 , [ "x" ] , "s" , null ] , "tools" : [ ] } `),
		[]byte(`{"messages":[{"\u0072ole":"tool","content":"\\\\","tool_call_id":"a\"b"}],"model":"x","model":"y"}`),
		[]byte(`{"messages":[{"role":"tool","role":"user","content":{"deep":[{"a":"]}"}]}}]}`),
		[]byte(`{"model":1,"messages":[{"role":1,"content":-1.5e3}]}`),
		[]byte(`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}},{"id":7,"id":"x","function":{"arguments":{"k":1},"name":"g"}},"odd"],"function_call":{"name":"h","arguments":"1"}},{"role":"function","name":"h","content":"r"}]}`),
	}
	if dir, _ := corpustest.Find(); dir != "" {
		for _, tr := range corpustest.Traces(t) {
			bodies = append(bodies, tr.Body)
		}
	}
	for i, b := range bodies {
		t.Run(strconv.Itoa(i), func(t *testing.T) { checkParseAgainstGjson(t, b) })
	}
}

// FuzzParse: Parse reads any valid JSON body as gjson does, and never
// panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		``, `{`, `[]`, `{"messages":[1,"a",null,{}]}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":[{"type":"text","text":"x"}]}]}`,
		`  {"messages" : [ { "role" : "function" , "name" : "f" , "content" : "x" } ] }  `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if gjson.ValidBytes(body) {
			checkParseAgainstGjson(t, body)
		}
	})
}
