package chat

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ctxpress/ctxpress/wire"
)

// Reply is wire.Reply: chat writes its replies in chat-completions form.
type Reply = wire.Reply

// AssistantReply renders text as the assistant's whole answer to a request
// for model: a chat.completion with zero usage, or when stream is set the
// SSE of two chat.completion.chunk events (the text, then finish_reason
// "stop") and [DONE]. now dates it and makes its id.
func AssistantReply(model, text string, stream bool, now time.Time) Reply {
	id := fmt.Sprintf("chatcmpl-ctxpress-%d", now.UnixNano())
	created := now.Unix()
	if !stream {
		b, _ := json.Marshal(map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": text}}},
			"usage": map[string]int{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
		})
		return Reply{ContentType: "application/json", Body: b}
	}
	chunk := func(delta map[string]any, finish any) []byte {
		b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		return b
	}
	var sse []byte
	for _, c := range [][]byte{chunk(map[string]any{"role": "assistant", "content": text}, nil), chunk(map[string]any{}, "stop")} {
		sse = append(append(append(sse, "data: "...), c...), "\n\n"...)
	}
	sse = append(sse, "data: [DONE]\n\n"...)
	return Reply{ContentType: "text/event-stream", Body: sse}
}
