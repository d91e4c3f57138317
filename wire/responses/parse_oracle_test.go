package responses

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/tidwall/gjson"
)

// gjsonRequest is a Responses body as gjson reads it, every member and
// item through gjson.Result: the reading parseValid's walk must match.
func gjsonRequest(body []byte) (*Request, bool) {
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return nil, false
	}
	req := &Request{Body: body}
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "model":
			req.Model = v.String()
		case "stream":
			req.Stream = v.Type == gjson.True
		case "store":
			req.Stored, req.Store = true, v.Type == gjson.True
		case "previous_response_id":
			req.PreviousResponseID = v.String()
		case "conversation":
			req.Conversation = v.Exists() && v.Type != gjson.Null
		case "prompt_cache_key":
			req.PromptCacheKey, req.PromptCacheKeySpan = v.String(), spanOf(v)
		case "instructions":
			req.Instructions = spanOf(v)
		case "tools":
			req.Tools = spanOf(v)
		case "context_management":
			req.ContextManagement = spanOf(v)
		case "input":
			req.Input = spanOf(v)
			req.InputIsText = v.Type == gjson.String
			if v.IsArray() {
				v.ForEach(func(_, e gjson.Result) bool {
					it := Item{Span: spanOf(e)}
					if e.IsObject() {
						var id, approvalRequestID, output Span
						it.Kind = KindMessage
						e.ForEach(func(k, f gjson.Result) bool {
							switch k.Str {
							case "type":
								it.Kind = f.String()
							case "role":
								it.Role = f.String()
							case "call_id":
								it.CallID = f.String()
							case "id":
								id = spanOf(f)
							case "approval_request_id":
								approvalRequestID = spanOf(f)
							case "name":
								it.Name = f.String()
							case "arguments", "input":
								it.Args = spanOf(f)
							case "content":
								it.Content = spanOf(f)
							case "output":
								output = spanOf(f)
							}
							return true
						})
						it.settle(body, id, approvalRequestID, output)
					}
					req.Items = append(req.Items, it)
					return true
				})
			}
		}
		return true
	})
	return req, true
}

// FuzzParseReadsWhatGjsonReads: for any valid body, Parse reads the
// members and items gjson reads (escaped keys and values, members sent
// twice, values of other types than expected).
//
//	go test -run '^$' -fuzz FuzzParseReadsWhatGjsonReads ./wire/responses/
func FuzzParseReadsWhatGjsonReads(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"hi"}`,
		`{"input":[{"role":"user","content":"a"}],"model":"m","model":"n","stream":true}`,
		`{"input":[{"type":"function_call","call_id":"c\u0031","name":7,"arguments":"{}"}],"input":[{"type":"local_shell_call"}],"tools":[]}`,
		`{"mod\u0065l":"m","store":false,"conversation":null,"previous_response_id":null,"prompt_cache_key":"k","input":[1,"x",{"ty\"pe":"x"}]}`,
		`{"input":[{"type":"mcp_approval_request","id":"a1","name":"n","arguments":"{}","server_label":"s"},{"type":"mcp_approval_response","approval_request_id":"a1","approve":true},{"type":"shell_call","call_id":"s1","action":{"commands":["ls"]}},{"type":"shell_call_output","call_id":"s1","output":[{"stdout":"x"}]},{"type":"compaction","encrypted_content":"gAAA"},{"type":"compaction_trigger"}],"context_management":[{"type":"compaction","compact_threshold":1000}]}`,
		`{"instructions":"be brief","input":[{"type":"reasoning","content":[]},{"role":"assistant","content":[{"type":"output_text","text":"ok"}]}]}`,
		`[]`, `"x"`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if jsonvalid.Valid(body) {
			checkReadsWhatGjsonReads(t, body)
		}
	})
}

// The captured codex requests (40-70 KB: too big to fuzz from) read as
// gjson reads them.
func TestParseReadsWhatGjsonReadsOnCodexCaptures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "internal", "responsestest", "testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatal("no captures", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		checkReadsWhatGjsonReads(t, b)
	}
}

func checkReadsWhatGjsonReads(t *testing.T, body []byte) {
	t.Helper()
	got, gotOK := parseValid(body)
	want, wantOK := gjsonRequest(body)
	if gotOK != wantOK {
		t.Fatalf("%q: ok %v, gjson %v", body, gotOK, wantOK)
	}
	if !gotOK {
		return
	}
	got.top = top{}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n%+v\ngjson reads\n%+v", body, got, want)
	}
}
