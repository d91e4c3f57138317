package main

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/ctxpress/ctxpress/internal/messagestest"
)

// writeMessage answers a Messages request: one JSON message, or the SSE
// events Anthropic streams (message_start with the input usage, a ping,
// content_block_start/delta/stop per block with thinking_delta,
// signature_delta, text_delta and input_json_delta, message_delta with the
// cumulative usage, message_stop).
func writeMessage(w http.ResponseWriter, req *messagestest.Request, id string, blocks []contentBlock, u anthropicUsage) {
	stop := stopReason(blocks)
	if !req.Stream {
		writeJSON(w, map[string]any{"id": id, "type": "message", "role": "assistant", "model": req.Model,
			"content": blocks, "stop_reason": stop, "stop_sequence": nil, "usage": u})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	event := func(name string, data any) {
		b, ok := data.([]byte)
		if !ok {
			b, _ = json.Marshal(data)
		}
		_, _ = w.Write([]byte("event: " + name + "\ndata: " + string(b) + "\n\n"))
		if flusher != nil {
			flusher.Flush()
		}
	}
	start := u
	start.Output = 1
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message",
		"role": "assistant", "model": req.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": start}})
	event("ping", []byte(`{"type": "ping"}`))
	for i, b := range blocks {
		event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": emptyBlock(b)})
		for _, d := range blockDeltas(b) {
			event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": u})
	event("message_stop", map[string]any{"type": "message_stop"})
}

// emptyBlock is a block as content_block_start opens it.
func emptyBlock(b contentBlock) map[string]any {
	switch b.Type {
	case "thinking":
		return map[string]any{"type": "thinking", "thinking": "", "signature": ""}
	case "tool_use":
		return map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}
	}
	return map[string]any{"type": "text", "text": ""}
}

// blockDeltas splits a block as the API streams it: thinking then its
// signature, text in words, tool input as an empty partial_json then two
// halves.
func blockDeltas(b contentBlock) []map[string]any {
	var out []map[string]any
	switch b.Type {
	case "thinking":
		if *b.Thinking != "" {
			out = append(out, map[string]any{"type": "thinking_delta", "thinking": *b.Thinking})
		}
		out = append(out, map[string]any{"type": "signature_delta", "signature": *b.Signature})
	case "tool_use":
		in := string(b.Input)
		half := len(in) / 2
		for _, part := range []string{"", in[:half], in[half:]} {
			out = append(out, map[string]any{"type": "input_json_delta", "partial_json": part})
		}
	default:
		for _, word := range strings.SplitAfter(*b.Text, " ") {
			if word != "" {
				out = append(out, map[string]any{"type": "text_delta", "text": word})
			}
		}
	}
	return out
}
