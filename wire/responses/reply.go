package responses

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ctxpress/ctxpress/wire"
)

// Reply is an answer ctxpress writes itself.
type Reply = wire.Reply

// AssistantReply renders text as the assistant's whole answer to a request
// for model: a completed response object with one output message and zero
// usage, or when stream is set the events OpenAI sends for one (created,
// output_item.added, content_part.added, output_text.delta/.done,
// content_part.done, output_item.done, completed). now dates it and makes
// its ids.
func AssistantReply(model, text string, stream bool, now time.Time) Reply {
	n := now.UnixNano()
	respID, msgID := fmt.Sprintf("resp_ctxpress_%d", n), fmt.Sprintf("msg_ctxpress_%d", n)
	part := map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
	item := func(status string, content []any) map[string]any {
		return map[string]any{"id": msgID, "type": "message", "status": status, "role": "assistant", "content": content}
	}
	response := func(status string, output []any, usage any) map[string]any {
		return map[string]any{"id": respID, "object": "response", "created_at": now.Unix(), "status": status,
			"model": model, "output": output, "usage": usage}
	}
	usage := map[string]any{"input_tokens": 0, "input_tokens_details": map[string]int{"cached_tokens": 0},
		"output_tokens": 0, "output_tokens_details": map[string]int{"reasoning_tokens": 0}, "total_tokens": 0}
	done := response("completed", []any{item("completed", []any{part})}, usage)
	if !stream {
		b, _ := json.Marshal(done)
		return Reply{ContentType: "application/json", Body: b}
	}
	empty := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
	at := map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0}
	events := []map[string]any{
		{"type": "response.created", "response": response("in_progress", []any{}, nil)},
		{"type": "response.output_item.added", "output_index": 0, "item": item("in_progress", []any{})},
		with(at, map[string]any{"type": "response.content_part.added", "part": empty}),
		with(at, map[string]any{"type": "response.output_text.delta", "delta": text}),
		with(at, map[string]any{"type": "response.output_text.done", "text": text}),
		with(at, map[string]any{"type": "response.content_part.done", "part": part}),
		{"type": "response.output_item.done", "output_index": 0, "item": item("completed", []any{part})},
		{"type": "response.completed", "response": done},
	}
	var body []byte
	for i, ev := range events {
		ev["sequence_number"] = i
		b, _ := json.Marshal(ev)
		body = fmt.Appendf(body, "event: %s\ndata: %s\n\n", ev["type"], b)
	}
	return Reply{ContentType: "text/event-stream", Body: body}
}

// with returns the members of a and b in one map.
func with(a, b map[string]any) map[string]any {
	m := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}
