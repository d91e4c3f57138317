// Package responses is the wire adapter for the OpenAI Responses API
// (POST /v1/responses, what codex ≥ 0.98 speaks): usage from a response
// object and from its stream, ctxpress's own replies, and the summary call
// in this format.
package responses

import (
	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/sse"
	"github.com/tidwall/gjson"
)

// Usage is what the upstream reported about one response.
type Usage = wire.Usage

// ReadUsage reads a response's "usage" object (input_tokens,
// input_tokens_details.cached_tokens, output_tokens); a missing or null one
// gives Found=false.
func ReadUsage(u gjson.Result) Usage {
	if !u.IsObject() {
		return Usage{}
	}
	in := u.Get("input_tokens")
	if !in.Exists() {
		return Usage{}
	}
	return Usage{
		InputTokens:  int(in.Int()),
		OutputTokens: int(u.Get("output_tokens").Int()),
		CachedTokens: int(u.Get("input_tokens_details.cached_tokens").Int()),
		Found:        true,
	}
}

// UsageFromJSON reads usage from a whole (non-streamed) response object;
// not JSON gives Found=false. A response whose output holds a compaction
// item is ServerCompacted: its input is not the request's as sent.
func UsageFromJSON(body []byte) Usage {
	if !jsonvalid.Valid(body) {
		return Usage{}
	}
	u := ReadUsage(gjson.GetBytes(body, "usage"))
	u.ServerCompacted = u.Found && compacted(gjson.GetBytes(body, "output"))
	return u
}

// compacted reports whether a response's output holds the provider's
// compaction of its input (context_management's threshold crossed, or
// the client's compaction_trigger).
func compacted(output gjson.Result) bool {
	found := false
	output.ForEach(func(_, it gjson.Result) bool {
		t := it.Get("type").Str
		found = t == KindCompaction || t == KindCompactionSummary
		return !found
	})
	return found
}

// Stream ends. A stream that ends without one of them was cut short: the
// client must see it as an error, never as a complete answer.
const (
	eventCompleted  = "response.completed"
	eventIncomplete = "response.incomplete" // finished, cut by max_output_tokens or a filter
	eventFailed     = "response.failed"
	eventError      = "error"
)

// StreamWatch watches a side copy of a Responses SSE stream: the usage of
// its final response, and how it ended. It never changes the bytes the
// client gets.
type StreamWatch struct {
	events sse.JSONEvents
	usage  Usage
	end    string // the type of the event that ended the stream; "" so far
}

// Observe feeds the next bytes of the stream.
func (w *StreamWatch) Observe(p []byte) { w.events.Feed(p, []byte(`"type"`), w.event) }

func (w *StreamWatch) event(data []byte) {
	switch typ := gjson.GetBytes(data, "type").String(); typ {
	case eventCompleted, eventIncomplete, eventFailed, eventError:
		w.end = typ
		if u := ReadUsage(gjson.GetBytes(data, "response.usage")); u.Found {
			u.ServerCompacted = compacted(gjson.GetBytes(data, "response.output"))
			w.usage = u
		}
	}
}

// Usage is the final response's usage (Found=false: none seen).
func (w *StreamWatch) Usage() Usage { return w.usage }

// Ended reports whether the stream reached an event that ends a response
// (completed, incomplete, failed or error); a stream that closes before is
// truncated.
func (w *StreamWatch) Ended() bool { return w.end != "" }

// Completed reports whether the stream ended with response.completed.
func (w *StreamWatch) Completed() bool { return w.end == eventCompleted }

// End is the type of the event that ended the stream (response.completed,
// response.incomplete, response.failed, error); "" while none has.
func (w *StreamWatch) End() string { return w.end }

// StreamAsks reports whether a Responses body asks for a stream, and for
// usage in it: a Responses stream always ends with its response and that
// response's usage, so a stream asks for both. It expects the body the
// proxy forwards (well-formed JSON, or a body forwarded as sent, where the
// answer means nothing but is safe).
func StreamAsks(body []byte) (stream, usage bool) {
	stream = gjson.GetBytes(body, "stream").Type == gjson.True
	return stream, stream
}
