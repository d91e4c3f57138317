package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/internal/responsestest"
)

// responsesUpstream is a Responses API upstream on 127.0.0.1 as strict as
// api.openai.com: every request is checked by internal/responsestest
// against the ledger of what this server issued (nil ledger: the body's
// own rules only, for requests recorded against another server) (reasoning items whose
// encrypted content only it made, the item each one preceded, stored
// responses) and refused with OpenAI's status and error body. An accepted
// turn is answered with a reasoning item, then exec_command calls while
// the conversation has had fewer than toolTurns outputs (parallel of them
// at once), then a text message; whole, or as OpenAI's SSE events ending
// with response.completed. A summary call (isResponsesSummary) is
// answered with a summary.
type responsesUpstream struct {
	*httptest.Server
	ledger *responsestest.Ledger

	mu sync.Mutex
	// toolTurns, parallel: see above. window > 0 refuses an input over
	// it (in this server's tokens, bytes/4) as llama-server does, with a
	// 400 before any event, or, when overflowInStream, a streamed one as
	// OpenAI does (streamOverflow). end, when set, ends every stream with
	// that event instead of response.completed ("": cut before any end).
	toolTurns, parallel, window int
	overflowInStream            bool
	end                         *string
	// cmds, when set, are the calls' commands in turn (else a sed -n of
	// a range that moves on).
	cmds []string
	// callKind is the kind of call the model makes ("" for
	// function_call): shell_call, apply_patch_call, computer_call or
	// mcp_approval_request, each paired with its output by id.
	callKind string
	// reasoning are the models that refuse temperature, as OpenAI's
	// reasoning models do on /v1/responses.
	reasoning map[string]bool
	got       []upstreamTurn // guarded by mu
	n         int            // responses issued, guarded by mu
	noCache   bool           // report nothing cached, as a provider without a prompt cache
}

// upstreamTurn is one request the upstream got, and what it answered.
type upstreamTurn struct {
	path    string
	header  http.Header
	body    []byte
	summary bool // a summary call
	status  int
	refusal string
	input   int // input_tokens reported
	cached  int // input_tokens_details.cached_tokens reported
}

func newResponsesUpstream(t *testing.T) *responsesUpstream {
	u := &responsesUpstream{ledger: responsestest.NewLedger(), toolTurns: 1 << 30, parallel: 1}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *responsesUpstream) BaseURL() string { return u.URL + "/v1" }

// turns returns the requests so far: conversation turns and summary calls.
func (u *responsesUpstream) turns() (turns, summaries []upstreamTurn) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, g := range u.got {
		if g.summary {
			summaries = append(summaries, g)
		} else {
			turns = append(turns, g)
		}
	}
	return turns, summaries
}

// inputTokens is this server's count of a request: its input and tools,
// in bytes/4, as a provider prefills them; a compaction item stands for
// compactionTokens, whatever its encrypted content's length.
func inputTokens(body []byte) int {
	input := gjson.GetBytes(body, "input")
	n := len(input.Raw)
	for _, it := range input.Array() {
		if t := it.Get("type").Str; t == "compaction" || t == "compaction_summary" {
			n += 4*compactionTokens - len(it.Raw)
		}
	}
	return (n + len(gjson.GetBytes(body, "tools").Raw) + 3) / 4
}

// compactionTokens is what a compaction item this server issued counts.
const compactionTokens = 120

func (u *responsesUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	g := upstreamTurn{path: r.URL.Path, header: r.Header.Clone(), body: body, summary: isResponsesSummary(body)}
	u.mu.Lock()
	defer u.mu.Unlock()
	defer func() { u.got = append(u.got, g) }()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		g.status = http.StatusNotFound
		http.NotFound(w, r)
		return
	}
	if m := gjson.GetBytes(body, "model").Str; u.reasoning[m] && gjson.GetBytes(body, "temperature").Exists() {
		g.status, g.refusal = http.StatusBadRequest, "temperature"
		answerJSON(w, http.StatusBadRequest, []byte(`{"error":{"message":"Unsupported parameter: 'temperature' is not supported with this model.","type":"invalid_request_error","param":"temperature","code":"unsupported_parameter"}}`))
		return
	}
	req, rerr := responsestest.Check(body, responsestest.Options{Ledger: u.ledger})
	if rerr != nil {
		g.status, g.refusal = rerr.Status, rerr.Message
		answerJSON(w, rerr.Status, rerr.Body())
		return
	}
	g.input = inputTokens(body)
	if u.window > 0 && g.input > u.window && u.overflowInStream && req.Stream {
		g.status, g.refusal = http.StatusOK, "context_length_exceeded"
		u.streamOverflow(w, req)
		return
	}
	if u.window > 0 && g.input > u.window {
		g.status, g.refusal = http.StatusBadRequest, "exceed_context_size_error"
		answerJSON(w, http.StatusBadRequest, []byte(fmt.Sprintf(`{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":%d,"n_ctx":%d}}`, g.input, u.window)))
		return
	}
	g.cached = u.cachedTokens(body)
	g.status = http.StatusOK
	resp := u.respond(req, body, g)
	if !req.Stream {
		answerJSON(w, http.StatusOK, resp.completed)
		return
	}
	u.stream(w, resp)
}

// cachedTokens is the longest common prefix of body's input with the last
// conversation turn's, in this server's tokens: a prefix cache.
func (u *responsesUpstream) cachedTokens(body []byte) int {
	if u.noCache {
		return 0
	}
	for i := len(u.got) - 1; i >= 0; i-- {
		if u.got[i].summary || u.got[i].status != http.StatusOK {
			continue
		}
		a, b := gjson.GetBytes(u.got[i].body, "input").Raw, gjson.GetBytes(body, "input").Raw
		n := 0
		for n < len(a) && n < len(b) && a[n] == b[n] {
			n++
		}
		return n / 4
	}
	return 0
}

// isResponsesSummary reports whether body is ctxpress's summary call in
// Responses form: its last item is a user message whose last text is a
// summary prompt.
func isResponsesSummary(body []byte) bool {
	in := gjson.GetBytes(body, "input").Array()
	return len(in) > 0 && in[len(in)-1].Get("role").Str == "user" &&
		compactor.IsSummaryPrompt(openaitest.LastText(in[len(in)-1].Get("content")))
}

// testSummary is what a summary call gets.
const testSummary = "## Goal\nFix the leap-year bug.\n\n## Completed Actions\n1. Read dateparse/parse.go.\n\n## Active Task\nFix the bug."

// issued is one answer: its output items and the whole response object.
type issued struct {
	items     []map[string]any
	completed []byte
}

// respond makes the answer to an accepted request and notes it in the
// ledger.
func (u *responsesUpstream) respond(req *responsestest.Request, body []byte, g upstreamTurn) issued {
	u.n++
	id := fmt.Sprintf("resp_up_%d", u.n)
	sum := sha256.Sum256([]byte(id))
	var r issued
	r.items = append(r.items, map[string]any{"id": fmt.Sprintf("rs_up_%d", u.n), "type": "reasoning", "summary": []any{},
		"encrypted_content": "gAAAAB" + base64.StdEncoding.EncodeToString(sum[:])})
	outputs := 0
	for _, it := range req.Items {
		if strings.HasSuffix(it.Type, "_output") || it.Type == "mcp_approval_response" {
			outputs++
		}
	}
	switch {
	case req.Trigger():
		// The client's own compaction: the one compaction item, which
		// stands for everything before it.
		r.items = []map[string]any{{"id": fmt.Sprintf("cmp_up_%d", u.n), "type": "compaction",
			"encrypted_content": "gAAAAC" + base64.StdEncoding.EncodeToString(sum[:])}}
	case !g.summary && len(req.Tools) > 0 && outputs < u.toolTurns && u.callKind != "":
		for j := 0; j < u.parallel; j++ {
			r.items = append(r.items, kindCall(u.callKind, u.n, j))
		}
	case !g.summary && len(req.Tools) > 0 && outputs < u.toolTurns:
		for j := 0; j < u.parallel; j++ {
			cmd := fmt.Sprintf("sed -n %d,%dp dateparse/parse.go", u.n*10+j, u.n*10+j+8)
			if len(u.cmds) > 0 {
				cmd = u.cmds[(u.n-1+j)%len(u.cmds)]
			}
			args, _ := json.Marshal(map[string]string{"cmd": cmd})
			r.items = append(r.items, map[string]any{"id": fmt.Sprintf("fc_up_%d_%d", u.n, j), "type": "function_call", "status": "completed",
				"call_id": fmt.Sprintf("call_up_%d_%d", u.n, j), "name": "exec_command", "arguments": string(args)})
		}
	default:
		text := "Looking at dateparse/parse.go now."
		if g.summary {
			text = testSummary
		}
		r.items = append(r.items, map[string]any{"id": fmt.Sprintf("msg_up_%d", u.n), "type": "message", "status": "completed",
			"role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}})
	}
	usage := map[string]any{"input_tokens": g.input, "input_tokens_details": map[string]any{"cached_tokens": g.cached},
		"output_tokens": 9, "output_tokens_details": map[string]any{"reasoning_tokens": 4}, "total_tokens": g.input + 9}
	var prev any
	if req.PreviousResponseID != "" {
		prev = req.PreviousResponseID
	}
	r.completed, _ = json.Marshal(map[string]any{"id": id, "object": "response", "created_at": 1764547200, "status": "completed",
		"model": req.Model, "output": r.items, "usage": usage, "store": req.Store, "previous_response_id": prev,
		"error": nil, "incomplete_details": nil, "parallel_tool_calls": true, "tools": []any{}})
	if u.ledger != nil {
		u.ledger.Record(r.completed, req.Store)
	}
	return r
}

// kindCall is the j-th call of kind in answer n, as OpenAI issues it.
func kindCall(kind string, n, j int) map[string]any {
	id := fmt.Sprintf("up_%d_%d", n, j)
	call := map[string]any{"id": "it_" + id, "type": kind, "status": "completed", "call_id": "call_" + id}
	switch kind {
	case "shell_call":
		call["action"] = map[string]any{"commands": []string{fmt.Sprintf("sed -n %d,%dp dateparse/parse.go", n*10, n*10+8)}}
	case "apply_patch_call":
		call["operation"] = map[string]any{"type": "update_file", "path": "dateparse/parse.go", "diff": fmt.Sprintf("@@ -%d +%d @@\n-x\n+y", n, n)}
	case "computer_call":
		call["action"], call["pending_safety_checks"] = map[string]any{"type": "screenshot"}, []any{}
	case "mcp_approval_request":
		call = map[string]any{"id": "mcpr_" + id, "type": kind, "name": "deploy", "server_label": "ops",
			"arguments": fmt.Sprintf(`{"build":%d}`, n)}
	}
	return call
}

// stream sends r as OpenAI's SSE events; u.end says how it ends.
func (u *responsesUpstream) stream(w http.ResponseWriter, r issued) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	seq := 0
	send := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		b, _ := json.Marshal(fields)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		w.(http.Flusher).Flush()
	}
	var done map[string]any
	_ = json.Unmarshal(r.completed, &done)
	started := map[string]any{}
	for k, v := range done {
		started[k] = v
	}
	started["status"], started["output"], started["usage"] = "in_progress", []any{}, nil
	send("response.created", map[string]any{"response": started})
	send("response.in_progress", map[string]any{"response": started})
	for i, it := range r.items {
		added := it
		if it["type"] == "compaction" {
			// Its content comes with output_item.done.
			added = map[string]any{"id": it["id"], "type": "compaction"}
		}
		send("response.output_item.added", map[string]any{"output_index": i, "item": added})
		if it["type"] == "message" {
			text := it["content"].([]any)[0].(map[string]any)["text"]
			send("response.output_text.delta", map[string]any{"item_id": it["id"], "output_index": i, "content_index": 0, "delta": text})
		}
		send("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	switch {
	case u.end == nil:
		send("response.completed", map[string]any{"response": done})
	case *u.end != "":
		failed := map[string]any{}
		for k, v := range started {
			failed[k] = v
		}
		failed["status"], failed["error"] = "failed", map[string]any{"code": "server_error", "message": "The model failed."}
		send(*u.end, map[string]any{"response": failed})
	}
}

// streamOverflow refuses a streamed request over the window as OpenAI
// does: a 200 event stream of response.created, response.in_progress
// and response.failed with context_length_exceeded, before any output.
func (u *responsesUpstream) streamOverflow(w http.ResponseWriter, req *responsestest.Request) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	resp := map[string]any{"id": "resp_refused", "object": "response", "created_at": 1764547200, "status": "in_progress",
		"model": req.Model, "output": []any{}, "usage": nil, "error": nil}
	for i, typ := range []string{"response.created", "response.in_progress", "response.failed"} {
		if typ == "response.failed" {
			resp["status"], resp["error"] = "failed", map[string]any{"code": "context_length_exceeded",
				"message": "Your input exceeds the context window of this model. Please adjust your input and try again."}
		}
		b, _ := json.Marshal(map[string]any{"type": typ, "sequence_number": i, "response": resp})
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		w.(http.Flusher).Flush()
	}
}

func answerJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// lastItems returns the input items of a request body, raw.
func inputItems(body []byte) []string {
	var out []string
	for _, it := range gjson.GetBytes(body, "input").Array() {
		out = append(out, it.Raw)
	}
	return out
}

// containsItem reports whether a raw item holding sub is among items.
func containsItem(items []string, sub string) bool {
	for _, it := range items {
		if bytes.Contains([]byte(it), []byte(sub)) {
			return true
		}
	}
	return false
}
