package main

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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/internal/messagestest"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/internal/responsestest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"
)

// These tests run the built ctxpress binary, compaction on with a low
// trigger, in front of strict fake upstreams on 127.0.0.1, and drive
// multi-turn conversations through it: codex-shaped Responses agents with
// the official openai-go client, a Claude-shaped Messages agent over plain
// HTTP. The fakes refuse what the provider refuses (internal/responsestest,
// internal/messagestest, each with the ledger of what the fake issued), so
// a conversation ctxpress breaks fails here as it would for a user.

// binaryProcess is a running `ctxpress serve` and its log lines.
type binaryProcess struct {
	url  string
	mu   sync.Mutex
	logs []string // guarded by mu: every stderr line so far
}

// runBinary starts bin with a config file of upstream, a db in a temp dir
// and extra (YAML), and collects its log.
func runBinary(t *testing.T, bin, upstream, extra string) *binaryProcess {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yml")
	yml := fmt.Sprintf("upstream: %s\ndb: %s\n%s", upstream, filepath.Join(dir, "ctxpress.db"), extra)
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	_, url, sc := startBinary(t, bin, "--config", cfg)
	p := &binaryProcess{url: url}
	go func() {
		for sc.Scan() {
			p.mu.Lock()
			p.logs = append(p.logs, sc.Text())
			p.mu.Unlock()
		}
	}()
	return p
}

// checkLog waits for the access-log lines of n requests, then wants no
// panic, no error, every request answered 200, and no warning but those
// allowed says (nil: none).
func (p *binaryProcess) checkLog(t *testing.T, n int, allowed func(msg string) bool) {
	t.Helper()
	var lines []string
	requests := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		p.mu.Lock()
		lines = append(lines[:0], p.logs...)
		p.mu.Unlock()
		requests = 0
		for _, l := range lines {
			if gjson.Get(l, "message").Str == "request" {
				requests++
			}
		}
		if requests >= n {
			break
		}
	}
	if requests != n {
		t.Errorf("the log has %d request lines, want %d", requests, n)
	}
	for _, l := range lines {
		v := gjson.Parse(l)
		msg, level := v.Get("message").Str, v.Get("level").Str
		switch {
		case strings.Contains(strings.ToLower(l), "panic"):
			t.Errorf("the log shows a panic: %s", l)
		case msg == "request" && v.Get("status").Int() != http.StatusOK:
			t.Errorf("a request was not answered 200: %s", l)
		case level == "error" || level == "fatal":
			t.Errorf("the log has an error: %s", l)
		case level == "warn" && (allowed == nil || !allowed(msg)):
			t.Errorf("the log has a warning: %s", l)
		}
	}
}

// count returns how many log lines have message msg.
func (p *binaryProcess) count(msg string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.logs {
		if gjson.Get(l, "message").Str == msg {
			n++
		}
	}
	return n
}

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

	mu     sync.Mutex
	window int        // guarded by mu; 0: none
	openai bool       // the refusal is OpenAI's rather than llama-server's
	got    []fakeTurn // guarded by mu
	n      int        // answers issued, guarded by mu
}

// fakeTurn is one request a fake got and what it answered.
type fakeTurn struct {
	body    []byte
	summary bool
	status  int
	refusal string
	input   int // input tokens reported (or refused at)
}

var allCallKinds = []string{"function_call", "shell_call", "apply_patch_call", "computer_call", "mcp_approval_request"}

func newRespFake(t *testing.T, kinds ...string) *respFake {
	f := &respFake{ledger: responsestest.NewLedger(), kinds: kinds}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *respFake) turns() []fakeTurn {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeTurn(nil), f.got...)
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

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
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

// sse writes server-sent events, each flushed.
type sse struct {
	w   http.ResponseWriter
	seq int
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	return &sse{w: w}
}

func (s *sse) send(typ string, fields map[string]any) {
	fields["type"] = typ
	if strings.HasPrefix(typ, "response.") {
		fields["sequence_number"] = s.seq
		s.seq++
	}
	b, _ := json.Marshal(fields)
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", typ, b)
	s.w.(http.Flusher).Flush()
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

// toolText is the n-th tool output of a phase, ~1.2 KB, marked
// "<phase>/out<n>" so a test can tell where it went.
func toolText(phase string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "$ grep -n leap dateparse/*.go # %s/out%03d\n", phase, n)
	for i := 0; b.Len() < 1200; i++ {
		fmt.Fprintf(&b, "dateparse/parse_%d.go:%d: if year%%4 == 0 && (year%%100 != 0 || year%%400 == 0) { days = %d } // %s/out%03d\n", n, 10+i, 28+i%3, phase, n)
	}
	return b.String()
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// binaryCompaction is the config of the compaction scenarios: a trigger
// of 4,000 tokens, no background precompaction (every summary call is on
// the request path, so a test can tell when it came).
const binaryCompaction = "compaction:\n  enabled: true\n  threshold_tokens: 4000\n  precompact: false\n"

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
	bin := buildBinary(t)
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
	bin := buildBinary(t)
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

// ---- Messages: a strict fake upstream ----

// msgFake is a Messages upstream as strict as api.anthropic.com
// (messagestest.Check with its ledger and the request's headers) that
// also compacts as it does: a request whose context_management asks
// compact_20260112 and whose input is over the edit's trigger gets a
// compaction block first in its content (a summary and encrypted content
// only this fake issued), and usage with iterations (the compaction's,
// then the message's). A compaction block sent back must be one it issued,
// byte for byte. It counts input as bytes/4 of system, tools and messages
// from the latest compaction block on. Every other turn is a text and a
// Bash tool_use; a ctxpress summary call gets a tagged summary.
type msgFake struct {
	*httptest.Server
	ledger *messagestest.Ledger

	mu     sync.Mutex
	window int               // guarded by mu; 0: none, else refuse a longer prompt as Anthropic does
	issued map[string]string // guarded by mu: encrypted_content → the block issued
	got    []fakeTurn        // guarded by mu
	n      int               // guarded by mu
}

// serverCompactionOutput is what the fake's compaction reports it wrote;
// it reports the input it read.
const serverCompactionOutput = 812

func newMsgFake(t *testing.T) *msgFake {
	f := &msgFake{ledger: messagestest.NewLedger(), issued: map[string]string{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *msgFake) turns() []fakeTurn {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeTurn(nil), f.got...)
}

func isMsgSummary(body []byte) bool {
	m := gjson.GetBytes(body, "messages").Array()
	return len(m) > 0 && m[len(m)-1].Get("role").Str == "user" &&
		compactor.IsSummaryPrompt(openaitest.LastText(m[len(m)-1].Get("content")))
}

// msgInput is the fake's count of a Messages request, and whether it holds
// a compaction block it did not issue as issued.
func (f *msgFake) msgInput(body []byte) (int, string) {
	msgs := gjson.GetBytes(body, "messages")
	from := msgs.Index
	bad := ""
	msgs.ForEach(func(_, m gjson.Result) bool {
		m.Get("content").ForEach(func(_, b gjson.Result) bool {
			if b.Get("type").Str == "compaction" {
				from = bytes.LastIndex(body, []byte(b.Raw))
				if f.issued[b.Get("encrypted_content").Str] != b.Raw {
					bad = b.Raw
				}
			}
			return true
		})
		return true
	})
	n := len(gjson.GetBytes(body, "system").Raw) + len(gjson.GetBytes(body, "tools").Raw) + msgs.Index + len(msgs.Raw) - from
	return (n + 3) / 4, bad
}

func (f *msgFake) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	g := fakeTurn{body: body, summary: isMsgSummary(body)}
	defer func() { f.got = append(f.got, g) }()
	refuse := func(e *messagestest.Error) {
		g.status, g.refusal = e.Status, e.Message
		e.Write(w)
	}
	switch {
	case r.URL.Path != "/v1/messages":
		refuse(&messagestest.Error{Status: http.StatusNotFound, Type: "not_found_error", Message: "Not Found: " + r.URL.Path})
		return
	case r.Header.Get("X-Api-Key") != "sk-ant-test" || r.Header.Get("Anthropic-Version") == "":
		refuse(&messagestest.Error{Status: http.StatusUnauthorized, Type: "authentication_error", Message: "invalid x-api-key or no anthropic-version"})
		return
	}
	req, rerr := messagestest.Check(body, messagestest.Options{Ledger: f.ledger, Header: r.Header})
	if rerr != nil {
		refuse(rerr)
		return
	}
	input, bad := f.msgInput(body)
	if bad != "" {
		refuse(&messagestest.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: "compaction block could not be verified: " + bad})
		return
	}
	if f.window > 0 && input > f.window {
		refuse(&messagestest.Error{Status: http.StatusBadRequest, Type: "invalid_request_error",
			Message: fmt.Sprintf("prompt is too long: %d tokens > %d maximum", input, f.window)})
		return
	}
	g.status, g.input = http.StatusOK, input
	f.n++
	id := fmt.Sprintf("msg_up_%d", f.n)
	var blocks []map[string]any
	usage := map[string]any{"input_tokens": input, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 20}
	if limit, ok := compactEdit(body); ok && input > limit && !g.summary {
		summary := fmt.Sprintf("The user is fixing the leap-year bug (server-summary-%d).", f.n)
		enc, _ := f.ledger.Compact(req, id, summary)
		block := map[string]any{"type": "compaction", "content": summary, "encrypted_content": enc}
		raw, _ := json.Marshal(block)
		f.issued[block["encrypted_content"].(string)] = string(raw)
		blocks = append(blocks, block)
		after := 150
		usage = map[string]any{"input_tokens": after, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 20,
			"iterations": []map[string]any{
				{"type": "compaction", "input_tokens": input, "output_tokens": serverCompactionOutput, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
				{"type": "message", "input_tokens": after, "output_tokens": 20, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}}}
		g.input = after
	}
	stop := "end_turn"
	switch {
	case g.summary:
		blocks = append(blocks, map[string]any{"type": "text", "text": fmt.Sprintf("## Goal\nFix the leap-year bug.\n\n## Active Task\nsummary-%d", f.n)})
	case len(req.Tools) > 0:
		call := fmt.Sprintf("toolu_up%03d", f.n)
		f.ledger.ToolUse(id, call)
		blocks = append(blocks, map[string]any{"type": "text", "text": "Running the next step."},
			map[string]any{"type": "tool_use", "id": call, "name": "Bash", "input": map[string]any{"command": fmt.Sprintf("grep -n leap dateparse/*.go # %d", f.n)}})
		stop = "tool_use"
	default:
		blocks = append(blocks, map[string]any{"type": "text", "text": "Done."})
	}
	msg := map[string]any{"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": blocks,
		"stop_reason": stop, "stop_sequence": nil, "usage": usage}
	if !req.Stream {
		b, _ := json.Marshal(msg)
		writeJSON(w, http.StatusOK, b)
		return
	}
	s := newSSE(w)
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	start["usage"] = map[string]any{"input_tokens": usage["input_tokens"], "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}
	s.send("message_start", map[string]any{"message": start})
	for i, b := range blocks {
		switch b["type"] {
		case "compaction":
			s.send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "compaction", "content": ""}})
			s.send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "compaction_delta", "content": b["content"], "encrypted_content": b["encrypted_content"]}})
		case "tool_use":
			s.send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			in, _ := json.Marshal(b["input"])
			s.send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		default:
			s.send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			s.send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		}
		s.send("content_block_stop", map[string]any{"index": i})
	}
	s.send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": usage})
	s.send("message_stop", map[string]any{})
}

// compactEdit is the trigger of a compact_20260112 edit in body's
// context_management (150,000 when it names none), and whether there is one.
func compactEdit(body []byte) (int, bool) {
	for _, e := range gjson.GetBytes(body, "context_management.edits").Array() {
		if e.Get("type").Str == "compact_20260112" {
			if v := e.Get("trigger.value"); v.Exists() {
				return int(v.Int()), true
			}
			return 150000, true
		}
	}
	return 0, false
}

// ---- Messages: a Claude-style agent over plain HTTP ----

// msgAgent is a Claude-style tool loop: a system prompt, a Bash tool, every
// answer's content sent back as it came (blocks raw), a tool_result for
// each tool_use and, every third turn, a user text beside them.
type msgAgent struct {
	t       *testing.T
	url     string
	session string
	msgs    []string // raw messages
	manage  string   // context_management, raw; "" for none
	phase   string
	calls   int
	sent    int
	header  http.Header // of the last answer
	body    []byte      // the last request, as sent
	// lastCompactRequest is the request the server compacted.
	lastCompactRequest []byte
	// blockCalls is how many tool results were written before the
	// answer that held a compaction block: those are before it.
	blockCalls int
}

func newMsgAgent(t *testing.T, url, session string) *msgAgent {
	return &msgAgent{t: t, url: url, session: session, phase: "p1",
		msgs: []string{`{"role":"user","content":"The test TestParseDate fails on leap years; find and fix the bug in dateparse/parse.go."}`}}
}

// turn sends the history, fails the test unless it is answered, and
// appends the answer and the tool results; it returns the answer's blocks.
func (a *msgAgent) turn(stream bool) []string {
	a.t.Helper()
	body := `{"model":"claude-sonnet-4-5","max_tokens":4096,"system":"You are a coding agent. Use Bash to inspect the repository.",` +
		`"tools":[{"name":"Bash","description":"Runs a shell command.","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}],`
	if a.manage != "" {
		body += `"context_management":` + a.manage + `,`
	}
	body += fmt.Sprintf(`"stream":%v,"messages":[%s]}`, stream, strings.Join(a.msgs, ","))
	a.body = []byte(body)
	a.sent++
	req, _ := http.NewRequest(http.MethodPost, a.url+"/v1/messages", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "sk-ant-test")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("X-Session-ID", a.session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		a.t.Fatalf("turn %d refused: %d %s", a.sent, resp.StatusCode, raw)
	}
	a.header = resp.Header
	blocks := answerBlocks(raw, stream)
	var results []string
	for _, b := range blocks {
		switch gjson.Get(b, "type").Str {
		case "compaction":
			a.blockCalls = a.calls
		case "tool_use":
			a.calls++
			results = append(results, `{"type":"tool_result","tool_use_id":`+jsonString(gjson.Get(b, "id").Str)+`,"content":`+jsonString(toolText(a.phase, a.calls))+`}`)
		}
	}
	if len(blocks) == 0 {
		a.t.Fatalf("turn %d: an answer without content: %s", a.sent, raw)
	}
	a.msgs = append(a.msgs, `{"role":"assistant","content":[`+strings.Join(blocks, ",")+`]}`)
	if a.sent%3 == 0 {
		results = append(results, fmt.Sprintf(`{"type":"text","text":"Keep going (turn %d)."}`, a.sent))
	}
	if len(results) > 0 {
		a.msgs = append(a.msgs, `{"role":"user","content":[`+strings.Join(results, ",")+`]}`)
	}
	return blocks
}

func (a *msgAgent) compacted() bool { return a.header.Get("X-Ctxpress-Compacted") == "true" }

// answerBlocks is an answer's content blocks, raw: a message's as sent,
// a stream's put together from its events as the SDKs do.
func answerBlocks(raw []byte, stream bool) []string {
	var out []string
	if !stream {
		gjson.GetBytes(raw, "content").ForEach(func(_, b gjson.Result) bool {
			out = append(out, b.Raw)
			return true
		})
		return out
	}
	var blocks []map[string]any
	partial := map[int]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		ev := gjson.Parse(data)
		i := int(ev.Get("index").Int())
		switch ev.Get("type").Str {
		case "content_block_start":
			var b map[string]any
			_ = json.Unmarshal([]byte(ev.Get("content_block").Raw), &b)
			blocks = append(blocks, b)
		case "content_block_delta":
			d := ev.Get("delta")
			switch d.Get("type").Str {
			case "text_delta":
				blocks[i]["text"] = blocks[i]["text"].(string) + d.Get("text").Str
			case "input_json_delta":
				partial[i] += d.Get("partial_json").Str
			case "compaction_delta":
				blocks[i]["content"], blocks[i]["encrypted_content"] = d.Get("content").Str, d.Get("encrypted_content").Str
			}
		case "content_block_stop":
			if p, ok := partial[i]; ok {
				blocks[i]["input"] = json.RawMessage(p)
			}
		}
	}
	for _, b := range blocks {
		r, _ := json.Marshal(b)
		out = append(out, string(r))
	}
	return out
}

// A Claude-style tool loop through the real binary: ctxpress compacts;
// then requests ask the server to compact (a compact_20260112 edit) and
// ctxpress does not, though they are over its trigger, until the server
// does (they go as the turns before went, ctxpress's summary kept); the client keeps the compaction block and goes on without the
// edit until ctxpress compacts again, then more turns. Nothing is
// refused, every later request carries the block's message byte for byte,
// the summary call after it holds nothing from before it, the summary is
// in system, and the admin API shows the server's compaction apart from
// the turn's input.
func TestBinaryClaudeServerCompaction(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			up := newMsgFake(t)
			p := runBinary(t, bin, up.URL+"/v1", binaryCompaction)
			session := fmt.Sprintf("claude-server-compaction-%v", stream)
			a := newMsgAgent(t, p.url, session)
			for turn := 1; turn <= 40 && !a.compacted(); turn++ {
				a.turn(stream)
			}
			if !a.compacted() {
				t.Fatal("ctxpress never compacted before the server")
			}
			a.turn(stream)

			// The client asks the server to compact past 5,000 tokens.
			a.manage = `{"edits":[{"type":"compact_20260112","trigger":{"type":"input_tokens","value":5000}}]}`
			a.phase = "p2"
			before := len(up.turns())
			var block string
			for turn := 1; turn <= 40 && block == ""; turn++ {
				a.lastCompactRequest = nil
				blocks := a.turn(stream)
				a.lastCompactRequest = a.body
				for _, b := range blocks {
					if gjson.Get(b, "type").Str == "compaction" {
						block = b
					}
				}
				if a.compacted() {
					t.Fatal("ctxpress compacted a request that asks the server to compact")
				}
			}
			if block == "" {
				t.Fatal("the server never compacted")
			}
			got := up.turns()
			overTrigger := 0
			for _, g := range got[before:] {
				if g.summary {
					t.Fatal("ctxpress made a summary call while the client asked the server to compact")
				}
				if n, _ := up.msgInput(g.body); n > 4000 {
					overTrigger++
				}
			}
			if overTrigger == 0 {
				t.Error("no request with the compact edit was over ctxpress's trigger: the test proves little")
			}
			serverTurn := len(got) - 1
			// It went as the turns before it went: ctxpress's summary kept.
			sent, client := gjson.GetBytes(got[serverTurn].body, "messages").Array(), gjson.GetBytes(a.lastCompactRequest, "messages").Array()
			if len(sent) >= len(client) || !strings.Contains(gjson.GetBytes(got[serverTurn].body, "system").Raw, "<conversation_summary>") {
				t.Errorf("the request the server compacted went with %d messages of the client's %d, without ctxpress's summary", len(sent), len(client))
			}
			blockMessage := a.msgs[len(a.msgs)-2] // the answer that holds it; the tool results after it
			a.manage = ""
			a.phase = "p3"
			compactedAfter := false
			for turn := 1; turn <= 40 && !compactedAfter; turn++ {
				a.turn(stream)
				compactedAfter = a.compacted()
			}
			if !compactedAfter {
				t.Fatal("ctxpress never compacted after the server")
			}
			for range 3 {
				a.turn(stream)
			}

			summaries := 0
			got = up.turns()
			for i, g := range got {
				if g.status != http.StatusOK {
					t.Errorf("request %d refused: %d %s", i, g.status, g.refusal)
				}
				if i <= serverTurn {
					continue
				}
				if g.summary {
					summaries++
					// What the summariser reads: from the block on, when
					// the call carries it (the provider reads no further
					// back), else all of it.
					read := string(g.body)
					if at := strings.LastIndex(read, block); at >= 0 {
						read = read[at:]
					}
					for n := 1; n <= a.blockCalls; n++ {
						for _, ph := range []string{"p1", "p2"} {
							if m := fmt.Sprintf("%s/out%03d", ph, n); strings.Contains(read, m) {
								t.Errorf("the summary call after the server's compaction reads %s, from before it", m)
							}
						}
					}
					continue
				}
				if !strings.Contains(string(g.body), blockMessage) {
					t.Errorf("request %d does not carry the compaction block's message byte for byte", i)
				}
			}
			last := got[len(got)-1].body
			if summaries == 0 || !strings.Contains(gjson.GetBytes(last, "system").Raw, "<conversation_summary>") {
				t.Fatalf("%d summary calls after the server's compaction; the last request's system: %.300s", summaries, gjson.GetBytes(last, "system").Raw)
			}

			// The admin API shows the server's compaction apart.
			var show struct {
				Data []struct {
					ServerCompactionUsage struct {
						Calls        int64 `json:"calls"`
						InputTokens  int64 `json:"input_tokens"`
						OutputTokens int64 `json:"output_tokens"`
					} `json:"server_compaction_usage"`
					Turns []struct {
						InputTokens                  int `json:"input_tokens"`
						ServerCompactionInputTokens  int `json:"server_compaction_input_tokens"`
						ServerCompactionOutputTokens int `json:"server_compaction_output_tokens"`
					} `json:"turns"`
				} `json:"data"`
			}
			waitForJSON(t, p.url+"/ctxpress/conversations/"+session, &show, func() bool {
				return len(show.Data) == 1 && show.Data[0].ServerCompactionUsage.Calls == 1
			})
			compaction, _ := up.msgInput(got[serverTurn].body)
			sc := show.Data[0].ServerCompactionUsage
			if sc.InputTokens != int64(compaction) || sc.OutputTokens != serverCompactionOutput {
				t.Errorf("server_compaction_usage %+v, want %d in, %d out", sc, compaction, serverCompactionOutput)
			}
			found := 0
			for _, tu := range show.Data[0].Turns {
				if tu.ServerCompactionInputTokens != 0 {
					found++
					if tu.ServerCompactionInputTokens != compaction || tu.ServerCompactionOutputTokens != serverCompactionOutput || tu.InputTokens != 150 {
						t.Errorf("the server-compacted turn shows %+v; want input 150, server compaction %d in, %d out", tu, compaction, serverCompactionOutput)
					}
				}
			}
			if found != 1 {
				t.Errorf("%d turns show a server compaction, want 1", found)
			}
			p.checkLog(t, a.sent, nil)
		})
	}
}

// waitForJSON GETs url into v until done says so (or 10 s pass).
func waitForJSON(t *testing.T, url string, v any, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("GET %s: %d %s", url, resp.StatusCode, raw)
		}
		if done() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %s", url, raw)
		}
	}
}

// A Claude-style tool loop whose history holds the server's compaction,
// through the real binary, refused as too long by an upstream whose window
// ctxpress was not told (Anthropic's "prompt is too long"): ctxpress
// rescues the turn (compacts or cuts what follows the compaction block),
// the client gets the answer, the block's message goes byte for byte, and
// the turns after are answered too.
func TestBinaryRescuesAfterServerCompaction(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			up := newMsgFake(t)
			p := runBinary(t, bin, up.URL+"/v1", "compaction:\n  enabled: true\n  threshold_tokens: 1000000\n  precompact: false\n")
			a := newMsgAgent(t, p.url, fmt.Sprintf("claude-rescue-%v", stream))
			a.manage = `{"edits":[{"type":"compact_20260112","trigger":{"type":"input_tokens","value":3000}}]}`
			var block string
			for turn := 1; turn <= 40 && block == ""; turn++ {
				for _, b := range a.turn(stream) {
					if gjson.Get(b, "type").Str == "compaction" {
						block = b
					}
				}
			}
			if block == "" {
				t.Fatal("the server never compacted")
			}
			blockMessage := a.msgs[len(a.msgs)-2]
			a.manage = ""
			for range 8 {
				a.turn(stream)
			}
			got := up.turns()
			up.mu.Lock()
			up.window = got[len(got)-1].input
			up.mu.Unlock()
			a.turn(stream) // refused once, rescued
			for range 3 {
				a.turn(stream)
			}
			refused, summaries := 0, 0
			for _, g := range up.turns()[len(got):] {
				switch {
				case g.status != http.StatusOK:
					refused++
				case g.summary:
					summaries++
				case !strings.Contains(string(g.body), blockMessage):
					t.Fatal("a request after the rescue does not carry the compaction block's message byte for byte")
				}
			}
			if refused != 1 {
				t.Fatalf("%d refusals, want the one rescued", refused)
			}
			t.Logf("rescued with %d summary calls", summaries)
		})
	}
}
