package responses

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/wire"
)

var testTool = wire.Tool{Name: "own", Description: "Returns it.", Parameters: `{"type":"object","properties":{"ref":{"type":"string"}},"required":["ref"]}`}

func TestOfferToolInResponses(t *testing.T) {
	body := `{"model":"m","tools":[{"type":"function","name":"bash","parameters":{}}],"input":[]}`
	out, ok := Format{}.OfferTool([]byte(body), testTool)
	want := `{"model":"m","tools":[{"type":"function","name":"bash","parameters":{}},` +
		`{"type":"function","name":"own","description":"Returns it.","parameters":` + testTool.Parameters + `,"strict":false}],"input":[]}`
	if !ok || string(out) != want {
		t.Fatalf("OfferTool:\n got %s (%v)\nwant %s", out, ok, want)
	}
	for name, body := range map[string]string{
		"no tools":                          `{"input":"hi"}`,
		"a conversation the provider keeps": `{"conversation":"conv_1","tools":[{"type":"function","name":"bash"}],"input":"hi"}`,
	} {
		if out, ok := (Format{}).OfferTool([]byte(body), testTool); ok || string(out) != body {
			t.Errorf("%s: offered, %s", name, out)
		}
	}
}

// responseOutput is a reasoning model's output: reasoning, a call of the
// client's tool, a note, reasoning, and a call of ours.
const responseOutput = `[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"enc1"},` +
	`{"type":"function_call","id":"fc_1","call_id":"call_a","name":"bash","arguments":"{\"command\":\"ls\"}","status":"completed"},` +
	`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Looking.","annotations":[]}]},` +
	`{"type":"reasoning","id":"rs_2","summary":[]},` +
	`{"type":"function_call","id":"fc_2","call_id":"call_b","name":"own","arguments":"{\"ref\":\"3f9a2c1b4d5e\"}","status":"completed"}]`

const responseUsage = `{"input_tokens":300,"input_tokens_details":{"cached_tokens":256},"output_tokens":40}`

var responseAnswer = `{"id":"resp_1","object":"response","status":"completed","output":` + responseOutput + `,"usage":` + responseUsage + `}`

// responseStream is responseAnswer streamed: output_item.done per item,
// then response.completed.
func responseStream(withOutput bool) string {
	var b strings.Builder
	b.WriteString("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[]}}\n\n")
	gjson.Parse(responseOutput).ForEach(func(_, it gjson.Result) bool {
		b.WriteString("event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":" + it.Raw + "}\n\n")
		return true
	})
	out := "[]"
	if withOutput {
		out = responseOutput
	}
	b.WriteString(`event: response.completed` + "\n" + `data: {"type":"response.completed","response":{"id":"resp_1","status":"completed","output":` + out + `,"usage":` + responseUsage + "}}\n\n")
	return b.String()
}

func TestReadAnswerInResponses(t *testing.T) {
	wantCalls := []wire.Call{{ID: "call_a", Name: "bash", Arguments: `{"command":"ls"}`}, {ID: "call_b", Name: "own", Arguments: `{"ref":"3f9a2c1b4d5e"}`}}
	wantUsage := Usage{InputTokens: 300, OutputTokens: 40, CachedTokens: 256, Found: true}
	for name, answer := range map[string]string{"whole": responseAnswer, "streamed": responseStream(true),
		"streamed, the output left out of response.completed": responseStream(false)} {
		a, ok := Format{}.ReadAnswer([]byte(answer))
		if !ok {
			t.Fatalf("%s: not read", name)
		}
		if !slices.Equal(a.Calls(), wantCalls) || a.Usage() != wantUsage {
			t.Errorf("%s: calls %+v, usage %+v", name, a.Calls(), a.Usage())
		}
	}
	s := responseStream(true)
	cut := s[:strings.Index(s, "event: response.completed")]
	if _, ok := (Format{}).ReadAnswer([]byte(cut)); ok {
		t.Error("a stream without response.completed is read as a whole answer")
	}
	failed := cut + "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\"}}\n\n"
	if _, ok := (Format{}).ReadAnswer([]byte(failed)); ok {
		t.Error("a failed stream is read as a whole answer")
	}
	incomplete := strings.Replace(responseAnswer, `"status":"completed","output"`, `"status":"incomplete","output"`, 1)
	if a, ok := (Format{}).ReadAnswer([]byte(incomplete)); !ok || len(a.Calls()) != 0 {
		t.Error("an incomplete response has calls to answer")
	}
}

func TestContinueInResponses(t *testing.T) {
	own := func(c wire.Call) bool { return c.Name == "own" }
	result := func(a wire.Answer) []wire.CallResult {
		return []wire.CallResult{{Call: a.Calls()[1], Text: "line 1\n"}}
	}
	output := `{"type":"function_call_output","call_id":"call_b","output":"line 1\n"}`
	rows := []struct{ name, body, want string }{
		{"stored: the output as it came, but the client's call and the reasoning that went with it",
			`{"model":"m","input":[{"role":"user","content":"fix it"}]}`,
			`{"model":"m","input":[{"role":"user","content":"fix it"},` +
				`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Looking.","annotations":[]}]},` +
				`{"type":"reasoning","id":"rs_2","summary":[]},` +
				`{"type":"function_call","id":"fc_2","call_id":"call_b","name":"own","arguments":"{\"ref\":\"3f9a2c1b4d5e\"}","status":"completed"},` + output + `]}`},
		{"store false: no ids, no reasoning without its encrypted content",
			`{"model":"m","store":false,"input":[{"role":"user","content":"fix it"}]}`,
			`{"model":"m","store":false,"input":[{"role":"user","content":"fix it"},` +
				`{"type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Looking.","annotations":[]}]},` +
				`{"type":"function_call","call_id":"call_b","name":"own","arguments":"{\"ref\":\"3f9a2c1b4d5e\"}","status":"completed"},` + output + `]}`},
		{"a string input becomes its user message",
			`{"model":"m","store":false,"input":"fix it"}`,
			`{"model":"m","store":false,"input":[{"type":"message","role":"user","content":"fix it"},` +
				`{"type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Looking.","annotations":[]}]},` +
				`{"type":"function_call","call_id":"call_b","name":"own","arguments":"{\"ref\":\"3f9a2c1b4d5e\"}","status":"completed"},` + output + `]}`},
	}
	for _, r := range rows {
		a, _ := Format{}.ReadAnswer([]byte(responseAnswer))
		out, err := a.Continue([]byte(r.body), own, result(a))
		if err != nil || string(out) != r.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", r.name, out, err, r.want)
		}
		if !json.Valid(out) {
			t.Errorf("%s: invalid JSON", r.name)
		}
	}
}
