package proxy

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/internal/chatcheck"
	"github.com/ctxpress/ctxpress/internal/messagestest"
	"github.com/ctxpress/ctxpress/internal/responsestest"
)

// expandModel is a strict fake model, on a real HTTP server, that follows
// a marker's instruction as a model does: a tool result of the client's
// whose text gives `ctxpress_expand {…}`, in a request that offers that
// tool, is answered with a call of it (and, in the same answer, a call of
// the client's bash, which ctxpress must leave out of the turn it appends);
// a request whose last tool result is ctxpress_expand's is answered with
// a final text. It refuses what the provider refuses (chatcheck,
// responsestest, messagestest, and a Messages history that does not
// alternate), with the provider's status and shape, and streams when
// asked.
type expandModel struct {
	*httptest.Server
	t      *testing.T
	format string // "chat", "responses" or "messages"
	// loop: it calls ctxpress_expand again whatever it read, as a model
	// that never has enough.
	loop bool
	// gzip: a whole answer is sent gzipped to a request that accepts it;
	// gzipped counts them.
	gzip    bool
	gzipped int

	mu sync.Mutex
	// bodies are the requests it accepted; defs the ctxpress_expand
	// definitions they offered (raw, "" for none), results the texts of
	// ctxpress_expand results it read; usages the usage of each answer.
	bodies  [][]byte
	defs    []string
	results []string
	usages  [][2]int // input, output
}

func newExpandModel(t *testing.T, format string) *expandModel {
	m := &expandModel{t: t, format: format}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

func (m *expandModel) BaseURL() string { return m.URL + "/v1" }

// expandCall is one call the fake makes.
type expandCall struct{ id, name, args string }

// modelTail is what the fake reads of a request: the last tool result's tool
// and text, and whether ctxpress_expand is offered (its definition).
type modelTail struct {
	tool, text, def string
}

func (m *expandModel) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	tl, status, refusal := m.read(body, r.Header)
	if refusal != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(refusal)
		return
	}
	m.mu.Lock()
	n := len(m.bodies) + 1
	m.bodies, m.defs = append(m.bodies, body), append(m.defs, tl.def)
	usage := [2]int{len(body) / 4, 5 + n}
	m.usages = append(m.usages, usage)
	if tl.tool == expand.ToolName {
		m.results = append(m.results, tl.text)
	}
	m.mu.Unlock()
	var text string
	var calls []expandCall
	switch at := strings.Index(tl.text, expand.ToolName+" {"); {
	case tl.tool == expand.ToolName && m.loop:
		text = "Once more."
		calls = []expandCall{{fmt.Sprintf("call_%d_b", n), expand.ToolName, `{"ref":"abcdefabcdef"}`}}
	case tl.tool == expand.ToolName:
		first, _, _ := strings.Cut(tl.text, "\n")
		text = "The missing lines begin: " + first
	case at >= 0 && tl.def != "":
		args := tl.text[at+len(expand.ToolName)+1:]
		args = args[:strings.IndexByte(args, '}')+1]
		text = "The marker says the original is intact; reading it."
		calls = []expandCall{{fmt.Sprintf("call_%d_a", n), "bash", `{"command":"ls"}`}, {fmt.Sprintf("call_%d_b", n), expand.ToolName, args}}
	default:
		text = "Done."
	}
	stream := gjson.GetBytes(body, "stream").Bool()
	if m.gzip && !stream && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		m.mu.Lock()
		m.gzipped++
		m.mu.Unlock()
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		defer zw.Close()
		w = gzipWriter{w, zw}
	}
	switch m.format {
	case "chat":
		writeChatAnswer(w, n, text, calls, usage, stream, gjson.GetBytes(body, "stream_options.include_usage").Bool())
	case "responses":
		writeResponsesAnswer(w, n, text, calls, usage, stream)
	default:
		writeMessagesAnswer(w, n, text, calls, usage, stream)
	}
}

// read checks a request as the provider does and reads its tail; a
// refusal is the status and body to answer with.
func (m *expandModel) read(body []byte, h http.Header) (modelTail, int, []byte) {
	var tl modelTail
	switch m.format {
	case "chat":
		if err := chatcheck.ValidateChat(body); err != nil {
			return tl, 400, []byte(fmt.Sprintf(`{"error":{"message":%q,"type":"invalid_request_error"}}`, err.Error()))
		}
		msgs := gjson.GetBytes(body, "messages").Array()
		if last := msgs[len(msgs)-1]; last.Get("role").String() == "tool" {
			tl.text, tl.tool = last.Get("content").String(), callName(body, "messages.#.tool_calls|@flatten", "id", "function.name", last.Get("tool_call_id").String())
		}
		tl.def = toolDef(body, "function.name")
	case "responses":
		if _, err := responsestest.Check(body, responsestest.Options{}); err != nil {
			return tl, err.Status, err.Body()
		}
		items := gjson.GetBytes(body, "input").Array()
		if last := items[len(items)-1]; last.Get("type").String() == "function_call_output" {
			tl.text, tl.tool = last.Get("output").String(), callName(body, `input.#(type=="function_call")#`, "call_id", "name", last.Get("call_id").String())
		}
		tl.def = toolDef(body, "name")
	default:
		if _, err := messagestest.Check(body, messagestest.Options{Header: h}); err != nil {
			return tl, err.Status, err.Body()
		}
		msgs := gjson.GetBytes(body, "messages").Array()
		for i := 1; i < len(msgs); i++ {
			if msgs[i].Get("role").String() == msgs[i-1].Get("role").String() {
				return tl, 400, (&messagestest.Error{Status: 400, Type: "invalid_request_error",
					Message: fmt.Sprintf("messages.%d: roles must alternate between \"user\" and \"assistant\"", i)}).Body()
			}
		}
		blocks := msgs[len(msgs)-1].Get("content").Array()
		if len(blocks) > 0 && blocks[len(blocks)-1].Get("type").String() == "tool_result" {
			last := blocks[len(blocks)-1]
			tl.text, tl.tool = last.Get("content").String(), callName(body, "messages.#.content|@flatten", "id", "name", last.Get("tool_use_id").String())
		}
		tl.def = toolDef(body, "name")
	}
	return tl, 0, nil
}

// callName is the name of the call with id among the calls at path.
func callName(body []byte, path, idKey, nameKey, id string) string {
	name := ""
	gjson.GetBytes(body, path).ForEach(func(_, c gjson.Result) bool {
		if c.Get(idKey).String() == id {
			name = c.Get(nameKey).String()
		}
		return name == ""
	})
	return name
}

// toolDef is the raw ctxpress_expand definition in body's tools, ""
// when there is none; it must be the last tool.
func toolDef(body []byte, nameKey string) string {
	tools := gjson.GetBytes(body, "tools").Array()
	for i, tool := range tools {
		if tool.Get(nameKey).String() == expand.ToolName {
			if i != len(tools)-1 {
				return "not last: " + tool.Raw
			}
			return tool.Raw
		}
	}
	return ""
}

// gzipWriter is a ResponseWriter whose body goes through a gzip writer.
type gzipWriter struct {
	http.ResponseWriter
	zw *gzip.Writer
}

func (g gzipWriter) Write(p []byte) (int, error) { return g.zw.Write(p) }

func writeSSE(w http.ResponseWriter, events []string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, ev := range events {
		_, _ = io.WriteString(w, ev+"\n\n")
		w.(http.Flusher).Flush()
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func writeChatAnswer(w http.ResponseWriter, n int, text string, calls []expandCall, u [2]int, stream, includeUsage bool) {
	usage := map[string]int{"prompt_tokens": u[0], "completion_tokens": u[1], "total_tokens": u[0] + u[1]}
	finish := "stop"
	var tcs []any
	for _, c := range calls {
		finish = "tool_calls"
		tcs = append(tcs, map[string]any{"id": c.id, "type": "function", "function": map[string]string{"name": c.name, "arguments": c.args}})
	}
	id := fmt.Sprintf("chatcmpl-%d", n)
	if !stream {
		msg := map[string]any{"role": "assistant", "content": text}
		if tcs != nil {
			msg["tool_calls"] = tcs
		}
		writeJSON(w, map[string]any{"id": id, "object": "chat.completion", "created": 1, "model": "gpt-4o",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	chunk := func(delta map[string]any, finish any) string {
		return "data: " + mustJSON(map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
	}
	events := []string{chunk(map[string]any{"role": "assistant", "content": text[:len(text)/2]}, nil), chunk(map[string]any{"content": text[len(text)/2:]}, nil)}
	for i, c := range calls {
		half := len(c.args) / 2
		events = append(events,
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.id, "type": "function", "function": map[string]string{"name": c.name, "arguments": c.args[:half]}}}}, nil),
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]string{"arguments": c.args[half:]}}}}, nil))
	}
	events = append(events, chunk(map[string]any{}, finish))
	if includeUsage {
		events = append(events, "data: "+mustJSON(map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o", "choices": []any{}, "usage": usage}))
	}
	writeSSE(w, append(events, "data: [DONE]"))
}

func writeResponsesAnswer(w http.ResponseWriter, n int, text string, calls []expandCall, u [2]int, stream bool) {
	output := []any{map[string]any{"type": "message", "id": fmt.Sprintf("msg_%d", n), "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}}
	for _, c := range calls {
		output = append(output, map[string]any{"type": "function_call", "id": "fc_" + c.id, "call_id": c.id, "name": c.name, "arguments": c.args, "status": "completed"})
	}
	resp := map[string]any{"id": fmt.Sprintf("resp_%d", n), "object": "response", "created_at": 1, "status": "completed", "model": "gpt-5",
		"output": output, "usage": map[string]any{"input_tokens": u[0], "input_tokens_details": map[string]int{"cached_tokens": 0},
			"output_tokens": u[1], "output_tokens_details": map[string]int{"reasoning_tokens": 0}, "total_tokens": u[0] + u[1]}}
	if !stream {
		writeJSON(w, resp)
		return
	}
	seq := 0
	event := func(v map[string]any) string {
		v["sequence_number"] = seq
		seq++
		return "event: " + v["type"].(string) + "\ndata: " + mustJSON(v)
	}
	events := []string{event(map[string]any{"type": "response.created", "response": map[string]any{"id": resp["id"], "object": "response", "status": "in_progress", "output": []any{}}})}
	for i, it := range output {
		events = append(events, event(map[string]any{"type": "response.output_item.added", "output_index": i, "item": it}),
			event(map[string]any{"type": "response.output_item.done", "output_index": i, "item": it}))
	}
	writeSSE(w, append(events, event(map[string]any{"type": "response.completed", "response": resp})))
}

func writeMessagesAnswer(w http.ResponseWriter, n int, text string, calls []expandCall, u [2]int, stream bool) {
	content := []any{map[string]any{"type": "text", "text": text}}
	stop := "end_turn"
	for _, c := range calls {
		stop = "tool_use"
		content = append(content, map[string]any{"type": "tool_use", "id": "toolu_" + c.id, "name": c.name, "input": json.RawMessage(c.args)})
	}
	usage := map[string]int{"input_tokens": u[0], "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "output_tokens": u[1]}
	msg := map[string]any{"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
		"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage}
	if !stream {
		writeJSON(w, msg)
		return
	}
	event := func(v map[string]any) string { return "event: " + v["type"].(string) + "\ndata: " + mustJSON(v) }
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	start["usage"] = map[string]int{"input_tokens": u[0], "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "output_tokens": 1}
	events := []string{event(map[string]any{"type": "message_start", "message": start}),
		event(map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}),
		event(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": text}}),
		event(map[string]any{"type": "content_block_stop", "index": 0})}
	for i, c := range calls {
		half := len(c.args) / 2
		events = append(events,
			event(map[string]any{"type": "content_block_start", "index": i + 1, "content_block": map[string]any{"type": "tool_use", "id": "toolu_" + c.id, "name": c.name, "input": map[string]any{}}}),
			event(map[string]any{"type": "content_block_delta", "index": i + 1, "delta": map[string]any{"type": "input_json_delta", "partial_json": c.args[:half]}}),
			event(map[string]any{"type": "content_block_delta", "index": i + 1, "delta": map[string]any{"type": "input_json_delta", "partial_json": c.args[half:]}}),
			event(map[string]any{"type": "content_block_stop", "index": i + 1}))
	}
	writeSSE(w, append(events,
		event(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": u[1]}}),
		event(map[string]any{"type": "message_stop"})))
}

// snapshot returns what the fake saw so far.
func (m *expandModel) snapshot() (bodies [][]byte, defs, results []string, usages [][2]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]byte(nil), m.bodies...), append([]string(nil), m.defs...), append([]string(nil), m.results...), append([][2]int(nil), m.usages...)
}
