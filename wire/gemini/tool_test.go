package gemini

import (
	"errors"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

var expandTool = wire.Tool{Name: "ctxpress_expand", Description: "Brings back an original.",
	Parameters: `{"type":"object","properties":{"ref":{"type":"string"}},"required":["ref"],"additionalProperties":false}`}

const expandDecl = `{"name":"ctxpress_expand","description":"Brings back an original.","parametersJsonSchema":{"type":"object","properties":{"ref":{"type":"string"}},"required":["ref"],"additionalProperties":false}}`

func TestOfferTool(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"contents":[],"tools":[{"functionDeclarations":[{"name":"ls"}]}]}`,
			`{"contents":[],"tools":[{"functionDeclarations":[{"name":"ls"},` + expandDecl + `]}]}`},
		{`{"tools":[{"function_declarations":[{"name":"ls"}]},{"googleSearch":{}}],"contents":[]}`,
			`{"tools":[{"function_declarations":[{"name":"ls"},` + expandDecl + `]},{"googleSearch":{}}],"contents":[]}`},
		{`{"tools":[{"codeExecution":{}}]}`, `{"tools":[{"codeExecution":{}},{"functionDeclarations":[` + expandDecl + `]}]}`},
		{`{"tools":[{"functionDeclarations":[]}]}`, `{"tools":[{"functionDeclarations":[` + expandDecl + `]}]}`},
		{`{"tools":[]}`, ""},
		{`{"contents":[]}`, ""},
		{`{"tools":[{"functionDeclarations":[{"name":"ctxpress_expand"}]}]}`, ""},
	} {
		out, ok := Format{}.OfferTool([]byte(tc.body), expandTool)
		if tc.want == "" {
			if ok || string(out) != tc.body {
				t.Errorf("%s: offered: %s", tc.body, out)
			}
			continue
		}
		if !ok || string(out) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.body, out, tc.want)
		}
	}
}

// callAnswer is an answer that calls the retrieval tool and a client's
// tool in parallel, the first call signed, after a thought.
const callAnswer = `{"candidates":[{"content":{"role":"model","parts":[` +
	`{"text":"plan","thought":true},` +
	`{"functionCall":{"name":"ctxpress_expand","args":{"ref":"3f9a"}},"thoughtSignature":"U0lH"},` +
	`{"functionCall":{"id":"c2","name":"ls","args":{}}}]},"finishReason":"STOP"}],` +
	`"usageMetadata":{"promptTokenCount":900,"candidatesTokenCount":20}}`

func TestReadAnswerWholeAndStreamed(t *testing.T) {
	sseAnswer := "data: " + `{"candidates":[{"content":{"role":"model","parts":[{"text":"plan","thought":true}]}}]}` + "\r\n\r\n" +
		"data: " + `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"ctxpress_expand","args":{"ref":"3f9a"}},"thoughtSignature":"U0lH"},{"functionCall":{"id":"c2","name":"ls","args":{}}}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":900,"candidatesTokenCount":20}}` + "\r\n\r\n"
	arrayAnswer := "[" + strings.TrimSpace(strings.Split(sseAnswer, "data: ")[1]) + ",\n" + strings.TrimSpace(strings.Split(sseAnswer, "data: ")[2]) + "]"
	want := []wire.Call{{Name: "ctxpress_expand", Arguments: `{"ref":"3f9a"}`}, {ID: "c2", Name: "ls", Arguments: `{}`}}
	for name, answer := range map[string]string{"json": callAnswer, "sse": sseAnswer, "array": arrayAnswer} {
		a, ok := Format{}.ReadAnswer([]byte(answer))
		if !ok {
			t.Fatalf("%s: not read", name)
		}
		if got := a.Calls(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("%s: calls %+v", name, got)
		}
		if u := a.Usage(); u.InputTokens != 900 || u.OutputTokens != 20 {
			t.Errorf("%s: usage %+v", name, u)
		}
	}
	for name, answer := range map[string]string{
		"cut short": sseAnswer[:strings.LastIndex(sseAnswer, "data: ")],
		"an error":  "data: " + `{"error":{"code":500,"message":"x","status":"INTERNAL"}}` + "\n\n",
		"no answer": `{"error":{"code":400}}`,
		"bad json":  `{"candidates":`,
	} {
		if _, ok := (Format{}).ReadAnswer([]byte(answer)); ok {
			t.Errorf("%s: read", name)
		}
	}
}

func TestContinue(t *testing.T) {
	body := `{"contents":[{"role":"user","parts":[{"text":"go"}]}],"tools":[]}`
	a, _ := Format{}.ReadAnswer([]byte(callAnswer))
	results := []wire.CallResult{{Call: a.Calls()[0], Text: "the original"}}
	keepExpand := func(c wire.Call) bool { return c.Name == "ctxpress_expand" }
	out, err := a.Continue([]byte(body), keepExpand, results)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"contents":[{"role":"user","parts":[{"text":"go"}]},` +
		`{"role":"model","parts":[{"text":"plan","thought":true},{"functionCall":{"name":"ctxpress_expand","args":{"ref":"3f9a"}},"thoughtSignature":"U0lH"}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"ctxpress_expand","response":{"output":"the original"}}}]}],"tools":[]}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
	if err := checkRules(out); err != nil {
		t.Error(err)
	}

	// The signed call left out: the kept one gets the dummy, for the
	// current turn's first call must carry a signature.
	keepLs := func(c wire.Call) bool { return c.Name == "ls" }
	out, err = a.Continue([]byte(body), keepLs, []wire.CallResult{{Call: a.Calls()[1], Text: "denied", IsError: true}})
	if err != nil {
		t.Fatal(err)
	}
	if got := gjson.GetBytes(out, "contents.1.parts.1").Raw; got != `{"functionCall":{"id":"c2","name":"ls","args":{}},"thoughtSignature":"skip_thought_signature_validator"}` {
		t.Errorf("kept call %s", got)
	}
	if got := gjson.GetBytes(out, "contents.2.parts.0").Raw; got != `{"functionResponse":{"name":"ls","id":"c2","response":{"error":"denied"}}}` {
		t.Errorf("response %s", got)
	}
	if err := checkRules(out); err != nil {
		t.Error(err)
	}

	ended := `{"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"text":"prefill"}]}]}`
	if _, err := a.Continue([]byte(ended), keepExpand, results); !errors.Is(err, wire.ErrNoTurn) {
		t.Errorf("after the model's own words: %v", err)
	}
}
