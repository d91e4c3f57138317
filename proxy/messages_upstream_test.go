package proxy

import (
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
	"github.com/ctxpress/ctxpress/internal/messagestest"
	"github.com/ctxpress/ctxpress/internal/openaitest"
)

// messagesUpstream is an Anthropic Messages upstream on 127.0.0.1 as strict
// as api.anthropic.com: x-api-key and anthropic-version required, every
// request checked by internal/messagestest against the Ledger of the
// thinking blocks this server signed (nil ledger: the rules alone, for
// requests recorded against another server), and refused with Anthropic's
// status and error body. An accepted turn is answered with a signed
// thinking block when the request thinks, a text, and a Bash tool_use
// while the conversation has had fewer than toolTurns results; whole, or
// as Anthropic's SSE events. Usage is prompt caching's, simulated on the
// request's cache_control markers (input, cache read, cache write). A
// summary call (one user message opening with the summariser's preamble)
// is answered with testSummary. /v1/messages/count_tokens is answered
// with the request's count. A request with a compact_20260112 edit whose
// input (counted from its latest compaction block on, as the model reads
// it) is over the edit's trigger is compacted first, as Anthropic's
// server compaction: the answer opens with a compaction block (issued in
// the ledger) and goes on from it, or stops there with
// pause_after_compaction; usage.iterations holds the compaction's and the
// message's, the top level the message's.
type messagesUpstream struct {
	*httptest.Server
	ledger *messagestest.Ledger

	mu sync.Mutex
	// key is the x-api-key it takes. toolTurns: see above. window > 0
	// refuses a prompt over it (this server's tokens, bytes/4) before any
	// event: as Anthropic does ("prompt is too long"), or with llama set
	// as llama-server does (400 exceed_context_size_error, OpenAI's
	// shape). overloaded answers the next that many requests 529. cut
	// ends streams before message_stop. stall, when set, holds every
	// request until it is closed (or the client leaves).
	key        string
	toolTurns  int
	window     int
	llama      bool
	overloaded int
	cut        bool
	stall      chan struct{}
	// calls, when set, are the tool calls made in turn, each a name and
	// its input (else Bash with a sed -n of a range that moves on).
	calls [][2]string
	// noTemperature are the models that refuse temperature, as newer
	// Claude models do.
	noTemperature map[string]bool
	// serverCompaction, when its input is set, is the usage a request that
	// asks the server to compact (context_management's compact_20260112)
	// is answered with whatever its trigger, as Anthropic's once it
	// compacted: usage.iterations with the compaction's input and output
	// and the message's, the top level the message's, which saw after
	// tokens of context. Its content has no compaction block.
	serverCompaction struct{ input, output, after int }
	got              []messagesTurn // guarded by mu
	n                int
	cached           map[[32]byte]bool // prefixes written at earlier markers
}

// messagesTurn is one request the upstream got, and what it answered.
type messagesTurn struct {
	path    string
	header  http.Header
	body    []byte
	summary bool
	status  int
	refusal string
	// input, cacheRead, cacheWrite are the usage reported: uncached
	// input, the cache's read and write; prompt is their sum.
	input, cacheRead, cacheWrite, output int
	dropped                              []string // thinking blocks dropped under drop_block
	// compacted: the server compacted this request (a compaction block
	// opened its answer); its input and cache are the message's.
	compacted bool
}

func (g messagesTurn) prompt() int { return g.input + g.cacheRead + g.cacheWrite }

const testAnthropicKey = "sk-ant-test-0123456789"

func newMessagesUpstream(t *testing.T) *messagesUpstream {
	u := &messagesUpstream{ledger: messagestest.NewLedger(), toolTurns: 1 << 30, key: testAnthropicKey, cached: map[[32]byte]bool{}}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *messagesUpstream) BaseURL() string { return u.URL + "/v1" }

// turns returns the requests so far: conversation turns (count_tokens
// left out) and summary calls.
func (u *messagesUpstream) turns() (turns, summaries []messagesTurn) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, g := range u.got {
		switch {
		case g.summary:
			summaries = append(summaries, g)
		case g.path == "/v1/messages":
			turns = append(turns, g)
		}
	}
	return turns, summaries
}

func (u *messagesUpstream) refuse(w http.ResponseWriter, g *messagesTurn, e *messagestest.Error) {
	g.status, g.refusal = e.Status, e.Message
	e.Write(w)
}

func (u *messagesUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	stall := u.stall
	u.mu.Unlock()
	if stall != nil {
		select {
		case <-stall:
		case <-r.Context().Done():
			return
		}
	}
	g := messagesTurn{path: r.URL.Path, header: r.Header.Clone(), body: body, summary: isMessagesSummary(body)}
	u.mu.Lock()
	defer u.mu.Unlock()
	defer func() { u.got = append(u.got, g) }()
	count := r.URL.Path == "/v1/messages/count_tokens"
	switch {
	case r.Method != http.MethodPost || (r.URL.Path != "/v1/messages" && !count):
		u.refuse(w, &g, &messagestest.Error{Status: http.StatusNotFound, Type: "not_found_error", Message: "Not Found"})
		return
	case r.Header.Get("X-Api-Key") == "":
		u.refuse(w, &g, &messagestest.Error{Status: http.StatusUnauthorized, Type: "authentication_error", Message: "x-api-key header is required"})
		return
	case r.Header.Get("X-Api-Key") != u.key:
		u.refuse(w, &g, &messagestest.Error{Status: http.StatusUnauthorized, Type: "authentication_error", Message: "invalid x-api-key"})
		return
	case r.Header.Get("Anthropic-Version") == "":
		u.refuse(w, &g, &messagestest.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: "anthropic-version: header is required"})
		return
	case u.noTemperature[gjson.GetBytes(body, "model").Str] && gjson.GetBytes(body, "temperature").Exists():
		u.refuse(w, &g, &messagestest.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: "temperature: `temperature` is deprecated for this model."})
		return
	case u.overloaded > 0:
		u.overloaded--
		u.refuse(w, &g, &messagestest.Error{Status: 529, Type: "overloaded_error", Message: "Overloaded"})
		return
	}
	req, rerr := messagestest.Check(body, messagestest.Options{Ledger: u.ledger, CountTokens: count, Header: r.Header})
	if rerr != nil {
		u.refuse(w, &g, rerr)
		return
	}
	g.dropped = req.Dropped
	total := (req.Prompt.Bytes(len(req.Prompt.Segments)) + 3) / 4
	if count {
		g.status = http.StatusOK
		answerJSON(w, http.StatusOK, []byte(fmt.Sprintf(`{"input_tokens":%d}`, total)))
		return
	}
	if u.window > 0 && total > u.window {
		g.status, g.refusal = http.StatusBadRequest, "overflow"
		if u.llama {
			answerJSON(w, http.StatusBadRequest, []byte(fmt.Sprintf(`{"error":{"code":400,"message":"request (%d tokens) exceeds the available context size (%d tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":%d,"n_ctx":%d}}`, total, u.window, total, u.window)))
			return
		}
		u.refuse(w, &g, &messagestest.Error{Status: http.StatusBadRequest, Type: "invalid_request_error",
			Message: fmt.Sprintf("prompt is too long: %d tokens > %d maximum", total, u.window)})
		g.refusal = "overflow"
		return
	}
	g.cacheRead, g.cacheWrite = u.cache(req)
	g.input = total - g.cacheRead - g.cacheWrite
	g.status = http.StatusOK
	u.n++
	id := fmt.Sprintf("msg_up_%d", u.n)
	edit, compact := compactEdit(body)
	compact = compact && !g.summary && total > edit.trigger
	var blocks []map[string]any
	var compaction map[string]any // the compaction iteration's usage
	if compact {
		blocks, compaction = u.compact(req, id, &g, edit.pause)
		if !edit.pause {
			blocks = append(blocks, u.blocks(req, id, body, false)...)
		}
	} else {
		blocks = u.blocks(req, id, body, g.summary)
	}
	g.output = 7 * len(blocks)
	usage := map[string]any{"input_tokens": g.input, "cache_creation_input_tokens": g.cacheWrite,
		"cache_read_input_tokens": g.cacheRead, "output_tokens": g.output}
	if compaction != nil {
		usage["iterations"] = []map[string]any{compaction, {"type": "message", "input_tokens": g.input, "output_tokens": g.output,
			"cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}}
	}
	if _, asks := compactEdit(body); asks && u.serverCompaction.input > 0 {
		c := u.serverCompaction
		g.input, g.cacheRead, g.cacheWrite = c.after, 0, 0
		usage = map[string]any{"input_tokens": c.after, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": g.output,
			"iterations": []map[string]any{
				{"type": "compaction", "input_tokens": c.input, "output_tokens": c.output, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
				{"type": "message", "input_tokens": c.after, "output_tokens": g.output, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}}}
	}
	stop := "end_turn"
	switch blocks[len(blocks)-1]["type"] {
	case "tool_use":
		stop = "tool_use"
	case "compaction":
		stop = "compaction"
	}
	msg := map[string]any{"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": blocks,
		"stop_reason": stop, "stop_sequence": nil, "usage": usage}
	if !req.Stream {
		b, _ := json.Marshal(msg)
		answerJSON(w, http.StatusOK, b)
		return
	}
	u.stream(w, msg, blocks, usage)
}

// cache is prompt caching's usage of req: the read part is the longest
// prefix (ending at a block) an earlier request wrote at one of its
// markers, up to this request's last marker; the part from there to the
// last marker is written. Then this request's marked prefixes are written.
func (u *messagesUpstream) cache(req *messagestest.Request) (read, write int) {
	p := req.Prompt
	last := p.LastMarker()
	readBytes := 0
	for k := last; k > 0; k-- {
		if u.cached[p.Hash(k)] {
			readBytes = p.Bytes(k)
			break
		}
	}
	for k, marked := range p.Marked {
		if marked {
			u.cached[p.Hash(k+1)] = true
		}
	}
	read = (readBytes + 3) / 4
	if last > 0 {
		write = (p.Bytes(last)+3)/4 - read
	}
	return read, write
}

// ledgerOf is the ledger answers are issued in: u's, or a throwaway one
// (signing still, for a client that sends it back) when u verifies none.
func (u *messagesUpstream) ledgerOf() *messagestest.Ledger {
	if u.ledger == nil {
		return messagestest.NewLedger()
	}
	return u.ledger
}

// compact is the server's compaction of req: the compaction block that
// opens answer id, issued in the ledger, and the compaction iteration's
// usage. req becomes the request as the model reads it after the
// compaction, and g's input the message's: the tools, system and summary.
func (u *messagesUpstream) compact(req *messagestest.Request, id string, g *messagesTurn, pause bool) ([]map[string]any, map[string]any) {
	summary := fmt.Sprintf("Server summary of %d messages: the agent read dateparse/parse.go looking for the leap-year bug.", req.Messages)
	encrypted, after := u.ledgerOf().Compact(req, id, summary)
	usage := map[string]any{"type": "compaction", "input_tokens": g.prompt(), "output_tokens": (len(summary) + 3) / 4,
		"cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
	*req = *after
	g.compacted = true
	g.input, g.cacheRead, g.cacheWrite = (req.Prompt.Bytes(len(req.Prompt.Segments))+len(summary)+3)/4, 0, 0
	return []map[string]any{{"type": "compaction", "content": summary, "encrypted_content": encrypted}}, usage
}

// blocks is the answer's content, its thinking signed into the ledger.
func (u *messagesUpstream) blocks(req *messagestest.Request, id string, body []byte, summary bool) []map[string]any {
	l := u.ledgerOf()
	var out []map[string]any
	if !summary && (req.Thinking == "enabled" || req.Thinking == "adaptive") {
		text := "Thinking about the next step."
		if req.ThinkingDisplay == "omitted" {
			text = ""
		}
		sig := l.Think(req, id, text)
		out = append(out, map[string]any{"type": "thinking", "thinking": text, "signature": sig})
	}
	results := strings.Count(string(body), `"type":"tool_result"`)
	if summary || len(req.Tools) == 0 || results >= u.toolTurns {
		text := "Looking at dateparse/parse.go now."
		if summary {
			text = testSummary
		}
		return append(out, map[string]any{"type": "text", "text": text})
	}
	call := fmt.Sprintf("toolu_up%03d", u.n)
	l.ToolUse(id, call)
	name, input := "Bash", json.RawMessage(fmt.Sprintf(`{"command":"sed -n %d,%dp dateparse/parse.go"}`, u.n*10, u.n*10+8))
	if len(u.calls) > 0 {
		c := u.calls[results%len(u.calls)]
		name, input = c[0], json.RawMessage(c[1])
	}
	return append(out, map[string]any{"type": "text", "text": "Running the next step."},
		map[string]any{"type": "tool_use", "id": call, "name": name, "input": input})
}

// stream sends msg as Anthropic's events: message_start with the input
// usage, a ping, each block's start, deltas and stop, message_delta with
// the cumulative usage, message_stop (left out when cut).
func (u *messagesUpstream) stream(w http.ResponseWriter, msg map[string]any, blocks []map[string]any, usage map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	event := func(name string, data map[string]any) {
		data["type"] = name
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		w.(http.Flusher).Flush()
	}
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	startUsage := map[string]any{}
	for k, v := range usage {
		startUsage[k] = v
	}
	startUsage["output_tokens"] = 1
	delete(startUsage, "iterations") // message_delta's, as Anthropic sends them
	start["content"], start["stop_reason"], start["usage"] = []any{}, nil, startUsage
	event("message_start", map[string]any{"message": start})
	event("ping", map[string]any{})
	for i, b := range blocks {
		switch b["type"] {
		case "thinking":
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			if b["thinking"] != "" {
				event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": b["thinking"]}})
			}
			event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "signature_delta", "signature": b["signature"]}})
		case "compaction":
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "compaction", "content": nil, "encrypted_content": nil}})
			event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "compaction_delta", "content": b["content"], "encrypted_content": b["encrypted_content"]}})
		case "tool_use":
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			in, _ := json.Marshal(b["input"])
			event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		default:
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		}
		event("content_block_stop", map[string]any{"index": i})
	}
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": msg["stop_reason"], "stop_sequence": nil}, "usage": usage})
	if !u.cut {
		event("message_stop", map[string]any{})
	}
}

// serverCompactEdit is a request's compact_20260112 edit: its trigger (in
// input tokens; the API's default when absent) and pause_after_compaction.
type serverCompactEdit struct {
	trigger int
	pause   bool
}

// compactEdit returns body's compact edit, and whether it has one. (The
// API takes no trigger under 50,000; this server takes any, for short
// tests.)
func compactEdit(body []byte) (serverCompactEdit, bool) {
	for _, e := range gjson.GetBytes(body, "context_management.edits").Array() {
		if e.Get("type").Str == "compact_20260112" {
			edit := serverCompactEdit{trigger: 150000, pause: e.Get("pause_after_compaction").Bool()}
			if v := e.Get("trigger.value"); v.Exists() {
				edit.trigger = int(v.Int())
			}
			return edit, true
		}
	}
	return serverCompactEdit{}, false
}

// isMessagesSummary reports whether body is ctxpress's summary call in
// Messages form: its last user text is a summary prompt (one message that
// opens with the preamble, or the instruction after the conversation).
func isMessagesSummary(body []byte) bool {
	m := gjson.GetBytes(body, "messages").Array()
	return len(m) > 0 && m[len(m)-1].Get("role").Str == "user" &&
		compactor.IsSummaryPrompt(openaitest.LastText(m[len(m)-1].Get("content")))
}
