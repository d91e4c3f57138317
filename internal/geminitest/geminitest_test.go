package geminitest

import (
	"strings"
	"testing"
)

// req builds a request body around contents; extra are more top-level
// "key":value pairs.
func req(contents string, extra ...string) []byte {
	s := `{"contents":[` + contents + `]`
	for _, e := range extra {
		s += "," + e
	}
	return []byte(s + `}`)
}

const (
	ask       = `{"role":"user","parts":[{"text":"List the files."}]}`
	callLs    = `{"role":"model","parts":[{"functionCall":{"name":"run_shell_command","args":{"command":"ls"}},"thoughtSignature":"skip_thought_signature_validator"}]}`
	unsigned  = `{"role":"model","parts":[{"functionCall":{"name":"run_shell_command","args":{"command":"ls"}}}]}`
	resultLs  = `{"role":"user","parts":[{"functionResponse":{"name":"run_shell_command","response":{"output":"a.py"}}}]}`
	answerTxt = `{"role":"model","parts":[{"text":"One file."}]}`
	tools     = `"tools":[{"functionDeclarations":[{"name":"run_shell_command","parametersJsonSchema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}]}]`
)

func join(cs ...string) string { return strings.Join(cs, ",") }

const missing = "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:run_shell_command` , position "

func TestRequestsGoogleAccepts(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []byte
		o    Options
	}{
		{"a user ask", req(ask), Options{Signatures: true}},
		{"a tool loop, signed", req(join(ask, callLs, resultLs), tools), Options{Signatures: true}},
		{"snake_case field names", req(`{"role":"user","parts":[{"text":"a"}]}`, `"system_instruction":{"parts":[{"text":"s"}]}`, `"generation_config":{"thinking_config":{"include_thoughts":true}}`), Options{}},
		{"two user contents in a row", req(join(ask, ask)), Options{}},
		{"a signature-only part (a streamed text's last, sent back by Google's SDKs)", req(join(ask, `{"role":"model","parts":[{"text":"Done."},{"thoughtSignature":"skip_thought_signature_validator"}]}`, ask)), Options{Signatures: true}},
		{"Gemini CLI's generationConfig", req(ask, `"generationConfig":{"temperature":1,"topP":0.95,"topK":64,"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"HIGH"}}`), Options{}},
		{"a lower-case thinking level and output limits", req(ask, `"generationConfig":{"maxOutputTokens":4096,"thinkingConfig":{"thinkingLevel":"low"}}`), Options{}},
		{"an unsigned call in an earlier turn", req(join(ask, unsigned, resultLs, answerTxt, ask), tools), Options{Signatures: true}},
		{"an unsigned call without signatures required (Gemini 2.5)", req(join(ask, unsigned, resultLs), tools), Options{}},
		{"parallel calls: only the first signed", req(join(ask,
			`{"role":"model","parts":[{"functionCall":{"name":"a","args":{},"id":"x1"},"thoughtSignature":"context_engineering_is_the_way_to_go"},{"functionCall":{"name":"b","args":{},"id":"x2"}}]}`,
			`{"role":"user","parts":[{"functionResponse":{"name":"b","id":"x2","response":{}}},{"functionResponse":{"name":"a","id":"x1","response":{}}}]}`)), Options{Signatures: true}},
		{"responses by name in order", req(join(ask,
			`{"role":"model","parts":[{"functionCall":{"name":"a","args":{}},"thoughtSignature":"skip_thought_signature_validator"},{"functionCall":{"name":"a","args":{"n":2}}}]}`,
			`{"role":"user","parts":[{"functionResponse":{"name":"a","response":{}}},{"functionResponse":{"name":"a","response":{}}}]}`)), Options{Signatures: true}},
		{"a model turn last (an unanswered call may end the request)", req(join(ask, callLs)), Options{Signatures: true}},
		{"countTokens with a whole request", []byte(`{"generateContentRequest":{"model":"models/gemini-3-flash-preview",` + string(req(join(ask, unsigned, resultLs))[1:]) + `}`), Options{Signatures: true, CountTokens: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Check(tc.body, tc.o); err != nil {
				t.Fatalf("refused: %v\n%s", err, tc.body)
			}
		})
	}
}

func TestRequestsGoogleRefuses(t *testing.T) {
	sig := Options{Signatures: true}
	for _, tc := range []struct {
		name string
		body []byte
		o    Options
		want string
	}{
		{"not JSON", []byte(`{"contents":`), Options{}, "Invalid JSON payload received."},
		{"an unknown top-level field", req(ask, `"ctxpress":1`), Options{}, `Invalid JSON payload received. Unknown name "ctxpress": Cannot find field.`},
		{"an unknown part field", req(`{"role":"user","parts":[{"text":"a","cache_control":{}}]}`), Options{}, `Unknown name "cacheControl" at 'contents[0].parts[0]': Cannot find field.`},
		{"no contents", req(""), Options{}, "* GenerateContentRequest.contents: contents is not specified\n"},
		{"an OpenAI parameter in generationConfig", req(ask, `"generationConfig":{"max_tokens":100}`), Options{}, `Unknown name "maxTokens" at 'generation_config': Cannot find field.`},
		{"an unknown thinking field", req(ask, `"generationConfig":{"thinkingConfig":{"effort":"low"}}`), Options{}, `Unknown name "effort" at 'generation_config.thinking_config': Cannot find field.`},
		{"an unknown thinking level", req(ask, `"generationConfig":{"thinkingConfig":{"thinkingLevel":"EXTREME"}}`), Options{}, `Invalid value at 'generation_config.thinking_config.thinking_level'`},
		{"a thinking budget and a level", req(ask, `"generationConfig":{"thinkingConfig":{"thinkingLevel":"LOW","thinkingBudget":1024}}`), Options{}, "You can only set only one of thinking budget and thinking level."},
		{"a system role", req(`{"role":"system","parts":[{"text":"a"}]}`), Options{}, "Please use a valid role: user, model."},
		{"the old function role", req(join(ask, callLs, `{"role":"function","parts":[{"functionResponse":{"name":"run_shell_command","response":{}}}]}`)), Options{}, "Please use a valid role: user, model."},
		{"no role", req(`{"parts":[{"text":"a"}]}`), Options{}, "Please use a valid role: user, model."},
		{"empty parts", req(`{"role":"user","parts":[]}`), Options{}, "* GenerateContentRequest.contents[0].parts: contents.parts must not be empty.\n"},
		{"a part with no data", req(`{"role":"user","parts":[{"thought":true}]}`), Options{}, "* GenerateContentRequest.contents[0].parts[0].data: required oneof field 'data' must have one initialized field\n"},
		{"a part with two data fields", req(`{"role":"user","parts":[{"text":"a","inlineData":{"mimeType":"image/png","data":""}}]}`), Options{}, "Oneof field 'data' is already set."},
		{"a call without a name", req(join(ask, `{"role":"model","parts":[{"functionCall":{"args":{}}}]}`)), Options{}, "* GenerateContentRequest.contents[1].parts[0].function_call.name: Name cannot be empty.\n"},
		{"a tool output rewritten to a string", req(join(ask, callLs, `{"role":"user","parts":[{"functionResponse":{"name":"run_shell_command","response":"a.py"}}]}`)), Options{},
			"Invalid value at 'contents[2].parts[0].function_response.response' (type.googleapis.com/google.protobuf.Struct), \"a.py\""},
		{"call args as a list", req(join(ask, `{"role":"model","parts":[{"functionCall":{"name":"a","args":["ls"]}}]}`)), Options{},
			"Invalid value at 'contents[1].parts[0].function_call.args' (type.googleapis.com/google.protobuf.Struct), [\"ls\"]"},
		{"an unknown field in a function response", req(join(ask, callLs, `{"role":"user","parts":[{"functionResponse":{"name":"run_shell_command","response":{},"is_error":true}}]}`)), Options{},
			`Unknown name "isError" at 'contents[2].parts[0].function_response': Cannot find field.`},
		{"history opening with a call", req(join(callLs, resultLs)), Options{}, "Please ensure that function call turn comes immediately after a user turn or after a function response turn."},
		{"a call after a model text", req(join(ask, answerTxt, callLs, resultLs)), Options{}, "Please ensure that function call turn comes immediately after a user turn or after a function response turn."},
		{"a response with no call before it", req(join(ask, answerTxt, resultLs)), Options{}, "Please ensure that function response turn comes immediately after a function call turn."},
		{"a call answered by a user text", req(join(ask, callLs, ask)), Options{}, "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn."},
		{"one of two calls answered", req(join(ask,
			`{"role":"model","parts":[{"functionCall":{"name":"a","args":{}}},{"functionCall":{"name":"b","args":{}}}]}`,
			`{"role":"user","parts":[{"functionResponse":{"name":"a","response":{}}}]}`)), Options{},
			"Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn."},
		{"a response by the wrong id", req(join(ask,
			`{"role":"model","parts":[{"functionCall":{"name":"a","args":{},"id":"x1"}}]}`,
			`{"role":"user","parts":[{"functionResponse":{"name":"a","id":"x9","response":{}}}]}`)), Options{},
			"contents[2].parts[0]: function response `a` (id \"x9\") answers no function call of the function call turn before it."},
		{"a response by the wrong name", req(join(ask, callLs, `{"role":"user","parts":[{"functionResponse":{"name":"read_file","response":{}}}]}`)), Options{},
			"contents[2].parts[0]: function response `read_file` (id \"\") answers no function call"},
		{"an id matched under another name", req(join(ask,
			`{"role":"model","parts":[{"functionCall":{"name":"a","args":{},"id":"x1"}}]}`,
			`{"role":"user","parts":[{"functionResponse":{"name":"b","id":"x1","response":{}}}]}`)), Options{},
			"contents[2].parts[0]: function response name `b` does not match the function call `a` it answers."},
		{"the current turn's call unsigned", req(join(ask, unsigned, resultLs), tools), sig, missing + "2. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."},
		{"the second step unsigned", req(join(ask, callLs, resultLs, unsigned, resultLs), tools), sig, missing + "4."},
		{"parallel calls with the signature on the second", req(join(ask,
			`{"role":"model","parts":[{"functionCall":{"name":"run_shell_command","args":{}}},{"functionCall":{"name":"b","args":{}},"thoughtSignature":"skip_thought_signature_validator"}]}`,
			`{"role":"user","parts":[{"functionResponse":{"name":"run_shell_command","response":{}}},{"functionResponse":{"name":"b","response":{}}}]}`)), sig, missing + "2."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(tc.body, tc.o)
			if err == nil {
				t.Fatalf("accepted, want %q\n%s", tc.want, tc.body)
			}
			if err.Code != 400 || err.Status != "INVALID_ARGUMENT" || !strings.Contains(err.Message, tc.want) {
				t.Fatalf("got %d %s %q, want 400 INVALID_ARGUMENT %q", err.Code, err.Status, err.Message, tc.want)
			}
		})
	}
}

// signedTurn is a tool loop whose call carries sig.
func signedTurn(sig, args string) []byte {
	call := `{"role":"model","parts":[{"functionCall":{"name":"run_shell_command","args":` + args + `},"thoughtSignature":"` + sig + `"}]}`
	return req(join(ask, call, resultLs), tools)
}

func TestLedgerRefusesASignatureItDidNotIssueOrThatMoved(t *testing.T) {
	l := NewLedger()
	first, err := Check(req(ask, tools), Options{})
	if err != nil {
		t.Fatal(err)
	}
	sig := l.Call(first, "run_shell_command", []byte(`{"command": "ls"}`))
	text := l.Text(first)
	o := Options{Signatures: true, Ledger: l}
	bound := Options{Signatures: true, Ledger: l, BindPrefix: true}
	for _, tc := range []struct {
		name string
		body []byte
		o    Options
		want string // "" accepted
	}{
		{"sent back as issued (args re-spaced)", signedTurn(sig, `{"command":"ls"}`), o, ""},
		{"one byte changed", signedTurn(sig[:len(sig)-2]+"A=", `{"command":"ls"}`), o, "Corrupted thought signature."},
		{"on a call with other arguments", signedTurn(sig, `{"command":"pwd"}`), o, "Corrupted thought signature."},
		{"a text's signature on a call", signedTurn(text, `{"command":"ls"}`), o, "Corrupted thought signature."},
		{"a call's signature on a text", req(join(ask, `{"role":"model","parts":[{"text":"x","thoughtSignature":"`+sig+`"}]}`, ask)), o, "Corrupted thought signature."},
		{"on a user part", req(`{"role":"user","parts":[{"text":"x","thoughtSignature":"` + text + `"}]}`), o, "Corrupted thought signature."},
		{"a dummy signature", signedTurn(DummySignatures[0], `{"command":"ls"}`), bound, ""},
		{"a text signature sent back on text", req(join(ask, `{"role":"model","parts":[{"text":"Done.","thoughtSignature":"`+text+`"}]}`, ask)), o, ""},
		{"bound: after the prompt it was issued after", signedTurn(sig, `{"command":"ls"}`), bound, ""},
		{"bound: a summary added to systemInstruction", append(signedTurn(sig, `{"command":"ls"}`)[:len(signedTurn(sig, `{"command":"ls"}`))-1],
			[]byte(`,"systemInstruction":{"parts":[{"text":"<conversation_summary>"}]}}`)...), bound, "Corrupted thought signature."},
		{"bound: the ask before it edited", []byte(strings.Replace(string(signedTurn(sig, `{"command":"ls"}`)), "List the files.", "List files.", 1)), bound, "Corrupted thought signature."},
		{"unbound: the ask before it edited", []byte(strings.Replace(string(signedTurn(sig, `{"command":"ls"}`)), "List the files.", "List files.", 1)), o, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Check(tc.body, tc.o)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "" && r.Signed == 0 && !strings.Contains(string(tc.body), DummySignatures[0]):
				t.Fatalf("no signature counted")
			case tc.want != "" && (err == nil || err.Message != tc.want):
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestErrorBodyIsGooglesShape(t *testing.T) {
	got := string(invalid("Corrupted thought signature.").Body())
	want := "{\n  \"error\": {\n    \"code\": 400,\n    \"message\": \"Corrupted thought signature.\",\n    \"status\": \"INVALID_ARGUMENT\"\n  }\n}\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestRouteOf(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         Route
		ok           bool
	}{
		{"POST", "/v1beta/models/gemini-3-flash-preview:streamGenerateContent", Route{Model: "gemini-3-flash-preview", Method: "streamGenerateContent"}, true},
		{"POST", "/v1/models/gemini-2.5-pro:generateContent", Route{Model: "gemini-2.5-pro", Method: "generateContent"}, true},
		{"POST", "/v1beta/models/m:countTokens", Route{Model: "m", Method: "countTokens"}, true},
		{"POST", "/v1/v1beta/models/m:generateContent", Route{}, false},
		{"POST", "/v1beta/modelsx/m:generateContent", Route{}, false},
		{"GET", "/v1beta/models", Route{List: true}, true},
		{"POST", "/v1beta/models/m:embedContent", Route{}, false},
		{"POST", "/v1/chat/completions", Route{}, false},
		{"GET", "/v1beta/models/m:generateContent", Route{}, false},
	} {
		got, ok := RouteOf(tc.method, tc.path)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s %s: got %+v %v, want %+v %v", tc.method, tc.path, got, ok, tc.want, tc.ok)
		}
	}
}
