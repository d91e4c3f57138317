package gemini

import (
	"bytes"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/sse"
	"github.com/tidwall/gjson"
)

// Usage is what the upstream reported about one answer.
type Usage = wire.Usage

// usageOf returns the usageMetadata (or usage_metadata) of an answer.
func usageOf(answer gjson.Result) gjson.Result {
	if u := answer.Get("usageMetadata"); u.Exists() {
		return u
	}
	return answer.Get("usage_metadata")
}

// field is the first of a usageMetadata field's spellings that exists.
func field(u gjson.Result, camel, snake string) gjson.Result {
	if v := u.Get(camel); v.Exists() {
		return v
	}
	return u.Get(snake)
}

// ReadUsage reads a usageMetadata object. promptTokenCount is the whole
// prompt, the implicit or explicit cache's part (cachedContentTokenCount)
// included; toolUsePromptTokenCount, the results of Google's own tools
// (search, code execution) the model read, is prompt too. The output is
// candidatesTokenCount plus thoughtsTokenCount, which Google bills as
// output. A missing object, or one without any count, gives Found=false.
func ReadUsage(u gjson.Result) Usage {
	if !u.IsObject() {
		return Usage{}
	}
	prompt := field(u, "promptTokenCount", "prompt_token_count")
	cached := field(u, "cachedContentTokenCount", "cached_content_token_count")
	tools := field(u, "toolUsePromptTokenCount", "tool_use_prompt_token_count")
	cand := field(u, "candidatesTokenCount", "candidates_token_count")
	thoughts := field(u, "thoughtsTokenCount", "thoughts_token_count")
	if !prompt.Exists() && !cached.Exists() && !tools.Exists() && !cand.Exists() && !thoughts.Exists() {
		return Usage{}
	}
	return Usage{
		InputTokens:  int(prompt.Int() + tools.Int()),
		OutputTokens: int(cand.Int() + thoughts.Int()),
		CachedTokens: int(cached.Int()),
		Found:        true,
	}
}

// UsageFromJSON reads usage from a whole answer: a GenerateContentResponse,
// or a whole JSON-array stream (the last element that reports usage);
// not JSON gives Found=false.
func UsageFromJSON(body []byte) Usage {
	if !jsonvalid.Valid(body) {
		return Usage{}
	}
	root := gjson.ParseBytes(body)
	if !root.IsArray() {
		return ReadUsage(usageOf(root))
	}
	var u Usage
	root.ForEach(func(_, e gjson.Result) bool {
		if eu := ReadUsage(usageOf(e)); eu.Found {
			u = eu
		}
		return true
	})
	return u
}

// StreamAsks reports whether a request asks for a stream, from its path
// (the query may follow): the method :streamGenerateContent streams, and a
// Gemini stream always carries its usage (usageMetadata on its chunks).
func StreamAsks(path []byte) (stream, usage bool) {
	if q := bytes.IndexByte(path, '?'); q >= 0 {
		path = path[:q]
	}
	stream = bytes.HasSuffix(path, []byte(":streamGenerateContent"))
	return stream, stream
}

// SSEAsked reports whether a streamed request asks for SSE (alt=sse in
// its query, with or without the leading '?'); without, Google streams
// one JSON array.
func SSEAsked(query []byte) bool {
	for _, kv := range bytes.Split(bytes.TrimPrefix(query, []byte("?")), []byte("&")) {
		if string(kv) == "alt=sse" {
			return true
		}
	}
	return false
}

// StreamWatch watches a side copy of a streamed answer, in either of
// Google's shapes: server-sent events (alt=sse: each data: line one
// GenerateContentResponse) or one JSON array of them streamed element by
// element (without alt=sse). The shape is read from the first byte. Every
// chunk may carry usageMetadata, the last the totals: the last one seen is
// the stream's. It never changes the bytes the client gets.
type StreamWatch struct {
	decided, array bool
	events         sse.JSONEvents
	elems          arrayElements
	usage          Usage
	finish         string
	blocked        bool
	errored        bool
}

// Observe feeds the next bytes of the stream.
func (w *StreamWatch) Observe(p []byte) {
	if !w.decided {
		i := wire.SkipSpace(p, 0)
		if i == len(p) {
			return
		}
		w.decided, w.array = true, p[i] == '['
	}
	if w.array {
		w.elems.Feed(p, w.chunk)
		return
	}
	w.events.Feed(p, []byte(`"`), w.chunk)
}

// chunk reads one GenerateContentResponse of the stream (or an error).
func (w *StreamWatch) chunk(data []byte) {
	root := gjson.ParseBytes(data)
	if root.Get("error").Exists() {
		w.errored = true
		return
	}
	if u := ReadUsage(usageOf(root)); u.Found {
		w.usage = u
	}
	root.Get("candidates").ForEach(func(_, c gjson.Result) bool {
		if f := field(c, "finishReason", "finish_reason").String(); f != "" {
			w.finish = f
		}
		return true
	})
	if field(root, "promptFeedback", "prompt_feedback").Get("blockReason").String() != "" {
		w.blocked = true
	}
}

// Usage is the stream's usage so far (Found=false: none seen).
func (w *StreamWatch) Usage() Usage { return w.usage }

// FinishReason is the last finishReason a chunk gave ("" until one did).
func (w *StreamWatch) FinishReason() string { return w.finish }

// Completed reports whether a chunk ended the answer: a finishReason, or a
// prompt Google blocked (it answers no candidate then).
func (w *StreamWatch) Completed() bool { return w.finish != "" || w.blocked }

// Errored reports whether the stream carried an error object.
func (w *StreamWatch) Errored() bool { return w.errored }

// Ended reports whether the stream completed or carried an error; one
// that closes before is truncated.
func (w *StreamWatch) Ended() bool { return w.Completed() || w.errored }

// arrayElements cuts a streamed JSON array into its elements across reads.
type arrayElements struct {
	buf      []byte
	depth    int // 0 before the array, 1 inside it between elements
	inString bool
	escaped  bool
	skipping bool // inside an element longer than sse.MaxLine
	started  bool // the array opened
}

// Feed consumes the next bytes and calls elem with each object element it
// completes that is valid JSON. elem must not keep its argument.
func (a *arrayElements) Feed(p []byte, elem func([]byte)) {
	for _, c := range p {
		if a.depth >= 2 && !a.skipping {
			if len(a.buf) >= sse.MaxLine {
				a.buf, a.skipping = a.buf[:0], true
			} else {
				a.buf = append(a.buf, c)
			}
		}
		if a.inString {
			switch {
			case a.escaped:
				a.escaped = false
			case c == '\\':
				a.escaped = true
			case c == '"':
				a.inString = false
			}
			continue
		}
		switch c {
		case '"':
			a.inString = a.started
		case '{', '[':
			if !a.started {
				a.started, a.depth = true, 1
				continue
			}
			if a.depth++; a.depth == 2 {
				a.buf = append(a.buf[:0], c)
			}
		case '}', ']':
			if a.depth--; a.depth == 1 {
				if !a.skipping && jsonvalid.Valid(a.buf) {
					elem(a.buf)
				}
				a.buf, a.skipping = a.buf[:0], false
			}
		}
	}
}
