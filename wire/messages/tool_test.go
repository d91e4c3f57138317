package messages

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/wire"
)

var testTool = wire.Tool{Name: "own", Description: "Returns it.", Parameters: `{"type":"object","properties":{"ref":{"type":"string"}},"required":["ref"]}`}

func TestOfferToolInMessages(t *testing.T) {
	body := `{"model":"m","tools":[{"name":"Bash","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],"messages":[]}`
	out, ok := Format{}.OfferTool([]byte(body), testTool)
	want := `{"model":"m","tools":[{"name":"Bash","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}},` +
		`{"name":"own","description":"Returns it.","input_schema":` + testTool.Parameters + `}],"messages":[]}`
	if !ok || string(out) != want {
		t.Fatalf("OfferTool:\n got %s (%v)\nwant %s", out, ok, want)
	}
}

// messageContent is a thinking model's answer: thinking, text, a call of
// the client's tool and one of ours.
const messageContent = `[{"type":"thinking","thinking":"Need the log.","signature":"sig1"},{"type":"text","text":"Looking."},` +
	`{"type":"tool_use","id":"toolu_a","name":"Bash","input":{"command":"ls"}},` +
	`{"type":"tool_use","id":"toolu_b","name":"own","input":{"ref":"3f9a2c1b4d5e","lines":"2-3"}}]`

const messageAnswer = `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":` + messageContent +
	`,"stop_reason":"tool_use","usage":{"input_tokens":10,"cache_read_input_tokens":500,"cache_creation_input_tokens":20,"output_tokens":60}}`

// messageStream is messageAnswer as Anthropic streams it.
const messageStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":10,"cache_read_input_tokens":500,"cache_creation_input_tokens":20,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Need the "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"log."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig1"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Looking."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_a","name":"Bash","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"command\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"ls\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: content_block_start
data: {"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_b","name":"own","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"ref\":\"3f9a2c1b4d5e\",\"lines\":\"2-3\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":3}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":60}}

event: message_stop
data: {"type":"message_stop"}

`

func TestReadAnswerInMessages(t *testing.T) {
	wantCalls := []wire.Call{{ID: "toolu_a", Name: "Bash", Arguments: `{"command":"ls"}`}, {ID: "toolu_b", Name: "own", Arguments: `{"ref":"3f9a2c1b4d5e","lines":"2-3"}`}}
	wantUsage := Usage{InputTokens: 530, OutputTokens: 60, CachedTokens: 500, CacheWriteTokens: 20, Found: true}
	for name, answer := range map[string]string{"whole": messageAnswer, "streamed": messageStream} {
		a, ok := Format{}.ReadAnswer([]byte(answer))
		if !ok {
			t.Fatalf("%s: not read", name)
		}
		if !slices.Equal(a.Calls(), wantCalls) || a.Usage() != wantUsage {
			t.Errorf("%s: calls %+v, usage %+v", name, a.Calls(), a.Usage())
		}
	}
	cut := messageStream[:strings.Index(messageStream, "event: message_stop")]
	for name, answer := range map[string]string{
		"a stream cut before message_stop": cut,
		"a stream ended by an error":       cut + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n",
	} {
		if _, ok := (Format{}).ReadAnswer([]byte(answer)); ok {
			t.Errorf("%s is read as a whole answer", name)
		}
	}
}

func TestContinueInMessages(t *testing.T) {
	own := func(c wire.Call) bool { return c.Name == "own" }
	body := `{"model":"m","messages":[{"role":"user","content":"fix it"}],"max_tokens":100}`
	want := `{"model":"m","messages":[{"role":"user","content":"fix it"},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"Need the log.","signature":"sig1"},{"type":"text","text":"Looking."},` +
		`{"type":"tool_use","id":"toolu_b","name":"own","input":{"ref":"3f9a2c1b4d5e","lines":"2-3"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_b","content":"two\nthree\n"}]}],"max_tokens":100}`
	for name, answer := range map[string]string{"whole": messageAnswer, "streamed": messageStream} {
		a, _ := Format{}.ReadAnswer([]byte(answer))
		out, err := a.Continue([]byte(body), own, []wire.CallResult{{Call: a.Calls()[1], Text: "two\nthree\n"}})
		if err != nil || string(out) != want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", name, out, err, want)
		}
	}
	a, _ := Format{}.ReadAnswer([]byte(messageAnswer))
	out, _ := a.Continue([]byte(body), own, []wire.CallResult{{Call: a.Calls()[1], Text: "no such ref", IsError: true}})
	if !strings.Contains(string(out), `"content":"no such ref","is_error":true}`) || !json.Valid(out) {
		t.Errorf("an error result continues as %s", out)
	}
	prefilled := `{"model":"m","messages":[{"role":"user","content":"fix it"},{"role":"assistant","content":"Sure:"}],"max_tokens":100}`
	if _, err := a.Continue([]byte(prefilled), own, nil); err == nil {
		t.Error("an answer continues a request that ends with the assistant's words")
	}
}
