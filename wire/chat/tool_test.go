package chat

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/wire"
)

var testTool = wire.Tool{Name: "own", Description: `Returns "it".`, Parameters: `{"type":"object","properties":{"ref":{"type":"string"}},"required":["ref"]}`}

func TestOfferToolInChat(t *testing.T) {
	body := `{"model":"m","tools":[{"type":"function","function":{"name":"bash","parameters":{}}}],"messages":[]}`
	out, ok := Format{}.OfferTool([]byte(body), testTool)
	want := `{"model":"m","tools":[{"type":"function","function":{"name":"bash","parameters":{}}},` +
		`{"type":"function","function":{"name":"own","description":"Returns \"it\".","parameters":` + testTool.Parameters + `}}],"messages":[]}`
	if !ok || string(out) != want {
		t.Fatalf("OfferTool:\n got %s (%v)\nwant %s", out, ok, want)
	}
	if _, ok := (Format{}).OfferTool(out, testTool); ok {
		t.Error("the tool is offered twice")
	}
	if out, ok := (Format{}).OfferTool([]byte(`{"messages":[]}`), testTool); ok || string(out) != `{"messages":[]}` {
		t.Errorf("a request without tools got %s", out)
	}
}

// chatAnswer is a completion that says something, thinks, and calls the
// client's tool and ours.
const chatAnswer = `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Let me look.",` +
	`"reasoning_content":"hm","tool_calls":[{"id":"call_a","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}},` +
	`{"id":"call_b","type":"function","function":{"name":"own","arguments":"{\"ref\":\"3f9a2c1b4d5e\"}"}}]},"finish_reason":"tool_calls"}],` +
	`"usage":{"prompt_tokens":120,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":100}}}`

// chatStream is chatAnswer streamed, with its usage chunk.
const chatStream = `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Let me"}}]}

data: {"choices":[{"index":0,"delta":{"content":" look.","reasoning_content":"hm"}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"bash","arguments":"{\"comm"}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"and\":\"ls\"}"}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"own","arguments":""}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"ref\":\"3f9a2c1b4d5e\"}"}}]}}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: {"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":100}}}

data: [DONE]

`

func TestReadAnswerInChat(t *testing.T) {
	wantCalls := []wire.Call{{ID: "call_a", Name: "bash", Arguments: `{"command":"ls"}`}, {ID: "call_b", Name: "own", Arguments: `{"ref":"3f9a2c1b4d5e"}`}}
	wantUsage := Usage{InputTokens: 120, OutputTokens: 9, CachedTokens: 100, Found: true}
	for _, tc := range []struct{ name, answer string }{{"whole", chatAnswer}, {"streamed", chatStream}, {"streamed with CRLF", strings.ReplaceAll(chatStream, "\n", "\r\n")}} {
		a, ok := Format{}.ReadAnswer([]byte(tc.answer))
		if !ok {
			t.Fatalf("%s: not read", tc.name)
		}
		if got := a.Calls(); !slices.Equal(got, wantCalls) {
			t.Errorf("%s: calls %+v, want %+v", tc.name, got, wantCalls)
		}
		if a.Usage() != wantUsage {
			t.Errorf("%s: usage %+v, want %+v", tc.name, a.Usage(), wantUsage)
		}
	}
	cut := chatStream[:strings.Index(chatStream, `data: {"choices":[{"index":0,"delta":{},"finish_reason"`)]
	for name, answer := range map[string]string{
		"a stream cut before its finish_reason": cut,
		"a stream that failed":                  cut + "data: {\"error\":{\"message\":\"overloaded\"}}\n\n",
		"not JSON":                              `{"choices":`,
	} {
		if _, ok := (Format{}).ReadAnswer([]byte(answer)); ok {
			t.Errorf("%s is read as a whole answer", name)
		}
	}
	two := strings.Replace(chatAnswer, `"finish_reason":"tool_calls"}]`, `"finish_reason":"tool_calls"},{"index":1,"message":{"role":"assistant","content":"x"}}]`, 1)
	if a, ok := (Format{}).ReadAnswer([]byte(two)); !ok || len(a.Calls()) != 0 {
		t.Errorf("an answer of two choices has calls to answer: %v", ok)
	}
}

func TestContinueInChat(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"fix it"}],"stream":true}`
	own := func(c wire.Call) bool { return c.Name == "own" }
	want := `{"model":"m","messages":[{"role":"user","content":"fix it"},` +
		`{"role":"assistant","content":"Let me look.","reasoning_content":"hm","tool_calls":[{"id":"call_b","type":"function","function":{"name":"own","arguments":"{\"ref\":\"3f9a2c1b4d5e\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_b","content":"line 1\nline \"2\"\n"}],"stream":true}`
	for _, answer := range []string{chatAnswer, chatStream} {
		a, _ := Format{}.ReadAnswer([]byte(answer))
		out, err := a.Continue([]byte(body), own, []wire.CallResult{{Call: a.Calls()[1], Text: "line 1\nline \"2\"\n"}})
		if err != nil || string(out) != want {
			t.Fatalf("Continue:\n got %s (%v)\nwant %s", out, err, want)
		}
		if !bytes.HasPrefix(out, []byte(body[:strings.Index(body, `}]`)+1])) || !json.Valid(out) {
			t.Error("the request's own bytes changed")
		}
	}
	silent := strings.Replace(chatAnswer, `"content":"Let me look.",`, `"content":null,`, 1)
	a, _ := Format{}.ReadAnswer([]byte(silent))
	out, _ := a.Continue([]byte(body), own, []wire.CallResult{{Call: a.Calls()[1], Text: "x"}})
	if !strings.Contains(string(out), `{"role":"assistant","content":null,`) {
		t.Errorf("an answer without text continues as %s", out)
	}
}
