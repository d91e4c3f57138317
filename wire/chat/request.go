package chat

import (
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// Format is the chat-completions adapter of wire.Format. The zero value is
// ready to use.
type Format struct{}

var _ wire.Format = Format{}

// Name returns "chat".
func (Format) Name() string { return "chat" }

// Token accounting constants, after the OpenAI cookbook's
// num_tokens_from_messages: every message costs 3 tokens of framing, a name
// 1 more, and the reply is primed with 3.
const (
	tokensPerMessage = 3
	tokensPerName    = 1
	replyPriming     = 3
	// imagePartTokens is what an image_url part is counted as: OpenAI's
	// base cost of a low-detail image. The real cost depends on the image
	// size and detail, which ctxpress does not fetch.
	imagePartTokens = 85
)

// message is one element of `messages` as the adapter reads it. Fields
// ctxpress does not know are not represented: they are never touched,
// because edits only ever replace the bytes of content (or of a text part
// inside it).
type message struct {
	body         []byte // the whole request body
	wire.Span           // the element's bytes in body
	object       bool   // false for an element that is not a JSON object (passed on as is)
	role         string // "" when absent or not a string
	name         string // `name`: a participant, or the function of a legacy role:function result
	toolCallID   string // `tool_call_id` of a role:tool result
	content      wire.Span
	toolCalls    wire.Span // assistant `tool_calls` array, or absent
	functionCall wire.Span // legacy assistant `function_call` object, or absent
}

// bytes returns the message as sent.
func (m *message) bytes() []byte { return m.Of(m.body) }

// result returns the value at s decoded by gjson, its Index the offset of
// s in the body (so nested values carry body offsets too). An absent span
// gives a Result that does not exist.
func result(body []byte, s wire.Span) gjson.Result {
	if !s.Exists() {
		return gjson.Result{}
	}
	r := gjson.Parse(string(body[s.Start:s.End]))
	r.Index = s.Start
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
	fieldID
	fieldFunction
	fieldArguments
)

// fieldOf returns which member the key span names; an escaped key is
// decoded first, as gjson would.
func fieldOf(b []byte, k wire.Span) int {
	raw := b[k.Start+1 : k.End-1]
	for _, c := range raw {
		if c == '\\' {
			return fieldByName(gjson.Parse(string(b[k.Start:k.End])).Str)
		}
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
	case "id":
		return fieldID
	case "function":
		return fieldFunction
	case "arguments":
		return fieldArguments
	}
	return fieldOther
}

// Parse reads a chat request out of body. It expects well-formed JSON
// (call jsonvalid.Valid first) and reports false when the body is not an
// object with a `messages` array. For duplicate keys the first one wins,
// as with gjson.Get.
func (Format) Parse(body []byte) (*wire.Conversation, bool) {
	c := &wire.Conversation{Body: body, Priming: replyPriming}
	i := wire.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return c, false
	}
	var seenModel, seenStream, seenMessages bool
	var array, tools, functions wire.Span
	// One pass: the messages array is read element by element as the walk
	// reaches it, not skipped first and read again.
	wire.WalkObject(body, i, func(k wire.Span, vs int) int {
		switch fieldOf(body, k) {
		case fieldModel:
			ve := wire.ValueEnd(body, vs)
			if !seenModel {
				seenModel = true
				c.Model, _ = wire.StringValue(body, wire.Span{Start: vs, End: ve})
			}
			return ve
		case fieldStream:
			ve := wire.ValueEnd(body, vs)
			if !seenStream {
				seenStream = true
				c.Stream = string(body[vs:ve]) == "true"
			}
			return ve
		case fieldMessages:
			if seenMessages || body[vs] != '[' {
				seenMessages = true // the first one counts, as with gjson.Get
				return wire.ValueEnd(body, vs)
			}
			seenMessages = true
			c.Messages = make([]wire.Message, 0, 64)
			c.Items = make([]wire.Item, 0, 96)
			ve := wire.WalkArray(body, vs, func(es int) int {
				m := parseMessage(body, es)
				addMessage(c, &m)
				return m.End
			})
			array = wire.Span{Start: vs, End: ve}
			return ve
		case fieldTools:
			return keepFirst(&tools, vs, wire.ValueEnd(body, vs))
		case fieldFunctions:
			return keepFirst(&functions, vs, wire.ValueEnd(body, vs))
		case fieldPromptCacheKey:
			return keepFirst(&c.CacheKey, vs, wire.ValueEnd(body, vs))
		}
		return wire.ValueEnd(body, vs)
	})
	c.Counted = []wire.Span{tools, functions}
	c.Lead = leadingSystem(c.Messages)
	return c, array.Exists()
}

// keepFirst records the value [vs, ve) in *dst unless a member of the same
// name came first (the first one counts, as with gjson.Get), and returns ve.
func keepFirst(dst *wire.Span, vs, ve int) int {
	if !dst.Exists() {
		*dst = wire.Span{Start: vs, End: ve}
	}
	return ve
}

// leadingSystem is how many messages at the start are system/developer
// messages.
func leadingSystem(ms []wire.Message) int {
	n := 0
	for n < len(ms) && (ms[n].WireRole == "system" || ms[n].WireRole == "developer") {
		n++
	}
	return n
}

// parseMessage reads the members ctxpress uses out of the message that
// starts at body[start]; the message's span ends where the walk ends.
func parseMessage(body []byte, start int) message {
	m := message{body: body, Span: wire.Span{Start: start}, object: body[start] == '{'}
	if !m.object {
		m.End = wire.ValueEnd(body, start)
		return m
	}
	var seenRole, seenName, seenID bool
	m.End = wire.WalkObject(body, start, func(k wire.Span, vs int) int {
		ve := wire.ValueEnd(body, vs)
		f := wire.Span{Start: vs, End: ve}
		switch fieldOf(body, k) {
		case fieldRole:
			if !seenRole {
				seenRole = true
				m.role, _ = wire.StringValue(body, f)
			}
		case fieldName:
			if !seenName {
				seenName = true
				m.name, _ = wire.StringValue(body, f)
			}
		case fieldToolCallID:
			if !seenID {
				seenID = true
				m.toolCallID, _ = wire.StringValue(body, f)
			}
		case fieldContent:
			if !m.content.Exists() {
				m.content = f
			}
		case fieldToolCalls:
			if !m.toolCalls.Exists() && body[f.Start] == '[' {
				m.toolCalls = f
			}
		case fieldFunctionCall:
			if !m.functionCall.Exists() && body[f.Start] == '{' {
				m.functionCall = f
			}
		}
		return ve
	})
	return m
}

// roleOf maps a chat role to the neutral one.
func roleOf(role string) wire.Role {
	switch role {
	case "system", "developer":
		return wire.RoleInstruction
	case "user":
		return wire.RoleUser
	case "assistant":
		return wire.RoleAssistant
	case "tool", "function":
		return wire.RoleTool
	}
	return wire.RoleOther
}

// addMessage appends m and its items to c: a system/developer, user or
// assistant message is one text item (its content), an assistant's calls
// follow as call items (each tool_calls entry, then a legacy
// function_call), a tool or function message is one result item, and
// any other object one opaque item. A non-object has no item.
func addMessage(c *wire.Conversation, m *message) {
	i := len(c.Messages)
	wm := wire.Message{Span: m.Span, Role: roleOf(m.role), WireRole: m.role, Name: m.name, Object: m.object}
	wm.Items.Start = len(c.Items)
	if m.object {
		it := wire.Item{Message: i, Span: m.Span, Content: m.content}
		switch wm.Role {
		case wire.RoleInstruction:
			it.Kind = wire.KindInstruction
		case wire.RoleUser:
			it.Kind = wire.KindUser
		case wire.RoleAssistant:
			it.Kind = wire.KindAssistant
		case wire.RoleTool:
			it.Kind, it.CallID, it.Tool, it.ByName = wire.KindToolResult, m.toolCallID, m.name, m.role == "function"
		}
		c.Items = append(c.Items, it)
		if wm.Role == wire.RoleAssistant {
			c.Items = appendCalls(c.Items, i, m)
		}
	}
	wm.Items.End = len(c.Items)
	c.Messages = append(c.Messages, wm)
}

// appendCalls appends the calls assistant message m (index i) makes:
// each tool_calls entry (id, function name and arguments, as gjson reads
// them: the first member of a name wins) and a legacy function_call
// (ByName, no id).
func appendCalls(items []wire.Item, i int, m *message) []wire.Item {
	b := m.body
	if m.toolCalls.Exists() {
		wire.WalkArray(b, m.toolCalls.Start, func(es int) int {
			ee := wire.ValueEnd(b, es)
			it := wire.Item{Kind: wire.KindToolCall, Message: i, Span: wire.Span{Start: es, End: ee}}
			if b[es] == '{' {
				var id, fn wire.Span
				wire.WalkObject(b, es, func(k wire.Span, vs int) int {
					ve := wire.ValueEnd(b, vs)
					switch fieldOf(b, k) {
					case fieldID:
						keepFirst(&id, vs, ve)
					case fieldFunction:
						keepFirst(&fn, vs, ve)
					}
					return ve
				})
				if id.Exists() {
					it.CallID = stringOf(b, id)
				}
				if fn.Exists() && b[fn.Start] == '{' {
					it.Tool, it.Args = callMembers(b, fn)
				}
			}
			it.ByName = it.CallID == ""
			items = append(items, it)
			return ee
		})
	}
	if fc := m.functionCall; fc.Exists() {
		it := wire.Item{Kind: wire.KindToolCall, Message: i, Span: fc, ByName: true}
		it.Tool, it.Args = callMembers(b, fc)
		items = append(items, it)
	}
	return items
}

// callMembers reads a function object's name and the span of its
// arguments.
func callMembers(b []byte, fn wire.Span) (name string, args wire.Span) {
	var ns wire.Span
	wire.WalkObject(b, fn.Start, func(k wire.Span, vs int) int {
		ve := wire.ValueEnd(b, vs)
		switch fieldOf(b, k) {
		case fieldName:
			keepFirst(&ns, vs, ve)
		case fieldArguments:
			keepFirst(&args, vs, ve)
		}
		return ve
	})
	if ns.Exists() {
		name = stringOf(b, ns)
	}
	return name, args
}

// stringOf is gjson's Result.String of the value at s: a string decoded,
// null "", anything else as gjson renders it.
func stringOf(b []byte, s wire.Span) string {
	if v, ok := wire.StringValue(b, s); ok {
		return v
	}
	return gjson.ParseBytes(b[s.Start:s.End]).String()
}
