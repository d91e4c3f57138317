package replay

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/tidwall/gjson"
)

// Format is a request's wire format.
type Format string

// The formats a session may be in.
const (
	Chat      Format = "chat"      // OpenAI chat completions
	Responses Format = "responses" // OpenAI Responses
	Messages  Format = "messages"  // Anthropic Messages
)

// Path is where a request of f is posted, under a base URL ending in /v1.
func (f Format) Path() string {
	switch f {
	case Responses:
		return "/responses"
	case Messages:
		return "/messages"
	}
	return "/chat/completions"
}

// ParseFormat reads a -format value; "" means detect.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case "", Chat, Responses, Messages:
		return f, nil
	}
	return "", fmt.Errorf("format %q: want chat, responses or messages", s)
}

// detect tells a file's format from its first request whose shape says
// it: `input` and no `messages` is Responses; a top-level `system`, a
// content block only Anthropic has, or max_tokens without any chat-only
// role or member is Messages; otherwise chat.
func detect(bodies [][]byte) Format {
	for _, b := range bodies {
		if f, sure := shapeOf(b); sure {
			return f
		}
	}
	return Chat
}

// shapeOf is one body's format, and whether its shape decides it.
func shapeOf(body []byte) (Format, bool) {
	top := gjson.ParseBytes(body)
	msgs := top.Get("messages")
	if !msgs.Exists() {
		return Responses, top.Get("input").Exists()
	}
	if top.Get("system").Exists() {
		return Messages, true
	}
	chatOnly, anthropic := false, false
	msgs.ForEach(func(_, m gjson.Result) bool {
		switch m.Get("role").String() {
		case "tool", "developer", "function":
			chatOnly = true
		}
		if m.Get("tool_calls").Exists() || m.Get("tool_call_id").Exists() {
			chatOnly = true
		}
		m.Get("content").ForEach(func(_, b gjson.Result) bool {
			switch b.Get("type").String() {
			case "tool_use", "tool_result", "thinking", "redacted_thinking":
				anthropic = true
			}
			return true
		})
		return true
	})
	switch {
	case anthropic:
		return Messages, true
	case chatOnly:
		return Chat, true
	}
	return Chat, false
}

// Turns returns the requests a client sent during the run that body holds
// whole (the last request of a run, as in the corpus): request k has the
// history cut just before the k-th assistant message (Responses: the k-th
// run of output items, one answer's), and at least up to the first user
// message; the whole body comes last. Every byte
// outside the history array is as in body.
func Turns(f Format, body []byte) ([][]byte, error) {
	if !jsonvalid.Valid(body) {
		return nil, errors.New("not valid JSON")
	}
	key := "messages"
	if f == Responses {
		key = "input"
	}
	arr := gjson.GetBytes(body, key)
	if !arr.IsArray() {
		return [][]byte{body}, nil // nothing to cut (a Responses string input)
	}
	var ends []int // ends[i]: the byte after element i
	var model []bool
	firstUser := -1
	arr.ForEach(func(_, e gjson.Result) bool {
		i := len(ends)
		ends = append(ends, e.Index+len(e.Raw)) // gjson: Index is the body offset
		model = append(model, isModelOutput(f, e))
		if firstUser < 0 && e.Get("role").String() == "user" && !isModelOutput(f, e) {
			firstUser = i
		}
		return true
	})
	closing := arr.Index + len(arr.Raw) - 1 // the array's ']'
	var out [][]byte
	last := -1
	for i := range ends {
		// One Responses answer is several output items in a row.
		if !model[i] || (f == Responses && i > 0 && model[i-1]) {
			continue
		}
		cut := max(i, firstUser+1) // messages [0, cut) are sent
		if cut <= last || cut >= len(ends) || cut == 0 {
			continue
		}
		req := make([]byte, 0, ends[cut-1]+len(body)-closing)
		req = append(req, body[:ends[cut-1]]...)
		req = append(req, body[closing:]...)
		out = append(out, req)
		last = cut
	}
	return append(out, body), nil
}

// isModelOutput reports whether a history element is the model's: an
// assistant message, or a Responses output item (reasoning, a call).
func isModelOutput(f Format, e gjson.Result) bool {
	if e.Get("role").String() == "assistant" {
		return true
	}
	if f != Responses {
		return false
	}
	typ := e.Get("type").String()
	return typ == "reasoning" || (strings.HasSuffix(typ, "_call") && !strings.HasSuffix(typ, "_output"))
}
