package wire

import (
	"bytes"
	"errors"
)

// A tool ctxpress offers the model and answers itself (the retrieval
// tool, ctxpress_expand): each adapter adds its definition to a request's
// tools in the format's own shape, reads the calls of an answer, whole or
// streamed, and appends the answer's turn with the results of the calls
// it answered, so that the request can be asked again. The client never
// sees that exchange.

// Tool is a function tool: its name, a description the model reads and
// the JSON schema of its arguments (an object, as compact JSON).
type Tool struct {
	Name, Description string
	Parameters        string
}

// Call is one function call an answer made: its id (Anthropic's tool_use
// id, the call_id of the others), the tool's name and its arguments as the
// model wrote them (JSON text, possibly invalid).
type Call struct {
	ID, Name, Arguments string
}

// CallResult is the result of a call, as text the model reads; IsError
// marks one that tells of a failure (Anthropic's is_error).
type CallResult struct {
	Call    Call
	Text    string
	IsError bool
}

// Tools is implemented by a format that can carry a tool ctxpress answers
// itself.
type Tools interface {
	// OfferTool returns body with t's definition last in its tools;
	// false, and body unchanged, when body offers no tools (none, or an
	// empty list: a request without tools never gets one) or one named
	// t.Name already (the client's own, which ctxpress leaves to it).
	// body must be valid JSON; it is not modified.
	OfferTool(body []byte, t Tool) ([]byte, bool)
	// ReadAnswer reads a whole answer of the format, a JSON object or an
	// event stream (plain bytes, as the upstream sent them), for its
	// calls; false when it is neither, or a stream that did not end as a
	// whole answer.
	ReadAnswer(answer []byte) (Answer, bool)
}

// Answer is an answer read by its format's adapter (Tools.ReadAnswer).
type Answer interface {
	// Calls are the function calls the answer made, in order.
	Calls() []Call
	// Usage is the answer's usage (Found false: it reported none).
	Usage() Usage
	// Continue returns body, the request the answer answers, with the
	// answer's turn appended, keeping its text, reasoning and the calls
	// keep reports true (the others are left out, so that every call
	// left has its result), followed by results, one per kept call, in
	// order. It fails when the format allows no such turn at the end of
	// body (Messages: the request ends with the assistant's own words).
	// body must be valid JSON; it is not modified.
	Continue(body []byte, keep func(Call) bool, results []CallResult) ([]byte, error)
}

// ErrNoTurn is the error of an Answer.Continue that cannot append the
// answer's turn to its request.
var ErrNoTurn = errors.New("wire: the answer's turn cannot follow the request's last message")

// AppendToList returns body with elems (each a whole JSON value) at the
// end of the array of its top-level member key, every other byte as it
// was; false when there is no such member or it is no array. body must be
// valid JSON; it is not modified.
func AppendToList(body []byte, key string, elems ...[]byte) ([]byte, bool) {
	arr, ok := TopArray(body, key, nil)
	if !ok {
		return nil, false
	}
	var repl []byte
	if SkipSpace(body, arr.Start+1) < arr.End-1 {
		repl = append(repl, ',')
	}
	repl = append(repl, bytes.Join(elems, []byte{','})...)
	end := arr.End - 1 // the closing bracket
	return Splice(body, []Edit{{Start: end, End: end, Repl: repl}}), true
}

// OfferTool is Tools.OfferTool for a format whose tools are the
// top-level array "tools" of objects: def is the tool's definition in the
// format's shape, and nameOf reads a tool's name from its bytes.
func OfferTool(body []byte, name string, def []byte, nameOf func(tool []byte) string) ([]byte, bool) {
	arr, ok := TopArray(body, "tools", nil)
	if !ok {
		return body, false
	}
	n, taken := 0, false
	WalkArray(body, arr.Start, func(vs int) int {
		ve := ValueEnd(body, vs)
		n++
		if body[vs] == '{' && nameOf(body[vs:ve]) == name {
			taken = true
			return -1
		}
		return ve
	})
	if n == 0 || taken {
		return body, false
	}
	out, ok := AppendToList(body, "tools", def)
	if !ok {
		return body, false
	}
	return out, true
}

// AnswerIsStream reports whether a whole answer is an event stream rather
// than one JSON object: its first byte that is not space is no '{'.
func AnswerIsStream(answer []byte) bool {
	i := SkipSpace(answer, 0)
	return i < len(answer) && answer[i] != '{'
}
