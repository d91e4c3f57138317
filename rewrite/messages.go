package rewrite

import (
	"bytes"

	"github.com/tidwall/gjson"
)

// request is a chat-completions body as ctxpress reads it: the byte spans
// of the fields it looks at, so a step can replace exactly those bytes and
// copy all the others.
type request struct {
	body      []byte
	model     string
	stream    bool
	array     span // the `messages` array
	messages  []message
	tools     span // `tools`; counted, never changed
	cacheKey  span // `prompt_cache_key`, a conversation id
	functions span // legacy `functions`; counted, never changed
}

// message is one element of `messages`. Fields ctxpress does not know are
// not represented: they are never touched, because edits only ever replace
// the bytes of content (or of a text part inside it).
type message struct {
	body         []byte // the whole request body
	span                // the element's bytes in body
	object       bool   // false for an element that is not a JSON object (passed on as is)
	role         string // "" when absent or not a string
	name         string // `name`: a participant, or the function of a legacy role:function result
	toolCallID   string // `tool_call_id` of a role:tool result
	content      span   // string, array of parts, null, or absent
	toolCalls    span   // assistant `tool_calls` array, or absent
	functionCall span   // legacy assistant `function_call` object, or absent
}

// bytes returns the message as sent.
func (m *message) bytes() []byte { return m.body[m.start:m.end] }

// raw returns the bytes of one of m's values as sent.
func (m *message) raw(s span) []byte { return m.body[s.start:s.end] }

// isResult reports whether m is a tool result: role tool, or the legacy
// role function.
func (m *message) isResult() bool { return m.role == "tool" || m.role == "function" }

// result returns the value at s decoded by gjson, its Index the offset of
// s in the body (so nested values carry body offsets too). An absent span
// gives a Result that does not exist.
func (m *message) result(s span) gjson.Result {
	if !s.exists() {
		return gjson.Result{}
	}
	r := gjson.Parse(string(m.body[s.start:s.end]))
	r.Index = s.start
	return r
}

// The members ctxpress reads.
const (
	fieldOther = iota
	fieldModel
	fieldStream
	fieldMessages
	fieldTools
	fieldFunctions
	fieldRole
	fieldName
	fieldToolCallID
	fieldContent
	fieldToolCalls
	fieldFunctionCall
	fieldPromptCacheKey
)

// fieldOf returns which member the key span names; an escaped key is
// decoded first, as gjson would.
func fieldOf(b []byte, k span) int {
	raw := b[k.start+1 : k.end-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		return fieldByName(gjson.Parse(string(b[k.start:k.end])).Str)
	}
	return fieldByName(string(raw))
}

func fieldByName(name string) int {
	switch name {
	case "model":
		return fieldModel
	case "stream":
		return fieldStream
	case "messages":
		return fieldMessages
	case "tools":
		return fieldTools
	case "functions":
		return fieldFunctions
	case "role":
		return fieldRole
	case "name":
		return fieldName
	case "tool_call_id":
		return fieldToolCallID
	case "content":
		return fieldContent
	case "tool_calls":
		return fieldToolCalls
	case "function_call":
		return fieldFunctionCall
	case "prompt_cache_key":
		return fieldPromptCacheKey
	}
	return fieldOther
}

// stringValue returns the decoded JSON string at s, and false when s is
// not a string. The common roles come back without an allocation.
func stringValue(b []byte, s span) (string, bool) {
	if b[s.start] != '"' {
		return "", false
	}
	raw := b[s.start+1 : s.end-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		return gjson.Parse(string(b[s.start:s.end])).Str, true
	}
	switch string(raw) {
	case "user":
		return "user", true
	case "assistant":
		return "assistant", true
	case "tool":
		return "tool", true
	case "system":
		return "system", true
	}
	return string(raw), true
}

// parseRequest reads a chat request out of body. It expects well-formed
// JSON (call jsonvalid.Valid first) and reports false when the body is not
// an object with a `messages` array. For duplicate keys the first one wins,
// as with gjson.Get.
func parseRequest(body []byte) (request, bool) {
	req := request{body: body}
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return req, false
	}
	var seenModel, seenStream, seenMessages bool
	// One pass: the messages array is read element by element as the walk
	// reaches it, not skipped first and read again.
	walkObject(body, i, func(k span, vs int) int {
		switch fieldOf(body, k) {
		case fieldModel:
			ve := valueEnd(body, vs)
			if !seenModel {
				seenModel = true
				req.model, _ = stringValue(body, span{vs, ve})
			}
			return ve
		case fieldStream:
			ve := valueEnd(body, vs)
			if !seenStream {
				seenStream = true
				req.stream = string(body[vs:ve]) == "true"
			}
			return ve
		case fieldMessages:
			if seenMessages || body[vs] != '[' {
				seenMessages = true // the first one counts, as with gjson.Get
				return valueEnd(body, vs)
			}
			seenMessages = true
			req.messages = make([]message, 0, 64)
			ve := walkArray(body, vs, func(es int) int {
				m := parseMessage(body, es)
				req.messages = append(req.messages, m)
				return m.end
			})
			req.array = span{vs, ve}
			return ve
		case fieldTools:
			return keepFirst(&req.tools, vs, valueEnd(body, vs))
		case fieldFunctions:
			return keepFirst(&req.functions, vs, valueEnd(body, vs))
		case fieldPromptCacheKey:
			return keepFirst(&req.cacheKey, vs, valueEnd(body, vs))
		}
		return valueEnd(body, vs)
	})
	return req, req.array.exists()
}

// keepFirst records the value [vs, ve) in *dst unless a member of the same
// name came first (the first one counts, as with gjson.Get), and returns ve.
func keepFirst(dst *span, vs, ve int) int {
	if !dst.exists() {
		*dst = span{vs, ve}
	}
	return ve
}

// parseMessage reads the members ctxpress uses out of the message that
// starts at body[start]; the message's span ends where the walk ends.
func parseMessage(body []byte, start int) message {
	m := message{body: body, span: span{start, 0}, object: body[start] == '{'}
	if !m.object {
		m.end = valueEnd(body, start)
		return m
	}
	var seenRole, seenName, seenID bool
	m.end = walkObject(body, start, func(k span, vs int) int {
		ve := valueEnd(body, vs)
		f := span{vs, ve}
		switch fieldOf(body, k) {
		case fieldRole:
			if !seenRole {
				seenRole = true
				m.role, _ = stringValue(body, f)
			}
		case fieldName:
			if !seenName {
				seenName = true
				m.name, _ = stringValue(body, f)
			}
		case fieldToolCallID:
			if !seenID {
				seenID = true
				m.toolCallID, _ = stringValue(body, f)
			}
		case fieldContent:
			if !m.content.exists() {
				m.content = f
			}
		case fieldToolCalls:
			if !m.toolCalls.exists() && body[f.start] == '[' {
				m.toolCalls = f
			}
		case fieldFunctionCall:
			if !m.functionCall.exists() && body[f.start] == '{' {
				m.functionCall = f
			}
		}
		return ve
	})
	return m
}

// squashablePart returns the text value of a text part of an array content.
func squashablePart(part gjson.Result) (gjson.Result, bool) {
	if !part.IsObject() {
		return gjson.Result{}, false
	}
	switch part.Get("type").String() {
	case "text", "input_text", "output_text":
		if t := part.Get("text"); t.Type == gjson.String {
			return t, true
		}
	}
	return gjson.Result{}, false
}

// contentText returns the text of a content: the string, or its text parts
// joined by newlines. Images and other parts contribute nothing.
func contentText(content gjson.Result) string {
	if content.Type == gjson.String {
		return content.Str
	}
	var b []byte
	content.ForEach(func(_, part gjson.Result) bool {
		if t, ok := squashablePart(part); ok {
			if len(b) > 0 {
				b = append(b, '\n')
			}
			b = append(b, t.Str...)
		}
		return true
	})
	return string(b)
}
