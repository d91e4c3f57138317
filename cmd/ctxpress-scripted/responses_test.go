package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"
)

// codexTools are codex 0.171's exec_command (a cmd string) and its
// apply_patch custom tool.
var codexTools = `[{"type":"function","name":"exec_command","strict":false,"parameters":{"type":"object","properties":{"cmd":{"type":"string"},"workdir":{"type":"string"}},"required":["cmd"],"additionalProperties":false}},` +
	`{"type":"custom","name":"apply_patch","format":{"type":"grammar","syntax":"lark","definition":"start: x"}}]`

const codexAsk = `{"type":"message","role":"user","content":[{"type":"input_text","text":"List the functions"}]}`

// respond sends one turn with the official client: the history as raw
// items, as codex re-sends them, and returns the answer (from
// response.completed when streamed).
func respond(t *testing.T, client openai.Client, history []json.RawMessage, stream bool) (*responses.Response, error) {
	t.Helper()
	var tools []any
	_ = json.Unmarshal([]byte(codexTools), &tools)
	params := responses.ResponseNewParams{Model: "m", Store: openai.Bool(false)}
	opts := []option.RequestOption{option.WithJSONSet("input", history), option.WithJSONSet("tools", tools)}
	return openaitest.Respond(client, params, stream, opts...)
}

// The next history: what was sent, every output item as received (the
// reasoning item byte for byte), and an output for each call.
func advance(history []json.RawMessage, r *responses.Response) ([]json.RawMessage, int) {
	calls := 0
	for _, it := range r.Output {
		history = append(history, json.RawMessage(it.RawJSON()))
		if it.Type == "function_call" {
			calls++
			out, _ := json.Marshal(map[string]string{"type": "function_call_output", "call_id": it.CallID,
				"output": "Chunk ID: 1\nWall time: 0.0 seconds\nProcess exited with code 0\nOutput:\na.py\n"})
			history = append(history, out)
		}
	}
	return history, calls
}

// A codex-shaped conversation through the official Responses client gets
// a reasoning item with each answer, the scripted exec_command calls, then
// the text; the usage reports the prompt and the prefix it shares with the
// previous request as cached, and the echoed reasoning items verify.
func TestResponsesToolTurnsThenTextWithPrefixCacheUsage(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
			_, ts := start(t, config{steps: []parStep{parseSteps("ls -la"), parseSteps("cat a.py")}})
			client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0),
				option.WithHeader("X-Session-ID", "thread_1"))
			history := []json.RawMessage{json.RawMessage(codexAsk)}
			var args []string
			var usages []responses.ResponseUsage
			text := ""
			for turn := 0; turn < 3; turn++ {
				r, err := respond(t, client, history, stream)
				if err != nil {
					t.Fatalf("turn %d: %v", turn, err)
				}
				if r.Output[0].Type != "reasoning" || r.Output[0].EncryptedContent == "" {
					t.Fatalf("turn %d: no reasoning item first: %s", turn, r.RawJSON())
				}
				usages = append(usages, r.Usage)
				for _, it := range r.Output {
					if it.Type == "function_call" {
						args = append(args, it.Name+" "+it.Arguments.OfString)
					}
				}
				var calls int
				if history, calls = advance(history, r); calls == 0 {
					text = r.OutputText()
					break
				}
			}
			if want := []string{`exec_command {"cmd":"ls -la"}`, `exec_command {"cmd":"cat a.py"}`}; strings.Join(args, "|") != strings.Join(want, "|") || text != "All done." {
				t.Fatalf("calls %q, text %q", args, text)
			}
			for i, u := range usages {
				if u.InputTokens == 0 || u.TotalTokens != u.InputTokens+u.OutputTokens || !u.JSON.InputTokensDetails.Valid() {
					t.Errorf("turn %d usage %+v", i, u)
				}
				if i > 0 && (u.InputTokensDetails.CachedTokens < usages[i-1].InputTokens-1 || u.InputTokensDetails.CachedTokens >= u.InputTokens) {
					t.Errorf("turn %d: cached %d of %d, previous prompt %d", i, u.InputTokensDetails.CachedTokens, u.InputTokens, usages[i-1].InputTokens)
				}
			}
		})
	}
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// firstTurn gets the server's first answer (reasoning + a call) and
// returns its items raw.
func firstTurn(t *testing.T, url string) (reasoning, call string) {
	t.Helper()
	status, b := post(t, url, `{"model":"m","store":false,"tools":`+codexTools+`,"input":[`+codexAsk+`]}`)
	out := gjson.Get(b, "output").Array()
	if status != 200 || len(out) != 2 {
		t.Fatalf("first turn: %d %s", status, b)
	}
	return out[0].Raw, out[1].Raw
}

// What the server refuses is what OpenAI refuses, with its status and
// error body: content it did not encrypt, a reasoning item parted from its
// call, an output without its call, a previous_response_id it never
// stored.
func TestResponsesRefusesWhatOpenAIRefuses(t *testing.T) {
	_, ts := start(t, config{steps: []parStep{parseSteps("ls")}})
	url := ts.URL + "/v1/responses"
	rs, fc := firstTurn(t, url)
	out := `{"type":"function_call_output","call_id":"` + gjson.Get(fc, "call_id").String() + `","output":"a.py"}`
	edited := strings.Replace(rs, `"encrypted_content":"gAAAAB`, `"encrypted_content":"gAAAAC`, 1)
	req := func(items ...string) string {
		return `{"model":"m","store":false,"tools":` + codexTools + `,"input":[` + strings.Join(items, ",") + `]}`
	}
	cases := []struct {
		name, body string
		status     int
		code       string // error.code; "-" for a null code
		message    string
	}{
		{"the conversation as received is accepted", req(codexAsk, rs, fc, out), 200, "", ""},
		{"edited encrypted content", req(codexAsk, edited, fc, out), 400, "invalid_encrypted_content", "could not be verified"},
		{"the reasoning item dropped", req(codexAsk, fc, out), 400, "-", "without its required 'reasoning' item"},
		{"the reasoning item moved after its call", req(codexAsk, fc, rs, out), 400, "-", "of type 'reasoning' was provided without its required following item"},
		{"an output without its call", req(codexAsk, out), 400, "-", "No tool call found for function call output with call_id"},
		{"a previous_response_id never stored", `{"model":"m","previous_response_id":"resp_scripted_1","input":"hi"}`, 400, "previous_response_not_found", "Previous response with id 'resp_scripted_1' not found."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, b := post(t, url, c.body)
			if status != c.status {
				t.Fatalf("%d %s, want %d", status, b, c.status)
			}
			if c.status == 200 {
				return
			}
			e := gjson.Get(b, "error")
			code := e.Get("code").String()
			if e.Get("code").Type == gjson.Null {
				code = "-"
			}
			if code != c.code || !strings.Contains(e.Get("message").String(), c.message) || e.Get("type").String() != "invalid_request_error" {
				t.Fatalf("error %s, want code %s and %q", e.Raw, c.code, c.message)
			}
		})
	}
}

// sse reads a streamed answer's events: the event line's type (checked
// against the data's) and the data.
func sse(t *testing.T, url, body string) (int, []gjson.Result) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []gjson.Result
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			name = n
		} else if d, ok := strings.CutPrefix(line, "data: "); ok {
			ev := gjson.Parse(d)
			if ev.Get("type").String() != name {
				t.Fatalf("event %q carries type %q", name, ev.Get("type"))
			}
			events = append(events, ev)
		}
	}
	return resp.StatusCode, events
}

func types(events []gjson.Result) string {
	var out []string
	for i, e := range events {
		if e.Get("sequence_number").Int() != int64(i) {
			return fmt.Sprintf("event %d has sequence_number %d", i, e.Get("sequence_number").Int())
		}
		out = append(out, strings.TrimPrefix(e.Get("type").String(), "response."))
	}
	return strings.Join(out, " ")
}

// The stream is OpenAI's event sequence, numbered from 0, with the usage
// in response.completed; with -cut-stream it ends without it.
func TestResponsesStreamIsOpenAIsEventSequence(t *testing.T) {
	callBody := `{"model":"m","stream":true,"store":false,"tools":` + codexTools + `,"input":[` + codexAsk + `]}`
	textBody := `{"model":"m","stream":true,"input":"Say hi"}`
	cases := []struct {
		name, body string
		cut        bool
		want       string
	}{
		{"a call", callBody, false, "created in_progress output_item.added output_item.done output_item.added function_call_arguments.delta function_call_arguments.delta function_call_arguments.done output_item.done completed"},
		{"text", textBody, false, "created in_progress output_item.added output_item.done output_item.added content_part.added output_text.delta output_text.delta output_text.delta output_text.done content_part.done output_item.done completed"},
		{"a cut stream", callBody, true, "created in_progress output_item.added output_item.done output_item.added function_call_arguments.delta function_call_arguments.delta function_call_arguments.done output_item.done"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, ts := start(t, config{steps: []parStep{parseSteps("ls")}, cutStream: c.cut})
			status, events := sse(t, ts.URL+"/v1/responses", c.body)
			if got := types(events); status != 200 || got != c.want {
				t.Fatalf("%d %s\nwant %s", status, got, c.want)
			}
			if c.cut {
				return
			}
			u := events[len(events)-1].Get("response.usage")
			for _, f := range []string{"input_tokens", "input_tokens_details.cached_tokens", "output_tokens", "total_tokens"} {
				if !u.Get(f).Exists() {
					t.Errorf("usage has no %s: %s", f, u.Raw)
				}
			}
			if events[0].Get("response.usage").Type != gjson.Null || events[len(events)-1].Get("response.status").String() != "completed" {
				t.Errorf("created %s, completed %s", events[0].Raw, events[len(events)-1].Raw)
			}
		})
	}
}

// Input over -context is refused as OpenAI refuses it: a 400 to a JSON
// request, response.failed in a stream; the official client sees both as
// the failure they are.
func TestResponsesContextWindow(t *testing.T) {
	_, ts := start(t, config{context: 50})
	long := `{"model":"m","input":"` + strings.Repeat("many words ", 40) + `"`
	status, b := post(t, ts.URL+"/v1/responses", long+`}`)
	if status != 400 || gjson.Get(b, "error.code").String() != "context_length_exceeded" || gjson.Get(b, "error.param").String() != "input" ||
		gjson.Get(b, "error.message").String() != contextExceeded {
		t.Fatalf("JSON: %d %s", status, b)
	}
	status, events := sse(t, ts.URL+"/v1/responses", long+`,"stream":true}`)
	last := events[len(events)-1]
	if got := types(events); status != 200 || got != "created in_progress failed" || last.Get("response.error.code").String() != "context_length_exceeded" {
		t.Fatalf("SSE: %d %s %s", status, got, last.Raw)
	}
	if status, b := post(t, ts.URL+"/v1/responses", `{"model":"m","input":"short"}`); status != 200 {
		t.Fatalf("a short input after: %d %s", status, b)
	}
}

// codex's remote compaction against the scripted server: a request ending
// in compaction_trigger gets one compaction item and nothing else (the
// script does not move on); the history started again from it is
// accepted, alone or after the items it compacted, and the script goes on
// where it was; a forged compaction is refused as OpenAI refuses it.
func TestResponsesRemoteCompaction(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
			_, ts := start(t, config{steps: []parStep{parseSteps("ls -la"), parseSteps("cat a.py")}})
			client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0),
				option.WithHeader("X-Session-ID", "thread_c"))
			history := []json.RawMessage{json.RawMessage(codexAsk)}
			r, err := respond(t, client, history, stream)
			if err != nil {
				t.Fatal(err)
			}
			history, _ = advance(history, r)
			before := history
			r, err = respond(t, client, append(history, json.RawMessage(`{"type":"compaction_trigger"}`)), stream)
			if err != nil || len(r.Output) != 1 || r.Output[0].Type != "compaction" || r.Output[0].EncryptedContent == "" {
				t.Fatalf("the compaction: %v %s", err, r.RawJSON())
			}
			history = []json.RawMessage{json.RawMessage(r.Output[0].RawJSON()), json.RawMessage(codexAsk)}
			r, err = respond(t, client, history, stream)
			if err != nil {
				t.Fatalf("the history after the compaction: %v", err)
			}
			if calls := r.Output[1]; calls.Type != "function_call" || calls.Arguments.OfString != `{"cmd":"cat a.py"}` {
				t.Fatalf("the script did not go on where it was: %s", r.RawJSON())
			}
			forged := strings.Replace(string(history[0]), "gAAAAC", "gAAAAX", 1)
			if _, err := respond(t, client, []json.RawMessage{json.RawMessage(forged), json.RawMessage(codexAsk)}, stream); err == nil {
				t.Fatal("a forged compaction was accepted")
			}
			if _, err := respond(t, client, append(before[:len(before):len(before)], history...), stream); err != nil {
				t.Errorf("the items before a compaction: %v", err)
			}
		})
	}
}
