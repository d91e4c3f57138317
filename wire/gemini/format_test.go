package gemini

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
)

// count is a stand-in token counter: one token per 4 bytes, rounded up.
func count(s string) int { return (len(s) + 3) / 4 }

// every is a request with a part of every kind, both spellings of the
// members, the optional ids and signatures, and the top-level members
// ctxpress must send as they came.
const every = `{"contents":[` +
	`{"role":"user","parts":[{"text":"fix the build"},{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}},{"file_data":{"mime_type":"application/pdf","file_uri":"gs://b/f.pdf"}}]},` +
	`{"role":"model","parts":[{"text":"**Planning**","thought":true,"thoughtSignature":"VGhvdWdodA=="},{"functionCall":{"name":"read_file","args":{"path":"a.go"}},"thoughtSignature":"U2lnMQ=="},{"functionCall":{"name":"read_file","args":{"path":"b.go"}}},{"functionCall":{"id":"call-7","name":"run_shell_command","args":{"command":"go build"}}}]},` +
	`{"role":"user","parts":[{"functionResponse":{"name":"read_file","response":{"output":"package a"}}},{"functionResponse":{"name":"read_file","response":{"result":"package b","bytes":9}}},{"function_response":{"id":"call-7","name":"run_shell_command","response":{"stdout":"ok","exitCode":0}}}]},` +
	`{"role":"model","parts":[{"executableCode":{"language":"PYTHON","code":"print(1)"}},{"codeExecutionResult":{"outcome":"OUTCOME_OK","output":"1\n"}},{"text":"Fixed.","thought_signature":"U2lnMg=="},{"futurePart":{"x":1}}]},` +
	`{"role":"user","parts":[{"text":"thanks"}],"unknownContentField":true}],` +
	`"systemInstruction":{"role":"user","parts":[{"text":"You are an agent."}]},` +
	`"tools":[{"functionDeclarations":[{"name":"read_file","description":"Reads","parametersJsonSchema":{"type":"object"}}]},{"googleSearch":{}}],` +
	`"toolConfig":{"functionCallingConfig":{"mode":"AUTO"}},` +
	`"generationConfig":{"temperature":1,"thinkingConfig":{"includeThoughts":true}},` +
	`"safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}],` +
	`"cachedContent":"cachedContents/abc","labels":{"k":"v"}}`

// parse parses body, failing the test when it is no request.
func parse(t *testing.T, body string) *wire.Conversation {
	t.Helper()
	c, ok := Format{Model: "gemini-3-pro-preview"}.Parse([]byte(body))
	if !ok {
		t.Fatalf("not parsed: %s", body)
	}
	return c
}

// itemRow is what a test reads of an item.
type itemRow struct {
	msg   int
	kind  wire.Kind
	bound bool
	id    string
	tool  string
	text  string
}

func TestParseReadsEveryPartKind(t *testing.T) {
	c := parse(t, every)
	if c.Model != "gemini-3-pro-preview" || !c.SystemSlot || c.Lead != 0 || !c.Bound || len(c.Counted) != 3 {
		t.Fatalf("conversation %+v", c)
	}
	roles := []wire.Role{wire.RoleUser, wire.RoleAssistant, wire.RoleTool, wire.RoleAssistant, wire.RoleUser}
	for m, r := range roles {
		if c.Messages[m].Role != r {
			t.Errorf("content %d role %v, want %v", m, c.Messages[m].Role, r)
		}
	}
	f := Format{}
	want := []itemRow{
		{0, wire.KindUser, false, "", "", "fix the build"},
		{0, wire.KindOpaque, false, "", "", ""},
		{0, wire.KindOpaque, false, "", "", ""},
		{1, wire.KindOpaque, true, "", "", ""},                       // a thought, signed
		{1, wire.KindToolCall, true, "read_file#1", "read_file", ""}, // signed: the step's first call
		{1, wire.KindToolCall, false, "read_file#2", "read_file", ""},
		{1, wire.KindToolCall, false, "call-7", "run_shell_command", ""},
		{2, wire.KindToolResult, false, "read_file#1", "read_file", "package a"},
		{2, wire.KindToolResult, false, "read_file#2", "read_file", "package b"},
		{2, wire.KindToolResult, false, "call-7", "run_shell_command", `{"stdout":"ok","exitCode":0}`},
		{3, wire.KindOpaque, false, "", "", ""},
		{3, wire.KindOpaque, false, "", "", ""},
		{3, wire.KindAssistant, true, "", "", "Fixed."},
		{3, wire.KindOpaque, false, "", "", ""},
		{4, wire.KindUser, false, "", "", "thanks"},
	}
	if len(c.Items) != len(want) {
		t.Fatalf("%d items, want %d", len(c.Items), len(want))
	}
	for i, w := range want {
		it := c.Items[i]
		got := itemRow{it.Message, it.Kind, it.Bound, it.CallID, it.Tool, ""}
		if it.Content.Exists() {
			got.text = f.Text(c, i)
		}
		if got != w {
			t.Errorf("item %d: %+v, want %+v", i, got, w)
		}
	}
	if a := f.Arguments(c, 4); a != `{"path":"a.go"}` {
		t.Errorf("arguments %s", a)
	}
}

func TestParseRefusesWhatIsNoRequest(t *testing.T) {
	for _, body := range []string{`[]`, `{}`, `{"contents":{}}`, `"x"`, `{"contents":1}`} {
		if _, ok := (Format{}).Parse([]byte(body)); ok {
			t.Errorf("%s parsed", body)
		}
	}
}

func TestPairingByOrderAndName(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		ids        []string // of the calls, then of the results
	}{
		{"parallel calls of one tool pair in order",
			`{"contents":[{"role":"model","parts":[{"functionCall":{"name":"r","args":{"p":1}}},{"functionCall":{"name":"w","args":{}}},{"functionCall":{"name":"r","args":{"p":2}}}]},` +
				`{"role":"user","parts":[{"functionResponse":{"name":"r","response":{"output":"1"}}},{"functionResponse":{"name":"w","response":{"output":"w"}}},{"functionResponse":{"name":"r","response":{"output":"2"}}}]}]}`,
			[]string{"r#1", "w#1", "r#2", "r#1", "w#1", "r#2"}},
		{"responses in another order pair by name",
			`{"contents":[{"role":"model","parts":[{"functionCall":{"name":"a"}},{"functionCall":{"name":"b"}}]},` +
				`{"role":"user","parts":[{"functionResponse":{"name":"b","response":{}}},{"functionResponse":{"name":"a","response":{}}}]}]}`,
			[]string{"a#1", "b#1", "b#1", "a#1"}},
		{"ids pair by id, a response without one takes its call's",
			`{"contents":[{"role":"model","parts":[{"functionCall":{"id":"x","name":"a"}},{"functionCall":{"id":"y","name":"a"}}]},` +
				`{"role":"user","parts":[{"functionResponse":{"id":"y","name":"a","response":{}}},{"functionResponse":{"name":"a","response":{}}}]}]}`,
			[]string{"x", "y", "y", "y"}},
		{"Gemini CLI: a call without id, its response with an id of the client's",
			`{"contents":[{"role":"model","parts":[{"functionCall":{"name":"ls","args":{}},"thoughtSignature":"QQ=="}]},` +
				`{"role":"user","parts":[{"functionResponse":{"id":"ls-1733000000000-4f2a","name":"ls","response":{"output":"x"}}}]}]}`,
			[]string{"ls#1", "ls#1"}},
		{"a response to no call keeps its id",
			`{"contents":[{"role":"user","parts":[{"functionResponse":{"id":"z","name":"ls","response":{}}}]}]}`,
			[]string{"z"}},
		{"each turn's calls pair with the next content only",
			`{"contents":[{"role":"model","parts":[{"functionCall":{"name":"a"}}]},{"role":"user","parts":[{"functionResponse":{"name":"a","response":{}}}]},` +
				`{"role":"model","parts":[{"functionCall":{"name":"a"}}]},{"role":"user","parts":[{"functionResponse":{"name":"a","response":{}}}]}]}`,
			[]string{"a#1", "a#1", "a#1", "a#1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := parse(t, tc.body)
			var ids []string
			for _, k := range []wire.Kind{wire.KindToolCall, wire.KindToolResult} {
				for _, it := range c.Items {
					if it.Kind == k {
						ids = append(ids, it.CallID)
					}
				}
			}
			if strings.Join(ids, " ") != strings.Join(tc.ids, " ") {
				t.Errorf("ids %v, want %v", ids, tc.ids)
			}
		})
	}
}

func TestBoundWhenSignedOrThinking(t *testing.T) {
	for _, tc := range []struct {
		body  string
		bound bool
	}{
		{`{"contents":[{"role":"user","parts":[{"text":"a"}]}]}`, false},
		{`{"contents":[{"role":"model","parts":[{"text":"a","thoughtSignature":"s"}]}]}`, true},
		{`{"contents":[],"generationConfig":{"thinkingConfig":{"thinkingLevel":"high"}}}`, true},
		{`{"contents":[],"generation_config":{"thinking_config":{"thinking_budget":0}}}`, false},
		{`{"contents":[],"generationConfig":{"thinkingConfig":{"thinkingBudget":-1}}}`, true},
		// A signature on the user's side is none the model verifies.
		{`{"contents":[{"role":"user","parts":[{"text":"a","thoughtSignature":"s"}]}]}`, false},
	} {
		if c := parse(t, tc.body); c.Bound != tc.bound {
			t.Errorf("%s: bound %v", tc.body, c.Bound)
		}
	}
}

// outside is body with eds applied, which must be valid JSON.
func outside(t *testing.T, body []byte, eds []wire.Edit) []byte {
	t.Helper()
	out := wire.Splice(body, eds)
	if !jsonvalid.Valid(out) {
		t.Fatalf("invalid JSON: %s", out)
	}
	return out
}

// signatures returns every part with a thoughtSignature in body, as sent.
func signatures(t *testing.T, body []byte) []string {
	t.Helper()
	req, ok := Parse(body)
	if !ok {
		t.Fatalf("not a request: %s", body)
	}
	var parts []string
	for _, c := range req.Contents {
		for _, p := range c.List {
			if p.Signature.Exists() {
				parts = append(parts, string(p.Span.Of(body)))
			}
		}
	}
	return parts
}

func TestEditsKeepEverythingElseByteExact(t *testing.T) {
	body := []byte(every)
	c := parse(t, every)
	f := Format{}
	if !bytes.Equal(wire.Splice(body, nil), body) {
		t.Fatal("a render without edits is not the body")
	}
	keep := []string{
		`"tools":[{"functionDeclarations":[{"name":"read_file","description":"Reads","parametersJsonSchema":{"type":"object"}}]},{"googleSearch":{}}]`,
		`"toolConfig":{"functionCallingConfig":{"mode":"AUTO"}}`,
		`"generationConfig":{"temperature":1,"thinkingConfig":{"includeThoughts":true}}`,
		`"safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}]`,
		`"cachedContent":"cachedContents/abc","labels":{"k":"v"}`,
		`],"unknownContentField":true}`,
		`{"futurePart":{"x":1}}`,
	}
	var eds []wire.Edit
	for i, it := range c.Items {
		if it.Kind == wire.KindToolResult || it.Kind == wire.KindUser {
			eds = append(eds, f.ReplaceContent(c, i, "squashed"))
		}
	}
	ed, _, _ := f.AddInstructions(c, []string{"summary"}, count, nil, true)
	eds = append(eds, *ed) // systemInstruction follows contents in every
	out := outside(t, body, eds)
	for _, k := range keep {
		if !bytes.Contains(out, []byte(k)) {
			t.Errorf("lost %s in %s", k, out)
		}
	}
	if got, want := signatures(t, out), signatures(t, body); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("signed parts changed:\n%q\nwant\n%q", got, want)
	}
	for _, w := range []string{
		`"systemInstruction":{"role":"user","parts":[{"text":"You are an agent."},{"text":"summary"}]}`,
		`{"functionResponse":{"name":"read_file","response":{"output":"squashed"}}}`,
		`{"functionResponse":{"name":"read_file","response":{"result":"squashed","bytes":9}}}`,
		`{"function_response":{"id":"call-7","name":"run_shell_command","response":{"output":"squashed"}}}`,
	} {
		if !bytes.Contains(out, []byte(w)) {
			t.Errorf("no %s in %s", w, out)
		}
	}
}

func TestReplaceContentOfResponses(t *testing.T) {
	for _, tc := range []struct{ response, want string }{
		{`{"output":"long"}`, `{"output":"new"}`},
		{`{"error":"boom"}`, `{"error":"new"}`},
		{`{"content":"c","isError":false}`, `{"content":"new","isError":false}`},
		{`{"output":"o","result":"r"}`, `{"output":"new","result":"r"}`},
		{`{"stdout":"s"}`, `{"stdout":"new"}`},
		{`{"stdout":"s","stderr":"e"}`, `{"output":"new"}`},
		{`{"files":["a","b"]}`, `{"output":"new"}`},
	} {
		body := `{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"t","response":` + tc.response + `}}]}]}`
		c := parse(t, body)
		out := wire.Splice([]byte(body), []wire.Edit{Format{}.ReplaceContent(c, 0, "new")})
		want := `{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"t","response":` + tc.want + `}}]}]}`
		if string(out) != want {
			t.Errorf("%s: %s", tc.response, out)
		}
	}
}

func TestAddInstructions(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"contents":[]}`, `{"systemInstruction":{"parts":[{"text":"a"},{"text":"b"}]},"contents":[]}`},
		{`{"systemInstruction":{"parts":[{"text":"s"}]},"contents":[]}`, `{"systemInstruction":{"parts":[{"text":"s"},{"text":"a"},{"text":"b"}]},"contents":[]}`},
		{`{"system_instruction":{"parts":[]},"contents":[]}`, `{"system_instruction":{"parts":[{"text":"a"},{"text":"b"}]},"contents":[]}`},
		{`{"systemInstruction":{"role":"system"},"contents":[]}`, `{"systemInstruction":{"parts":[{"text":"a"},{"text":"b"}],"role":"system"},"contents":[]}`},
		{`{"systemInstruction":{},"contents":[]}`, `{"systemInstruction":{"parts":[{"text":"a"},{"text":"b"}]},"contents":[]}`},
		{`{"systemInstruction":null,"contents":[]}`, `{"systemInstruction":{"parts":[{"text":"a"},{"text":"b"}]},"contents":[]}`},
	} {
		c := parse(t, tc.body)
		ed, msg, tokens := Format{}.AddInstructions(c, []string{"a", "b"}, count, nil, true)
		if msg != nil || ed == nil || tokens <= 0 {
			t.Fatalf("%s: %v %s %d", tc.body, ed, msg, tokens)
		}
		if out := wire.Splice([]byte(tc.body), []wire.Edit{*ed}); string(out) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.body, out, tc.want)
		}
		if _, _, t2 := (Format{}).AddInstructions(c, []string{"a", "b"}, count, nil, false); t2 != tokens {
			t.Errorf("%s: tokens %d without build, %d with", tc.body, t2, tokens)
		}
	}
}

func TestPrependTextAndNewMessage(t *testing.T) {
	f := Format{}
	for _, tc := range []struct{ body, want string }{
		{`{"contents":[{"role":"user","parts":[{"text":"ask"}]}]}`, `{"contents":[{"role":"user","parts":[{"text":"note\n\nask"}]}]}`},
		{`{"contents":[{"role":"user","parts":[{"inlineData":{}}]}]}`, `{"contents":[{"role":"user","parts":[{"text":"note"},{"inlineData":{}}]}]}`},
	} {
		c := parse(t, tc.body)
		e, _, ok := f.PrependText(c, 0, "note", count)
		if !ok {
			t.Fatalf("%s: no prepend", tc.body)
		}
		at := c.Messages[0].Start // PrependText's offsets are the content's
		if out := wire.Splice([]byte(tc.body), []wire.Edit{{Start: at + e.Start, End: at + e.End, Repl: e.Repl}}); string(out) != tc.want {
			t.Errorf("got %s", out)
		}
	}
	c := parse(t, `{"contents":[{"role":"model","parts":[{"text":"a"}]},{"role":"user","parts":[{"functionResponse":{"name":"x","response":{}}}]}]}`)
	for m := range c.Messages {
		if _, _, ok := f.PrependText(c, m, "x", count); ok {
			t.Errorf("prepended to content %d", m)
		}
	}
	if msg, _ := f.NewMessage(wire.RoleAssistant, "hi", count); string(msg) != `{"role":"model","parts":[{"text":"hi"}]}` {
		t.Errorf("%s", msg)
	}
	if msg, _ := f.NewMessage(wire.RoleUser, "hi", count); string(msg) != `{"role":"user","parts":[{"text":"hi"}]}` {
		t.Errorf("%s", msg)
	}
}

func TestReplaceAndDropMessages(t *testing.T) {
	body := `{"contents":[{"role":"user","parts":[{"text":"a"}]},{"role":"model","parts":[{"text":"b"}]},{"role":"user","parts":[{"text":"c"}]}]}`
	c := parse(t, body)
	f := Format{}
	ed, ok := f.ReplaceMessages(c, 0, 2, [][]byte{[]byte(`{"role":"user","parts":[{"text":"s"}]}`)})
	if !ok {
		t.Fatal("no edit")
	}
	if out := wire.Splice([]byte(body), []wire.Edit{ed}); string(out) != `{"contents":[{"role":"user","parts":[{"text":"s"}]},{"role":"user","parts":[{"text":"c"}]}]}` {
		t.Errorf("replace: %s", out)
	}
	if out := wire.Splice([]byte(body), []wire.Edit{f.DropMessages(c, 1, 3)}); string(out) != `{"contents":[{"role":"user","parts":[{"text":"a"}]}]}` {
		t.Errorf("drop: %s", out)
	}
	empty := parse(t, `{"contents":[ ]}`)
	ed, ok = f.ReplaceMessages(empty, 0, 0, [][]byte{[]byte(`{}`)})
	if out := wire.Splice(empty.Body, []wire.Edit{ed}); !ok || string(out) != `{"contents":[{} ]}` {
		t.Errorf("into empty: %s", out)
	}
}

func TestOverheadAndDigest(t *testing.T) {
	c := parse(t, every)
	f := Format{}
	for m := range c.Messages {
		if f.Overhead(c, m, count) <= 0 {
			t.Errorf("content %d: no overhead", m)
		}
	}
	// Media count at their nominal cost, whatever their bytes.
	if n := f.Overhead(c, 0, count); n < 2*mediaTokens {
		t.Errorf("overhead of two media %d", n)
	}
	a := parse(t, `{"contents":[{"role":"user","parts":[{"text":"a"}]}]}`)
	b := parse(t, `{"contents":[ { "parts" : [ {"text":"\u0061"} ], "role":"user" } ]}`)
	s := parse(t, `{"contents":[{"role":"user","parts":[{"text":"a","thoughtSignature":"x"}]}]}`)
	if f.Digest(a, 0) != f.Digest(b, 0) {
		t.Error("the same content digests apart")
	}
	if f.Digest(a, 0) == f.Digest(s, 0) {
		t.Error("a signature does not change the digest")
	}
}
