package messages

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ctxpress/ctxpress/wire"
)

// Reply is an answer ctxpress writes itself.
type Reply = wire.Reply

// AssistantReply renders text as the assistant's whole answer to a request
// for model: a message with one text block and zero usage, or when stream
// is set the events Anthropic sends for one (message_start,
// content_block_start/delta/stop, message_delta, message_stop). now makes
// its id.
func AssistantReply(model, text string, stream bool, now time.Time) Reply {
	id := fmt.Sprintf("msg_ctxpress_%d", now.UnixNano())
	usage := map[string]int{"input_tokens": 0, "output_tokens": 0}
	message := func(content []any, stop any) map[string]any {
		return map[string]any{"id": id, "type": "message", "role": "assistant", "model": model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage}
	}
	if !stream {
		b, _ := json.Marshal(message([]any{map[string]any{"type": "text", "text": text}}, "end_turn"))
		return Reply{ContentType: "application/json", Body: b}
	}
	events := []map[string]any{
		{"type": "message_start", "message": message([]any{}, nil)},
		{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}},
		{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": text}},
		{"type": "content_block_stop", "index": 0},
		{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 0}},
		{"type": "message_stop"},
	}
	var body []byte
	for _, ev := range events {
		b, _ := json.Marshal(ev)
		body = fmt.Appendf(body, "event: %s\ndata: %s\n\n", ev["type"], b)
	}
	return Reply{ContentType: "text/event-stream", Body: body}
}

// errorTypes are Anthropic's error types by HTTP status.
var errorTypes = map[int]string{
	400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
	404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error",
}

// ErrorBody renders one of ctxpress's own errors in Anthropic's shape,
// {"type":"error","error":{"type":…,"message":"ctxpress: …"}}, the type
// the status has in Anthropic's API (api_error for 5xx such as a 502 or
// 504 when the upstream cannot be reached), so Anthropic clients and SDKs
// read and retry it as they would Anthropic's own.
func ErrorBody(status int, message string) []byte {
	typ, ok := errorTypes[status]
	if !ok {
		typ = "api_error"
	}
	b, _ := json.Marshal(map[string]any{"type": "error",
		"error": map[string]string{"type": typ, "message": "ctxpress: " + message}})
	return b
}
