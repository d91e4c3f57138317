package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// The OpenAI chat completions format: reading and validating a request as
// strictly as api.openai.com does, and writing an answer whole or streamed.

// chatError is a request the real API refuses: status 400 and its message.
type chatError struct {
	Param, Code, Message string
}

func (e *chatError) Error() string { return e.Message }

func refuse(param, format string, args ...any) *chatError {
	return &chatError{Param: param, Code: "invalid_value", Message: fmt.Sprintf(format, args...)}
}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Keys a message may carry; others are accepted with a warning (OpenAI
// ignores some, compatible servers differ).
var messageKeys = map[string]bool{"role": true, "content": true, "name": true, "tool_calls": true,
	"tool_call_id": true, "refusal": true, "audio": true, "function_call": true}

// Content part types each role accepts.
var partTypes = map[string]map[string]bool{
	"system":    {"text": true},
	"developer": {"text": true},
	"tool":      {"text": true},
	"user":      {"text": true, "image_url": true, "input_audio": true, "file": true},
	"assistant": {"text": true, "refusal": true},
}

// parseChat reads and validates a chat completions request.
func parseChat(body []byte) (prompt, *chatError) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return prompt{}, &chatError{Code: "invalid_json", Message: "We could not parse the JSON body of your request. (" + err.Error() + ")"}
	}
	var p prompt
	if json.Unmarshal(top["model"], &p.Model) != nil || p.Model == "" {
		return p, refuse("model", "you must provide a model parameter")
	}
	if err := readStream(top, &p); err != nil {
		return p, err
	}
	var msgs []json.RawMessage
	if json.Unmarshal(top["messages"], &msgs) != nil || len(msgs) == 0 {
		return p, refuse("messages", "Invalid 'messages': expected a non-empty array of messages.")
	}
	if err := readTools(top["tools"], &p); err != nil {
		return p, err
	}
	p.Rendered = append(append(p.Rendered, top["tools"]...), '\n')
	p.Parts = append(p.Parts, len(p.Rendered))
	v := chatValidator{pending: map[string]bool{}, seen: map[string]bool{}}
	for i, raw := range msgs {
		if err := v.message(i, raw, &p); err != nil {
			return p, err
		}
		p.Rendered = append(append(p.Rendered, raw...), '\n')
		p.Parts = append(p.Parts, len(raw)+1)
	}
	if err := v.unanswered(); err != nil {
		return p, err
	}
	p.LastUser = askText(v.lastUser)
	p.Kind = kindOf(p.LastUser, len(p.Tools))
	return p, nil
}

func readStream(top map[string]json.RawMessage, p *prompt) *chatError {
	if raw, ok := top["stream"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &p.Stream) != nil {
			return refuse("stream", "Invalid type for 'stream': expected a boolean, but got %s instead.", raw)
		}
	}
	raw, ok := top["stream_options"]
	if !ok || string(raw) == "null" {
		return nil
	}
	if !p.Stream {
		return refuse("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
	}
	var so map[string]json.RawMessage
	if json.Unmarshal(raw, &so) != nil {
		return refuse("stream_options", "Invalid type for 'stream_options': expected an object.")
	}
	if iu, ok := so["include_usage"]; ok && json.Unmarshal(iu, &p.IncludeUsage) != nil {
		return refuse("stream_options.include_usage", "Invalid type for 'stream_options.include_usage': expected a boolean.")
	}
	return nil
}

func readTools(raw json.RawMessage, p *prompt) *chatError {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var tools []struct {
		Type     string `json:"type"`
		Function *struct {
			Name       string         `json:"name"`
			Parameters map[string]any `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &tools); err != nil {
		return refuse("tools", "Invalid 'tools': %v", err)
	}
	for i, t := range tools {
		if t.Type != "function" || t.Function == nil {
			return refuse(fmt.Sprintf("tools[%d]", i), "Invalid 'tools[%d]': expected type 'function' with a 'function' object.", i)
		}
		if !toolName.MatchString(t.Function.Name) {
			return refuse(fmt.Sprintf("tools[%d].function.name", i), "Invalid 'tools[%d].function.name': string does not match pattern '^[a-zA-Z0-9_-]+$'.", i)
		}
		p.Tools = append(p.Tools, tool{Name: t.Function.Name, Schema: t.Function.Parameters})
	}
	return nil
}

// chatValidator checks messages in order: roles, content shapes, and that
// every tool message answers a call of the assistant message before it and
// every call is answered before the next other message.
type chatValidator struct {
	pending  map[string]bool // call ids of the last assistant message not yet answered
	seen     map[string]bool // every call id so far
	prevRole string
	lastUser string
}

func (v *chatValidator) message(i int, raw json.RawMessage, p *prompt) *chatError {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return refuse(fmt.Sprintf("messages[%d]", i), "Invalid 'messages[%d]': expected an object.", i)
	}
	var role string
	_ = json.Unmarshal(m["role"], &role)
	if partTypes[role] == nil {
		return refuse(fmt.Sprintf("messages[%d].role", i), "Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'tool', and 'developer'.", role)
	}
	for k := range m {
		if !messageKeys[k] {
			p.Warnings = append(p.Warnings, fmt.Sprintf("messages[%d]: unknown key %q", i, k))
		}
	}
	v.template(i, role, p)
	if role != "tool" {
		if err := v.unanswered(); err != nil {
			return err
		}
	}
	text, err := contentOf(i, role, m)
	if err != nil {
		return err
	}
	switch role {
	case "tool":
		var id string
		_ = json.Unmarshal(m["tool_call_id"], &id)
		if !v.pending[id] {
			return refuse(fmt.Sprintf("messages[%d].role", i), "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
		}
		delete(v.pending, id)
	case "assistant":
		return v.calls(i, m, p)
	case "user":
		v.lastUser = text
	}
	return nil
}

// template notes what strict chat templates refuse: a system message after
// the start, two user messages in a row, an assistant turn first.
func (v *chatValidator) template(i int, role string, p *prompt) {
	system := role == "system" || role == "developer"
	prevSystem := v.prevRole == "" || v.prevRole == "system" || v.prevRole == "developer"
	switch {
	case system && !prevSystem:
		p.Warnings = append(p.Warnings, fmt.Sprintf("messages[%d]: %s message after the start", i, role))
	case role == "user" && v.prevRole == "user":
		p.Warnings = append(p.Warnings, fmt.Sprintf("messages[%d]: two user messages in a row", i))
	case role == "assistant" && prevSystem:
		p.Warnings = append(p.Warnings, fmt.Sprintf("messages[%d]: assistant message before any user message", i))
	}
	v.prevRole = role
}

func (v *chatValidator) calls(i int, m map[string]json.RawMessage, p *prompt) *chatError {
	raw, ok := m["tool_calls"]
	if !ok || string(raw) == "null" {
		if c, ok := m["content"]; !ok || string(c) == "null" {
			return refuse(fmt.Sprintf("messages[%d].content", i), "Invalid value for 'content': expected a string, got null.")
		}
		return nil
	}
	var calls []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function *struct {
			Name      *string `json:"name"`
			Arguments *string `json:"arguments"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &calls) != nil || len(calls) == 0 {
		return refuse(fmt.Sprintf("messages[%d].tool_calls", i), "Invalid 'messages[%d].tool_calls': expected a non-empty array of tool calls.", i)
	}
	for j, c := range calls {
		param := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
		if c.ID == "" || c.Type != "function" || c.Function == nil || c.Function.Name == nil || c.Function.Arguments == nil {
			return refuse(param, "Invalid '%s': expected id, type 'function', function.name and function.arguments.", param)
		}
		if !json.Valid([]byte(*c.Function.Arguments)) {
			p.Warnings = append(p.Warnings, param+": arguments are not valid JSON")
		}
		if v.seen[c.ID] {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s: call id %q used twice", param, c.ID))
		}
		v.seen[c.ID] = true
		v.pending[c.ID] = true
	}
	return nil
}

// unanswered refuses calls still waiting for their result.
func (v *chatValidator) unanswered() *chatError {
	if len(v.pending) == 0 {
		return nil
	}
	return refuse("messages", "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s",
		strings.Join(sortedKeys(v.pending), ", "))
}

// contentOf checks a message's content against its role and returns its
// text.
func contentOf(i int, role string, m map[string]json.RawMessage) (string, *chatError) {
	raw, ok := m["content"]
	param := fmt.Sprintf("messages[%d].content", i)
	if !ok || string(raw) == "null" {
		if role == "assistant" {
			return "", nil
		}
		return "", refuse(param, "Invalid value for '%s': expected a string or an array of content parts, got null.", param)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []map[string]json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return "", refuse(param, "Invalid type for '%s': expected one of a string or array of objects.", param)
	}
	if len(parts) == 0 {
		return "", refuse(param, "Invalid '%s': empty array. Expected an array with minimum length 1, but got an empty array instead.", param)
	}
	var b strings.Builder
	for j, part := range parts {
		var typ, text string
		_ = json.Unmarshal(part["type"], &typ)
		if !partTypes[role][typ] {
			return "", refuse(fmt.Sprintf("%s[%d].type", param, j), "Invalid value: '%s'. Supported values for role '%s' differ.", typ, role)
		}
		if typ == "text" {
			if json.Unmarshal(part["text"], &text) != nil {
				return "", refuse(fmt.Sprintf("%s[%d].text", param, j), "Missing required parameter: '%s[%d].text'.", param, j)
			}
			b.WriteString(text)
		}
	}
	return b.String(), nil
}

// writeChatError answers as the API does when it refuses a request.
func writeChatError(w http.ResponseWriter, status int, e *chatError) {
	typ := "invalid_request_error"
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": e.Message, "type": typ, "param": e.Param, "code": e.Code}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func chatUsage(u usage) map[string]any {
	return map[string]any{"prompt_tokens": u.Prompt, "completion_tokens": u.Completion,
		"total_tokens": u.Prompt + u.Completion, "prompt_tokens_details": map[string]any{"cached_tokens": u.Cached}}
}

// writeChat answers p with a: one JSON completion, or SSE chunks (text in
// words, a tool call in two argument pieces) with a usage chunk when asked.
func writeChat(w http.ResponseWriter, p prompt, a answer, u usage, id string) {
	created := time.Now().Unix()
	finish := "stop"
	if len(a.Calls) > 0 {
		finish = "tool_calls"
	}
	if !p.Stream {
		msg := map[string]any{"role": "assistant", "content": a.Text, "refusal": nil}
		if len(a.Calls) > 0 {
			msg["content"] = nil
			var calls []any
			for _, c := range a.Calls {
				calls = append(calls, map[string]any{"id": c.ID, "type": "function",
					"function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
			}
			msg["tool_calls"] = calls
		}
		b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion", "created": created, "model": p.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
			"usage":   chatUsage(u)})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	chunk := func(choices []any, withUsage bool) {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": p.Model, "choices": choices}
		if p.IncludeUsage {
			c["usage"] = nil
			if withUsage {
				c["usage"] = chatUsage(u)
			}
		}
		b, _ := json.Marshal(c)
		var buf bytes.Buffer
		buf.WriteString("data: ")
		buf.Write(b)
		buf.WriteString("\n\n")
		_, _ = w.Write(buf.Bytes())
		if flusher != nil {
			flusher.Flush()
		}
	}
	delta := func(d map[string]any, fin any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "logprobs": nil, "finish_reason": fin}}
	}
	chunk(delta(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil), false)
	for _, d := range streamDeltas(a) {
		chunk(delta(d, nil), false)
	}
	chunk(delta(map[string]any{}, finish), false)
	if p.IncludeUsage {
		chunk([]any{}, true)
	}
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
	if flusher != nil {
		flusher.Flush()
	}
}

// streamDeltas splits an answer as the API streams it.
func streamDeltas(a answer) []map[string]any {
	var out []map[string]any
	for i, c := range a.Calls {
		half := len(c.Arguments) / 2
		out = append(out,
			map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": ""}}}},
			map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": c.Arguments[:half]}}}},
			map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": c.Arguments[half:]}}}})
	}
	if len(a.Calls) > 0 {
		return out
	}
	for i, word := range strings.SplitAfter(a.Text, " ") {
		if word != "" || i == 0 {
			out = append(out, map[string]any{"content": word})
		}
	}
	return out
}
