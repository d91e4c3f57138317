package system

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/internal/responsestest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"
)

// ---- Responses: a strict fake upstream ----

// respFake is a Responses upstream as strict as api.openai.com
// (responsestest.Check with the ledger of what it issued) that also
// answers as the provider does: a compaction_trigger with one compaction
// item and nothing else; a ctxpress summary call with a tagged summary;
// any other turn with a reasoning item and parallel calls of kinds in
// turn (each answer's calls start one kind further). It counts input as
// bytes/4, every item read (a compaction item counts 120), and with
// window set refuses a request over it: llama-server's 400, or OpenAI's
// (a 400, or, streamed, response.failed).
type respFake struct {
	*httptest.Server
	ledger *responsestest.Ledger
	kinds  []string

	fakeLog      // its mu guards the fields below too
	window  int  // 0: none
	openai  bool // the refusal is OpenAI's rather than llama-server's
	n       int  // answers issued
}

var allCallKinds = []string{"function_call", "shell_call", "apply_patch_call", "computer_call", "mcp_approval_request"}

func newRespFake(t *testing.T, kinds ...string) *respFake {
	f := &respFake{ledger: responsestest.NewLedger(), kinds: kinds}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// respInput is the fake's count of a Responses request.
func respInput(body []byte) int {
	in := gjson.GetBytes(body, "input")
	n := len(in.Raw)
	for _, it := range in.Array() {
		if t := it.Get("type").Str; t == "compaction" || t == "compaction_summary" {
			n += 4*120 - len(it.Raw)
		}
	}
	return (n + len(gjson.GetBytes(body, "tools").Raw) + 3) / 4
}

func isRespSummary(body []byte) bool {
	in := gjson.GetBytes(body, "input").Array()
	return len(in) > 0 && in[len(in)-1].Get("role").Str == "user" &&
		compactor.IsSummaryPrompt(openaitest.LastText(in[len(in)-1].Get("content")))
}

func (f *respFake) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	g := fakeTurn{body: body, summary: isRespSummary(body)}
	defer func() { f.got = append(f.got, g) }()
	if r.URL.Path != "/v1/responses" {
		g.status, g.refusal = http.StatusNotFound, "path "+r.URL.Path
		http.NotFound(w, r)
		return
	}
	req, rerr := responsestest.Check(body, responsestest.Options{Ledger: f.ledger})
	if rerr != nil {
		g.status, g.refusal = rerr.Status, rerr.Message
		writeJSON(w, rerr.Status, rerr.Body())
		return
	}
	g.input = respInput(body)
	if f.window > 0 && g.input > f.window {
		g.status, g.refusal = http.StatusBadRequest, "over the window"
		switch {
		case f.openai && req.Stream:
			g.status = http.StatusOK
			f.streamOverflow(w, req.Model)
		case f.openai:
			writeJSON(w, http.StatusBadRequest, []byte(`{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`))
		default:
			writeJSON(w, http.StatusBadRequest, []byte(fmt.Sprintf(`{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":%d,"n_ctx":%d}}`, g.input, f.window)))
		}
		return
	}
	g.status = http.StatusOK
	f.n++
	id := fmt.Sprintf("resp_up_%d", f.n)
	sum := sha256.Sum256([]byte(id))
	enc := base64.StdEncoding.EncodeToString(sum[:])
	items := []map[string]any{{"id": fmt.Sprintf("rs_up_%d", f.n), "type": "reasoning", "summary": []any{}, "encrypted_content": "gAAAAB" + enc}}
	switch {
	case req.Trigger():
		items = []map[string]any{{"id": fmt.Sprintf("cmp_up_%d", f.n), "type": "compaction", "encrypted_content": "gAAAAC" + enc}}
	case g.summary:
		items = append(items, respMessage(f.n, fmt.Sprintf("## Goal\nFix the leap-year bug.\n\n## Active Task\nsummary-%d", f.n)))
	case len(req.Tools) > 0:
		for j := range 2 {
			items = append(items, respCall(f.kinds[(f.n+j)%len(f.kinds)], f.n, j))
		}
	default:
		items = append(items, respMessage(f.n, "Done."))
	}
	resp, _ := json.Marshal(map[string]any{"id": id, "object": "response", "created_at": 1764547200, "status": "completed",
		"model": req.Model, "output": items, "store": req.Store, "error": nil, "incomplete_details": nil, "tools": []any{},
		"usage": map[string]any{"input_tokens": g.input, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 9, "output_tokens_details": map[string]any{"reasoning_tokens": 4}, "total_tokens": g.input + 9}})
	f.ledger.Record(resp, req.Store)
	if !req.Stream {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	sse := newSSE(w)
	started := map[string]any{"id": id, "object": "response", "created_at": 1764547200, "status": "in_progress", "model": req.Model, "output": []any{}}
	sse.send("response.created", map[string]any{"response": started})
	for i, it := range items {
		added := it
		if it["type"] == "compaction" {
			added = map[string]any{"id": it["id"], "type": "compaction"} // its content comes when done
		}
		sse.send("response.output_item.added", map[string]any{"output_index": i, "item": added})
		sse.send("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	sse.send("response.completed", map[string]any{"response": json.RawMessage(resp)})
}

func respMessage(n int, text string) map[string]any {
	return map[string]any{"id": fmt.Sprintf("msg_up_%d", n), "type": "message", "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
}

// respCall is the j-th call of answer n, of kind, as OpenAI issues it.
func respCall(kind string, n, j int) map[string]any {
	id := fmt.Sprintf("up_%d_%d", n, j)
	call := map[string]any{"id": "it_" + id, "type": kind, "status": "completed", "call_id": "call_" + id}
	switch kind {
	case "function_call":
		call["id"], call["name"], call["arguments"] = "fc_"+id, "exec_command", fmt.Sprintf(`{"cmd":"sed -n %d,%dp dateparse/parse.go"}`, n*10, n*10+8)
	case "shell_call":
		call["action"] = map[string]any{"commands": []string{fmt.Sprintf("grep -n leap dateparse/*.go # %d", n)}}
	case "apply_patch_call":
		call["operation"] = map[string]any{"type": "update_file", "path": "dateparse/parse.go", "diff": fmt.Sprintf("@@ -%d +%d @@\n-x\n+y", n, n)}
	case "computer_call":
		call["action"], call["pending_safety_checks"] = map[string]any{"type": "screenshot"}, []any{}
	case "mcp_approval_request":
		call = map[string]any{"id": "mcpr_" + id, "type": kind, "name": "deploy", "server_label": "ops", "arguments": fmt.Sprintf(`{"build":%d}`, n)}
	}
	return call
}

// streamOverflow refuses as OpenAI does a streamed request over the
// window: a 200 stream ending in response.failed, before any output.
func (f *respFake) streamOverflow(w http.ResponseWriter, model string) {
	sse := newSSE(w)
	resp := map[string]any{"id": "resp_refused", "object": "response", "created_at": 1764547200, "status": "in_progress", "model": model, "output": []any{}, "error": nil}
	sse.send("response.created", map[string]any{"response": resp})
	resp["status"], resp["error"] = "failed", map[string]any{"code": "context_length_exceeded",
		"message": "Your input exceeds the context window of this model. Please adjust your input and try again."}
	sse.send("response.failed", map[string]any{"response": resp})
}

// ---- Responses: a codex-shaped agent ----

// respAgent is a codex-shaped agent with the official client: developer
// prompt and ask, then every answer's output items sent back raw (store
// false) and an output of its kind for each call, paired by id.
type respAgent struct {
	t      *testing.T
	client openai.Client
	key    string
	items  []responses.ResponseInputItemUnionParam
	phase  string // marks the outputs the agent writes
	calls  int
	sent   int         // requests made
	header http.Header // of the last answer
	body   []byte      // the last request's body, as sent
}

func newRespAgent(t *testing.T, url, key string) *respAgent {
	a := &respAgent{t: t, key: key, phase: "p1",
		client: openai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey("sk-agent"), option.WithMaxRetries(0))}
	a.items = []responses.ResponseInputItemUnionParam{respMsg("You are a coding agent. Use exec_command to inspect the repository.", responses.EasyInputMessageRoleDeveloper)}
	a.ask("The test TestParseDate fails on leap years; find and fix the bug in dateparse/parse.go.")
	return a
}

func respMsg(text string, role responses.EasyInputMessageRole) responses.ResponseInputItemUnionParam {
	m := responses.ResponseInputItemParamOfMessage(text, role)
	m.OfMessage.Type = responses.EasyInputMessageTypeMessage
	return m
}

func (a *respAgent) ask(text string) {
	a.items = append(a.items, respMsg(text, responses.EasyInputMessageRoleUser))
}

// rawInput is an input item sent as the raw JSON given.
func rawInput(raw string) responses.ResponseInputItemUnionParam {
	p := param.Override[responses.ResponseInputItemCompactionTriggerParam](json.RawMessage(raw))
	return responses.ResponseInputItemUnionParam{OfCompactionTrigger: &p}
}

// send makes the next request, whole or streamed.
func (a *respAgent) send(stream bool) (*responses.Response, error) {
	params := responses.ResponseNewParams{
		Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: a.items},
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "exec_command", Strict: openai.Bool(false),
			Parameters: map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}}}}},
		Store: openai.Bool(false), Include: []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
		PromptCacheKey: openai.String(a.key), ParallelToolCalls: openai.Bool(true),
	}
	a.sent++
	opts := []option.RequestOption{option.WithHeader("session-id", a.key),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			a.body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(a.body))
			resp, err := next(r)
			if resp != nil {
				a.header = resp.Header
			}
			return resp, err
		})}
	return openaitest.Respond(a.client, params, stream, opts...)
}

// turn sends the next request, fails the test unless it is answered, and
// takes the answer's items and an output for each call.
func (a *respAgent) turn(stream bool) *responses.Response {
	a.t.Helper()
	r, err := a.send(stream)
	if apiErr := (*openai.Error)(nil); errors.As(err, &apiErr) {
		a.t.Fatalf("turn %d refused: %d %s", a.sent, apiErr.StatusCode, apiErr.RawJSON())
	} else if err != nil {
		a.t.Fatalf("turn %d: %v", a.sent, err)
	}
	var outputs []responses.ResponseInputItemUnionParam
	for _, it := range r.Output {
		raw := it.RawJSON()
		a.items = append(a.items, rawInput(raw))
		if out := a.output(gjson.Parse(raw)); out != "" {
			outputs = append(outputs, rawInput(out))
		}
	}
	a.items = append(a.items, outputs...)
	return r
}

func (a *respAgent) compacted() bool { return a.header.Get("X-Ctxpress-Compacted") == "true" }

// output is the client's output of call, in its kind's shape; "" when it
// is no call.
func (a *respAgent) output(call gjson.Result) string {
	kind := call.Get("type").Str
	if !strings.HasSuffix(kind, "_call") && kind != "mcp_approval_request" {
		return ""
	}
	a.calls++
	text, id := toolText(a.phase, a.calls), jsonString(call.Get("call_id").Str)
	switch kind {
	case "function_call":
		return `{"type":"function_call_output","call_id":` + id + `,"output":` + jsonString(text) + `}`
	case "shell_call":
		return `{"type":"shell_call_output","call_id":` + id + `,"output":[{"stdout":` + jsonString(text) + `,"stderr":"","outcome":{"type":"exit","exit_code":0}}]}`
	case "apply_patch_call":
		return `{"type":"apply_patch_call_output","call_id":` + id + `,"status":"completed","output":` + jsonString(text) + `}`
	case "computer_call":
		return `{"type":"computer_call_output","call_id":` + id + `,"output":{"type":"computer_screenshot","image_url":"data:image/png;base64,` +
			base64.StdEncoding.EncodeToString([]byte(text)) + `"}}`
	}
	return `{"type":"mcp_approval_response","approval_request_id":` + jsonString(call.Get("id").Str) + `,"approve":true}`
}

// codex's remote compaction through the real binary, with every call kind
// (parallel, mixed): ctxpress compacts; the client's compaction_trigger
// request is not compacted again (no summary call) but goes as the turn
// before it went, ctxpress's summary kept, the trigger last, and gets its
// one compaction item; the client restarts
// from [developer, compaction] and runs on until ctxpress compacts again,
// then more turns. Every later request carries the compaction item byte
// for byte where the client put it, ctxpress's summary right after it; the
// summary call after it holds nothing from before it; nothing is refused.
func TestBinaryCodexRemoteCompactionWithEveryCallKind(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := ctxpressBinary(t)
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			up := newRespFake(t, allCallKinds...)
			p := runBinary(t, bin, up.URL+"/v1", binaryCompaction)
			a := newRespAgent(t, p.url, "codex-remote")
			for turn := 1; turn <= 40 && !a.compacted(); turn++ {
				a.turn(stream)
			}
			if !a.compacted() {
				t.Fatal("ctxpress never compacted before the provider")
			}
			a.turn(stream)
			before := len(up.turns())

			// The client asks the provider to compact.
			a.items = append(a.items, rawInput(`{"type":"compaction_trigger"}`))
			r, err := a.send(stream)
			if err != nil {
				t.Fatalf("the compaction request: %v", err)
			}
			got := up.turns()
			if len(got) != before+1 || a.compacted() {
				t.Fatalf("ctxpress compacted the client's compaction request (%d upstream requests for 1)", len(got)-before)
			}
			// It goes as the turn before it went (ctxpress's summary kept:
			// the provider compacts what it has cached), the trigger last.
			sent, prev := gjson.GetBytes(got[before].body, "input").Array(), gjson.GetBytes(got[before-1].body, "input").Array()
			if len(sent) <= len(prev) || sent[len(sent)-1].Get("type").Str != "compaction_trigger" {
				t.Fatalf("the compaction request went with %d items, the turn before with %d", len(sent), len(prev))
			}
			for i := range prev {
				if sent[i].Raw != prev[i].Raw {
					t.Errorf("the compaction request's item %d went as\n%.300s\nthe turn before sent\n%.300s", i, sent[i].Raw, prev[i].Raw)
				}
			}
			if len(r.Output) != 1 || r.Output[0].Type != "compaction" {
				t.Fatalf("the client got %d output items", len(r.Output))
			}

			// codex starts its history again from the compaction item.
			cmp := r.Output[0].RawJSON()
			a.items = append(a.items[:1:1], rawInput(cmp))
			a.ask("Go on with the fix.")
			a.phase = "p2"
			trigger := len(up.turns())
			compactedAfter := false
			for turn := 1; turn <= 40 && !compactedAfter; turn++ {
				a.turn(stream)
				compactedAfter = a.compacted()
			}
			if !compactedAfter {
				t.Fatal("ctxpress never compacted after the provider")
			}
			for range 3 {
				a.turn(stream)
			}

			summaries := 0
			for i, g := range up.turns() {
				if g.status != http.StatusOK {
					t.Errorf("request %d refused: %d %s", i, g.status, g.refusal)
				}
				if i < trigger {
					continue
				}
				if g.summary {
					summaries++
					if s := string(g.body); strings.Contains(s, "p1/out") {
						t.Errorf("the summary call after the provider's compaction holds items from before it: %.400s", s[strings.Index(s, "p1/out")-200:])
					}
					continue
				}
				items := gjson.GetBytes(g.body, "input").Array()
				if len(items) < 2 || items[1].Raw != cmp {
					t.Errorf("request %d does not carry the compaction item byte for byte at input[1]", i)
				}
				if at := summaryAt(g.body); at >= 0 && at != 2 {
					t.Errorf("request %d has ctxpress's summary at input[%d], not right after the compaction item", i, at)
				}
			}
			last := up.turns()[len(up.turns())-1].body
			if summaries == 0 || summaryAt(last) != 2 {
				t.Fatalf("%d summary calls after the provider's compaction; the last request's summary at input[%d]", summaries, summaryAt(last))
			}
			kinds := 0
			for _, k := range []string{"function_call_output", "shell_call_output", "apply_patch_call_output", "computer_call_output", "mcp_approval_response"} {
				if strings.Contains(string(last), `"type":"`+k+`"`) {
					kinds++
				}
			}
			if kinds < 3 {
				t.Errorf("the last request has %d output kinds: the test proves little", kinds)
			}
			p.checkLog(t, a.sent, nil)
		})
	}
}

// summaryAt is the index of the input item holding ctxpress's summary
// block, -1 when none.
func summaryAt(body []byte) int {
	for i, it := range gjson.GetBytes(body, "input").Array() {
		if strings.Contains(it.Raw, "<conversation_summary>") {
			return i
		}
	}
	return -1
}

// A codex-shaped agent with shell and apply_patch calls through the real
// binary, in front of a server with a small window ctxpress does not
// know: the first request over it is refused (llama-server's 400, OpenAI's
// 400 or its streamed response.failed) and ctxpress rescues it; nothing
// else is refused, no call is parted from its output, and the turns after
// it go on.
func TestBinaryRescuesEveryCallKind(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := ctxpressBinary(t)
	for _, c := range []struct {
		name           string
		openai, stream bool
	}{{"llama-server", false, false}, {"llama-server/stream", false, true}, {"openai", true, false}, {"openai/stream", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			up := newRespFake(t, "shell_call", "apply_patch_call")
			up.openai = c.openai
			p := runBinary(t, bin, up.URL+"/v1", "compaction:\n  enabled: true\n  threshold_tokens: 1000000\n  precompact: false\n  summarizer:\n    max_tokens: 300\n")
			a := newRespAgent(t, p.url, "rescue-"+c.name)
			for range 10 {
				a.turn(c.stream)
			}
			got := up.turns()
			up.mu.Lock()
			up.window = got[len(got)-1].input // the next request is over it
			up.mu.Unlock()
			a.turn(c.stream)
			for range 3 {
				a.turn(c.stream)
			}
			refused := 0
			for i, g := range up.turns() {
				if g.refusal == "" {
					continue
				}
				refused++
				if i != len(got) || g.refusal != "over the window" {
					t.Errorf("request %d refused: %d %s", i, g.status, g.refusal)
				}
			}
			after := up.turns()
			rescued := after[len(after)-4]
			if refused != 1 || rescued.refusal != "" || rescued.summary {
				t.Fatalf("%d refusals; the rescued turn: %d %q", refused, rescued.status, rescued.refusal)
			}
			if !strings.Contains(string(rescued.body), `"type":"shell_call_output"`) || !strings.Contains(string(rescued.body), `"type":"apply_patch_call_output"`) {
				t.Error("the rescued request has no shell or apply_patch output left: the test proves little")
			}
			p.checkLog(t, a.sent, func(msg string) bool { return strings.HasPrefix(msg, "the upstream refused the request as too long") })
			if p.count("the upstream refused the request as too long; sending it again compacted or cut to fit") != 1 {
				t.Error("the log does not say once that a refusal was rescued")
			}
		})
	}
}
