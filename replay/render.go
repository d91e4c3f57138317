package replay

import (
	"encoding/json"
	"fmt"
)

// answer is one simulated completion, to render in a request's format.
type answer struct {
	id, model, text string
	// truncated: the text stopped at the request's cap (finish_reason
	// "length", stop_reason "max_tokens", status "incomplete").
	truncated bool
	input     int // prompt tokens, cached and written included
	cached    int
	// cacheWrite: the prompt tokens written to the cache (Messages only).
	cacheWrite int
	output     int
	stream     bool
	// streamUsage: a chat stream asked for its usage
	// (stream_options.include_usage); the other formats always send it.
	streamUsage bool
}

// render returns a's content type and body in format f: a whole JSON
// answer, or the SSE events that API streams, usage where it puts it.
func render(f Format, a answer) (string, []byte) {
	var events []sseEvent
	var whole any
	switch f {
	case Responses:
		whole, events = responsesAnswer(a)
	case Messages:
		whole, events = messagesAnswer(a)
	default:
		whole, events = chatAnswer(a)
	}
	if !a.stream {
		b, _ := json.Marshal(whole)
		return "application/json", b
	}
	var body []byte
	for _, ev := range events {
		b, _ := json.Marshal(ev.data)
		if ev.name != "" {
			body = fmt.Appendf(body, "event: %s\n", ev.name)
		}
		body = fmt.Appendf(body, "data: %s\n\n", b)
	}
	if f == Chat {
		body = append(body, "data: [DONE]\n\n"...)
	}
	return "text/event-stream", body
}

// sseEvent is one event of a stream: its name (none for chat) and data.
type sseEvent struct {
	name string
	data any
}

func chatAnswer(a answer) (any, []sseEvent) {
	finish := "stop"
	if a.truncated {
		finish = "length"
	}
	usage := map[string]any{"prompt_tokens": a.input, "completion_tokens": a.output, "total_tokens": a.input + a.output,
		"prompt_tokens_details": map[string]int{"cached_tokens": a.cached}}
	whole := map[string]any{"id": a.id, "object": "chat.completion", "created": 0, "model": a.model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": finish,
			"message": map[string]any{"role": "assistant", "content": a.text}}},
		"usage": usage}
	chunk := func(delta map[string]any, finish any) sseEvent {
		c := map[string]any{"id": a.id, "object": "chat.completion.chunk", "created": 0, "model": a.model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		if a.streamUsage {
			c["usage"] = nil
		}
		return sseEvent{data: c}
	}
	events := []sseEvent{
		chunk(map[string]any{"role": "assistant", "content": a.text}, nil),
		chunk(map[string]any{}, finish),
	}
	if a.streamUsage {
		events = append(events, sseEvent{data: map[string]any{"id": a.id, "object": "chat.completion.chunk", "created": 0,
			"model": a.model, "choices": []any{}, "usage": usage}})
	}
	return whole, events
}

func responsesAnswer(a answer) (any, []sseEvent) {
	status, end := "completed", "response.completed"
	if a.truncated {
		status, end = "incomplete", "response.incomplete"
	}
	msgID := a.id + "_msg"
	part := map[string]any{"type": "output_text", "text": a.text, "annotations": []any{}}
	item := func(status string, content []any) map[string]any {
		return map[string]any{"id": msgID, "type": "message", "status": status, "role": "assistant", "content": content}
	}
	response := func(status string, output []any, usage any) map[string]any {
		r := map[string]any{"id": a.id, "object": "response", "created_at": 0, "status": status,
			"model": a.model, "output": output, "usage": usage}
		if status == "incomplete" {
			r["incomplete_details"] = map[string]string{"reason": "max_output_tokens"}
		}
		return r
	}
	usage := map[string]any{"input_tokens": a.input, "input_tokens_details": map[string]int{"cached_tokens": a.cached},
		"output_tokens": a.output, "output_tokens_details": map[string]int{"reasoning_tokens": 0},
		"total_tokens": a.input + a.output}
	done := response(status, []any{item(status, []any{part})}, usage)
	at := map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0}
	with := func(m map[string]any) map[string]any {
		for k, v := range at {
			m[k] = v
		}
		return m
	}
	data := []map[string]any{
		{"type": "response.created", "response": response("in_progress", []any{}, nil)},
		{"type": "response.output_item.added", "output_index": 0, "item": item("in_progress", []any{})},
		with(map[string]any{"type": "response.content_part.added", "part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}}),
		with(map[string]any{"type": "response.output_text.delta", "delta": a.text}),
		with(map[string]any{"type": "response.output_text.done", "text": a.text}),
		with(map[string]any{"type": "response.content_part.done", "part": part}),
		{"type": "response.output_item.done", "output_index": 0, "item": item(status, []any{part})},
		{"type": end, "response": done},
	}
	events := make([]sseEvent, len(data))
	for i, d := range data {
		d["sequence_number"] = i
		events[i] = sseEvent{name: d["type"].(string), data: d}
	}
	return done, events
}

func messagesAnswer(a answer) (any, []sseEvent) {
	stop := "end_turn"
	if a.truncated {
		stop = "max_tokens"
	}
	usage := func(output int) map[string]int {
		return map[string]int{"input_tokens": a.input - a.cached - a.cacheWrite, "cache_creation_input_tokens": a.cacheWrite,
			"cache_read_input_tokens": a.cached, "output_tokens": output}
	}
	message := func(content []any, stop any, u map[string]int) map[string]any {
		return map[string]any{"id": a.id, "type": "message", "role": "assistant", "model": a.model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": u}
	}
	whole := message([]any{map[string]any{"type": "text", "text": a.text}}, stop, usage(a.output))
	events := []sseEvent{
		{"message_start", map[string]any{"type": "message_start", "message": message([]any{}, nil, usage(1))}},
		{"content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}}},
		{"content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": a.text}}},
		{"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}},
		{"message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": a.output}}},
		{"message_stop", map[string]any{"type": "message_stop"}},
	}
	return whole, events
}

// errorBody is a refusal in f's error shape: OpenAI's
// {"error":{message,type,param,code}}, Anthropic's
// {"type":"error","error":{type,message}}.
func errorBody(f Format, typ, message string) []byte {
	var v any = map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": nil}}
	if f == Messages {
		v = map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": message}}
	}
	b, _ := json.Marshal(v)
	return b
}
