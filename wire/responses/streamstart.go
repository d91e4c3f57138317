package responses

import (
	"github.com/ctxpress/ctxpress/wire/sse"
	"github.com/tidwall/gjson"
)

// StreamStart reads the start of a Responses stream for whether the
// upstream refused the request in it. OpenAI refuses a streamed request
// whose input is over the model's window with a 200 and then
// response.created, response.in_progress and response.failed carrying the
// error (context_length_exceeded), before any output: unlike a 400, that
// refusal can only be seen by reading the stream's first events. Feed it
// the stream's bytes until Decided.
type StreamStart struct {
	events  sse.JSONEvents
	decided bool
	refusal []byte
}

// Feed consumes the next bytes of the stream; bytes after the deciding
// event are not read.
func (s *StreamStart) Feed(p []byte) {
	if !s.decided {
		s.events.Feed(p, []byte(`"type"`), s.event)
	}
}

// Decided reports whether an event other than the response's creation and
// progress has arrived: the stream has output, or has failed, or is not
// one whose start this knows.
func (s *StreamStart) Decided() bool { return s.decided }

// Refusal is the error of a stream that failed before any output, as the
// error body of a refused request ({"error":{...}}, what the Responses API
// answers with a 4xx); nil when it did not (or is not decided yet).
func (s *StreamStart) Refusal() []byte { return s.refusal }

func (s *StreamStart) event(data []byte) {
	if s.decided {
		return
	}
	switch gjson.GetBytes(data, "type").String() {
	case "response.created", "response.in_progress":
		// Sent at once; an overflow's response.failed follows them. A
		// queued response (background mode) may wait long: it decides.
		return
	case eventFailed:
		if e := gjson.GetBytes(data, "response.error"); e.IsObject() {
			s.refusal = errorBody(e.Raw)
		}
	case eventError:
		// The error's fields are the event's own (code, message, param),
		// or under "error" in some gateways' form of it.
		raw := string(data)
		if e := gjson.GetBytes(data, "error"); e.IsObject() {
			raw = e.Raw
		}
		s.refusal = errorBody(raw)
	}
	s.decided = true
}

// errorBody wraps an error object as a refused request's body.
func errorBody(errorObject string) []byte {
	return append(append([]byte(`{"error":`), errorObject...), '}')
}
