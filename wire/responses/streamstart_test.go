package responses

import (
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/wire"
)

// OpenAI's events, as its streams send them (the response object cut to
// what matters here).
const (
	startCreated    = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"error\":null,\"output\":[],\"instructions\":\"You are codex.\"}}\n\n"
	startInProgress = "event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"sequence_number\":1,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"error\":null,\"output\":[]}}\n\n"
	startOverflow   = "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"failed\",\"error\":{\"code\":\"context_length_exceeded\",\"message\":\"Your input exceeds the context window of this model. Please adjust your input and try again.\"},\"output\":[]}}\n\n"
	startServerErr  = "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"The model failed.\"},\"output\":[]}}\n\n"
	startOutput     = "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":2,\"output_index\":0,\"item\":{\"id\":\"rs_1\",\"type\":\"reasoning\",\"summary\":[]}}\n\n"
	startErrorEvent = "event: error\ndata: {\"type\":\"error\",\"sequence_number\":2,\"code\":\"context_length_exceeded\",\"message\":\"Your input exceeds the context window of this model.\",\"param\":\"input\"}\n\n"
	startGatewayErr = "data: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"code\":\"context_length_exceeded\",\"message\":\"Input too long.\"}}\n\n"
)

func TestStreamStart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stream   string
		decided  bool
		overflow bool // its refusal is a context overflow
		refused  bool // it has a refusal at all
	}{
		{"created and in progress: nothing known yet", startCreated + startInProgress, false, false, false},
		{"failed as too long before any output", startCreated + startInProgress + startOverflow, true, true, true},
		{"failed otherwise: a refusal, not an overflow", startCreated + startInProgress + startServerErr, true, false, true},
		{"output began", startCreated + startInProgress + startOutput + startOverflow, true, false, false},
		{"an error event", startCreated + startErrorEvent, true, true, true},
		{"a gateway's error event, the error nested", startGatewayErr, true, true, true},
		{"a failed event still coming", startCreated + startInProgress + startOverflow[:60], false, false, false},
		{"CRLF line ends", strings.ReplaceAll(startCreated+startOverflow, "\n", "\r\n"), true, true, true},
		{"queued (background mode): nothing is held while it waits", startCreated + "event: response.queued\ndata: {\"type\":\"response.queued\",\"sequence_number\":1}\n\n", true, false, false},
		{"not a Responses stream: its first event decides", "data: {\"type\":\"something.else\"}\n\n" + startOverflow, true, false, false},
	} {
		// Whole, and cut at every byte: reads split events anywhere.
		for cut := 0; cut <= len(tc.stream); cut++ {
			var s StreamStart
			s.Feed([]byte(tc.stream[:cut]))
			s.Feed([]byte(tc.stream[cut:]))
			refusal := s.Refusal()
			if s.Decided() != tc.decided || (refusal != nil) != tc.refused || wire.IsContextOverflow(400, refusal) != tc.overflow {
				t.Fatalf("%s, cut at %d: decided %v, refusal %s", tc.name, cut, s.Decided(), refusal)
			}
		}
	}
}
