// Package messages is the wire adapter for Anthropic Messages
// (POST /v1/messages, what Claude Code speaks): Format reads a request into
// the neutral conversation and writes the core's edits back in place;
// usage from a message and from its stream, ctxpress's own replies and
// errors in Anthropic's shape, and the summary call in this format.
package messages

import (
	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/sse"
	"github.com/tidwall/gjson"
)

// Usage is what the upstream reported about one message.
type Usage = wire.Usage

// ReadUsage reads an Anthropic "usage" object. Anthropic counts the prompt
// in three parts (input_tokens is what was neither read from nor written to
// the cache); InputTokens is their sum, the prompt's size as the other
// formats report it, CachedTokens the cache reads, CacheWriteTokens the
// cache writes. A missing or null object gives Found=false. Its
// "iterations", when the server compacted the request, give
// ServerCompacted and ServerCompaction (serverCompaction).
func ReadUsage(u gjson.Result) Usage {
	if !u.IsObject() {
		return Usage{}
	}
	in, read, write := u.Get("input_tokens"), u.Get("cache_read_input_tokens"), u.Get("cache_creation_input_tokens")
	if !in.Exists() && !read.Exists() && !write.Exists() && !u.Get("output_tokens").Exists() {
		return Usage{}
	}
	usage := Usage{
		InputTokens:      int(in.Int() + read.Int() + write.Int()),
		OutputTokens:     int(u.Get("output_tokens").Int()),
		CachedTokens:     int(read.Int()),
		CacheWriteTokens: int(write.Int()),
		Found:            true,
	}
	usage.ServerCompaction, usage.ServerCompacted = serverCompaction(u.Get("iterations"))
	return usage
}

// serverCompaction sums the "compaction" entries of a usage's iterations:
// the server's own compaction of the request, billed apart from the
// "message" iteration the top-level fields describe. Other entries
// ("message", and types this version does not know) are not counted; a
// missing, null or empty array gives compacted=false.
func serverCompaction(iterations gjson.Result) (sum wire.Tokens, compacted bool) {
	iterations.ForEach(func(_, it gjson.Result) bool {
		if it.Get("type").String() != "compaction" {
			return true
		}
		compacted = true
		read, write := int(it.Get("cache_read_input_tokens").Int()), int(it.Get("cache_creation_input_tokens").Int())
		sum.InputTokens += int(it.Get("input_tokens").Int()) + read + write
		sum.OutputTokens += int(it.Get("output_tokens").Int())
		sum.CachedTokens += read
		sum.CacheWriteTokens += write
		return true
	})
	return sum, compacted
}

// UsageFromJSON reads usage from a whole (non-streamed) message; not JSON
// gives Found=false.
func UsageFromJSON(body []byte) Usage {
	if !jsonvalid.Valid(body) {
		return Usage{}
	}
	return ReadUsage(gjson.GetBytes(body, "usage"))
}

// StreamWatch watches a side copy of a Messages SSE stream: its usage and
// whether it reached message_stop. It never changes the bytes the client
// gets.
//
// message_start carries the prompt's usage; message_delta carries usage
// again, cumulative: Anthropic repeats every field, llama-server only
// output_tokens. So a field message_delta names replaces the one before,
// and one it leaves out keeps its message_start value. So do "iterations",
// wherever they come (message_delta, where a server compaction shows).
type StreamWatch struct {
	events           sse.JSONEvents
	usage            Usage
	in, read, write  int64
	stopped, errored bool
}

// Observe feeds the next bytes of the stream.
func (w *StreamWatch) Observe(p []byte) { w.events.Feed(p, []byte(`"type"`), w.event) }

func (w *StreamWatch) event(data []byte) {
	switch gjson.GetBytes(data, "type").String() {
	case "message_start":
		w.merge(gjson.GetBytes(data, "message.usage"))
	case "message_delta":
		w.merge(gjson.GetBytes(data, "usage"))
	case "message_stop":
		w.stopped = true
	case "error":
		w.errored = true
	}
}

// merge takes the fields u names over the ones seen before.
func (w *StreamWatch) merge(u gjson.Result) {
	if !u.IsObject() {
		return
	}
	for _, f := range []struct {
		name string
		v    *int64
	}{{"input_tokens", &w.in}, {"cache_read_input_tokens", &w.read}, {"cache_creation_input_tokens", &w.write}} {
		if v := u.Get(f.name); v.Exists() {
			*f.v = v.Int()
		}
	}
	if v := u.Get("output_tokens"); v.Exists() {
		w.usage.OutputTokens = int(v.Int())
	}
	if v := u.Get("iterations"); v.Exists() {
		w.usage.ServerCompaction, w.usage.ServerCompacted = serverCompaction(v)
	}
	w.usage.InputTokens = int(w.in + w.read + w.write)
	w.usage.CachedTokens, w.usage.CacheWriteTokens = int(w.read), int(w.write)
	w.usage.Found = true
}

// Usage is the stream's usage so far (Found=false: none seen).
func (w *StreamWatch) Usage() Usage { return w.usage }

// Ended reports whether the stream reached message_stop or an error event;
// a stream that closes before is truncated.
func (w *StreamWatch) Ended() bool { return w.stopped || w.errored }

// Completed reports whether the stream reached message_stop.
func (w *StreamWatch) Completed() bool { return w.stopped }

// StreamAsks reports whether a Messages body asks for a stream, and for
// usage in it: a Messages stream always carries its usage (message_start,
// message_delta), so a stream asks for both. It expects the body the proxy
// forwards (well-formed JSON, or a body forwarded as sent, where the answer
// means nothing but is safe).
func StreamAsks(body []byte) (stream, usage bool) {
	stream = gjson.GetBytes(body, "stream").Type == gjson.True
	return stream, stream
}
