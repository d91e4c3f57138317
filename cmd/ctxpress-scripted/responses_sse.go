package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// eventWriter writes Responses SSE events as OpenAI does: an event line
// naming the type, a data line whose JSON carries the type again and a
// sequence_number counting from 0, flushed one by one.
type eventWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
	seq     int
}

func newEventWriter(w http.ResponseWriter) *eventWriter {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	f, _ := w.(http.Flusher)
	return &eventWriter{w: w, flusher: f}
}

func (e *eventWriter) send(typ string, fields map[string]any) {
	data := map[string]any{"type": typ, "sequence_number": e.seq}
	for k, v := range fields {
		data[k] = v
	}
	e.seq++
	b, _ := json.Marshal(data)
	var buf bytes.Buffer
	buf.WriteString("event: " + typ + "\ndata: ")
	buf.Write(b)
	buf.WriteString("\n\n")
	_, _ = e.w.Write(buf.Bytes())
	if e.flusher != nil {
		e.flusher.Flush()
	}
}

// streamResponse sends r as OpenAI streams it: response.created,
// response.in_progress, each output item added, its deltas, done, then
// response.completed with the usage (left out with complete false, as a
// cut stream would).
func streamResponse(ev *eventWriter, r response, complete bool) {
	ev.send("response.created", map[string]any{"response": r.base})
	ev.send("response.in_progress", map[string]any{"response": r.base})
	for i, it := range r.items {
		ev.send("response.output_item.added", map[string]any{"output_index": i, "item": addedItem(it)})
		switch it["type"] {
		case "message":
			streamText(ev, i, it)
		case "function_call":
			args, id := it["arguments"].(string), it["id"]
			half := len(args) / 2
			for _, d := range []string{args[:half], args[half:]} {
				ev.send("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": d})
			}
			ev.send("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "arguments": args})
		}
		ev.send("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	if complete {
		var done map[string]any
		_ = json.Unmarshal(r.completed, &done)
		ev.send("response.completed", map[string]any{"response": done})
	}
}

// addedItem is an item as response.output_item.added announces it: in
// progress, its text and arguments still empty.
func addedItem(it map[string]any) map[string]any {
	a := clone(it)
	switch it["type"] {
	case "message":
		a["status"], a["content"] = "in_progress", []any{}
	case "function_call":
		a["status"], a["arguments"] = "in_progress", ""
	}
	return a
}

// streamText streams a message's text word by word.
func streamText(ev *eventWriter, i int, it map[string]any) {
	part := it["content"].([]any)[0].(map[string]any)
	text, id := part["text"].(string), it["id"]
	empty := clone(part)
	empty["text"] = ""
	at := map[string]any{"item_id": id, "output_index": i, "content_index": 0}
	with := func(k string, v any) map[string]any {
		m := clone(at)
		m[k] = v
		return m
	}
	ev.send("response.content_part.added", with("part", empty))
	for j, word := range strings.SplitAfter(text, " ") {
		if word != "" || j == 0 {
			d := with("delta", word)
			d["logprobs"] = []any{}
			ev.send("response.output_text.delta", d)
		}
	}
	d := with("text", text)
	d["logprobs"] = []any{}
	ev.send("response.output_text.done", d)
	ev.send("response.content_part.done", with("part", part))
}
