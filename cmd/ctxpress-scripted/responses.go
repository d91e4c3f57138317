package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ctxpress/ctxpress/internal/responsestest"
	"github.com/tidwall/gjson"
)

// The OpenAI Responses format (POST {base}/responses): a request is checked
// by responsestest as strictly as api.openai.com checks it, against the
// ledger of what this server issued (reasoning items with opaque encrypted
// content it later verifies, stored responses), and answered with a
// reasoning item and then the script's tool call or text, whole or as
// OpenAI's SSE events.

// contextExceeded is OpenAI's message for input over the model's window
// (james-6-23/codex2api#415, dyad-sh/dyad#1672).
const contextExceeded = "Your input exceeds the context window of this model. Please adjust your input and try again."

// responsesPrompt is a Responses request read into the format-neutral
// prompt, with what the answer needs besides.
type responsesPrompt struct {
	prompt
	Store bool
	Req   *responsestest.Request
}

// parseResponses validates a Responses request and reads it as a prompt:
// Rendered is the tools' and instructions' raw bytes, then each input
// item's, each on its own line.
func parseResponses(body []byte, l *responsestest.Ledger) (responsesPrompt, *responsestest.Error) {
	req, err := responsestest.Check(body, responsestest.Options{Ledger: l})
	if err != nil {
		return responsesPrompt{}, err
	}
	p := responsesPrompt{Store: req.Store, Req: req}
	p.Model, p.Stream = req.Model, req.Stream
	p.Rendered = append(append(p.Rendered, gjson.GetBytes(body, "tools").Raw...), '\n')
	if in := gjson.GetBytes(body, "instructions"); in.Exists() {
		p.Rendered = append(append(p.Rendered, in.Raw...), '\n')
	}
	p.Parts = append(p.Parts, len(p.Rendered))
	for _, it := range req.Items {
		p.Rendered = append(append(p.Rendered, it.Raw...), '\n')
		p.Parts = append(p.Parts, len(it.Raw)+1)
		if it.Type == "message" && it.Role == "user" {
			p.LastUser = askText(it.Text())
		}
	}
	p.Tools = responsesTools(req.Tools)
	p.Kind = kindOf(p.LastUser, len(p.Tools))
	return p, nil
}

// responsesTools are the function tools offered, a namespace's included
// (codex's multi_agent_v1); custom and hosted tools take no JSON
// arguments the script could fill.
func responsesTools(tools []responsestest.Tool) []tool {
	var out []tool
	for _, t := range tools {
		switch t.Type {
		case "function":
			var schema map[string]any
			_ = json.Unmarshal([]byte(gjson.Get(t.Raw, "parameters").Raw), &schema)
			out = append(out, tool{Name: t.Name, Schema: schema})
		case "namespace":
			var inner []responsestest.Tool
			for _, n := range gjson.Get(t.Raw, "tools").Array() {
				inner = append(inner, responsestest.Tool{Type: n.Get("type").String(), Name: n.Get("name").String(), Raw: n.Raw})
			}
			out = append(out, responsesTools(inner)...)
		}
	}
	return out
}

// responses answers one Responses request. As for chat, the request is
// recorded before the answer is written.
func (s *server) responses(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	reply := s.responsesTurn(r, body, err)
	reply(w)
}

func (s *server) responsesTurn(r *http.Request, body []byte, readErr error) func(http.ResponseWriter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	e := entry{N: s.n, At: time.Now(), Path: r.URL.Path, Session: s.session(r), UserAgent: r.UserAgent()}
	if e.Session == "" {
		e.Session = gjson.GetBytes(body, "prompt_cache_key").String()
	}
	defer func() { s.write(e, body) }()
	refusal := func(rerr *responsestest.Error) func(http.ResponseWriter) {
		e.Status, e.Error = rerr.Status, rerr.Message
		return func(w http.ResponseWriter) { writeResponsesError(w, rerr) }
	}
	if readErr != nil {
		return refusal(&responsestest.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: readErr.Error()})
	}
	p, rerr := parseResponses(body, s.ledger)
	e.Kind, e.Model, e.Stream = p.Kind, p.Model, p.Stream
	e.Messages = max(len(p.Parts)-1, 0)
	st := s.kindStats(p.Kind)
	st.Requests++
	if rerr != nil {
		st.Refused++
		return refusal(rerr)
	}
	e.PromptTokens = (len(p.Rendered) + 3) / 4
	if s.cfg.context > 0 && e.PromptTokens > s.cfg.context {
		st.Refused++
		e.Status, e.Error = http.StatusBadRequest, contextExceeded
		if p.Stream {
			e.Status = http.StatusOK // the refusal is an event in the stream
		}
		id := fmt.Sprintf("resp_scripted_%d", s.n)
		return func(w http.ResponseWriter) { writeContextExceeded(w, p, id) }
	}
	u := s.observe(e.Session+"/"+p.Kind, p.prompt, &e)
	st.count(u, e)
	a := answer{Compaction: true}
	if !p.Req.Trigger() {
		// The client's own compaction (codex's remote compaction) gets one
		// compaction item, which only this server can read back; the
		// script does not move on.
		a = s.answer(e.Session, p.prompt)
	}
	u.Completion = len(a.Text)/4 + 1 + reasoningTokens
	e.Answer = "text " + firstLine(a.Text)
	if a.Compaction {
		e.Answer = "compaction"
	}
	if len(a.Calls) > 0 {
		e.Answer = "call"
		for _, c := range a.Calls {
			e.Answer += " " + c.Name + " " + c.Arguments
			u.Completion += len(c.Arguments) / 4
		}
	}
	e.Status = http.StatusOK
	resp := s.responseObject(p, a, u)
	s.ledger.Record(resp.completed, p.Store)
	return func(w http.ResponseWriter) { s.writeResponse(w, p, resp) }
}

// reasoningTokens is what each answer's reasoning item counts as output.
const reasoningTokens = 8

// response is one answer: its output items and the whole response object
// as response.completed and the JSON answer carry it.
type response struct {
	id        string
	created   int64
	items     []map[string]any
	completed []byte
	base      map[string]any // the response object without output and usage
}

// responseObject builds the answer: a reasoning item whose encrypted
// content only this server can have made, then the calls or the text.
func (s *server) responseObject(p responsesPrompt, a answer, u usage) response {
	r := response{id: fmt.Sprintf("resp_scripted_%d", s.n), created: time.Now().Unix()}
	sum := sha256.Sum256([]byte(fmt.Sprintf("scripted reasoning %d %s", s.n, r.id)))
	if a.Compaction {
		r.items = append(r.items, map[string]any{"id": fmt.Sprintf("cmp_scripted_%d", s.n), "type": "compaction",
			"encrypted_content": "gAAAAC" + base64.StdEncoding.EncodeToString(append(sum[:], sum[:]...))})
	} else {
		r.items = append(r.items, map[string]any{"id": fmt.Sprintf("rs_scripted_%d", s.n), "type": "reasoning",
			"summary": []any{}, "encrypted_content": "gAAAAB" + base64.StdEncoding.EncodeToString(append(sum[:], sum[:]...))})
	}
	for j, c := range a.Calls {
		r.items = append(r.items, map[string]any{"id": fmt.Sprintf("fc_scripted_%d_%d", s.n, j), "type": "function_call",
			"status": "completed", "arguments": c.Arguments, "call_id": c.ID, "name": c.Name})
	}
	if len(a.Calls) == 0 && !a.Compaction {
		r.items = append(r.items, map[string]any{"id": fmt.Sprintf("msg_scripted_%d", s.n), "type": "message",
			"status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": a.Text}}})
	}
	var prev any
	if p.Req.PreviousResponseID != "" {
		prev = p.Req.PreviousResponseID
	}
	r.base = map[string]any{"id": r.id, "object": "response", "created_at": r.created, "status": "in_progress",
		"background": false, "error": nil, "incomplete_details": nil, "instructions": nil, "max_output_tokens": nil,
		"model": p.Model, "output": []any{}, "parallel_tool_calls": true, "previous_response_id": prev,
		"reasoning": map[string]any{"effort": "medium", "summary": nil}, "store": p.Store, "temperature": 1.0,
		"text": map[string]any{"format": map[string]any{"type": "text"}}, "tool_choice": "auto", "tools": []any{},
		"top_p": 1.0, "truncation": "disabled", "usage": nil, "user": nil, "metadata": map[string]any{}}
	done := clone(r.base)
	done["status"], done["output"], done["usage"] = "completed", r.items, responsesUsage(u)
	r.completed, _ = json.Marshal(done)
	return r
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func responsesUsage(u usage) map[string]any {
	return map[string]any{"input_tokens": u.Prompt, "input_tokens_details": map[string]any{"cached_tokens": u.Cached},
		"output_tokens": u.Completion, "output_tokens_details": map[string]any{"reasoning_tokens": reasoningTokens},
		"total_tokens": u.Prompt + u.Completion}
}

// writeResponse answers whole or streamed.
func (s *server) writeResponse(w http.ResponseWriter, p responsesPrompt, r response) {
	if !p.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(r.completed)
		return
	}
	ev := newEventWriter(w)
	streamResponse(ev, r, !s.cfg.cutStream)
}

// writeResponsesError answers as the API does when it refuses a request.
func writeResponsesError(w http.ResponseWriter, e *responsestest.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_, _ = w.Write(e.Body())
}

// writeContextExceeded refuses input over the window: a 400 to a JSON
// request; to a streamed one, as OpenAI does, response.created and
// response.in_progress, then response.failed carrying the error
// (james-6-23/codex2api#310), which codex reads as "ran out of room"
// (unslothai/unsloth#10938).
func writeContextExceeded(w http.ResponseWriter, p responsesPrompt, id string) {
	e := &responsestest.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "input",
		Code: "context_length_exceeded", Message: contextExceeded}
	if !p.Stream {
		writeResponsesError(w, e)
		return
	}
	ev := newEventWriter(w)
	base := map[string]any{"id": id, "object": "response", "created_at": time.Now().Unix(), "status": "in_progress",
		"error": nil, "model": p.Model, "output": []any{}, "usage": nil, "store": p.Store}
	ev.send("response.created", map[string]any{"response": base})
	ev.send("response.in_progress", map[string]any{"response": base})
	failed := clone(base)
	failed["status"], failed["error"] = "failed", map[string]any{"code": e.Code, "message": e.Message}
	ev.send("response.failed", map[string]any{"response": failed})
}
