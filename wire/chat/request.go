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
	calls        wire.Range // its tool_calls entries in the parse's callNames
	toolCalls    wire.Span  // assistant `tool_calls` array, or absent
	functionCall wire.Span  // legacy assistant `function_call` object, or absent
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
func fieldOf(b []byte, k wire.Span) int { return fieldByName(wire.KeyName(b, k)) }

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
	p := newParser(body, firstMessages(len(body)) <= smallMessages)
	i := wire.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return p.c, false
	}
	// One pass: the messages array is read element by element as the walk
	// reaches it, not skipped first and read again.
	wire.WalkObject(body, i, p.member)
	return p.finish()
}

// Resume is Parse continued from prev at the end of one of its messages
// (see wire.Resumer): the top-level members before `messages` and the
// messages up to at are prev's; the rest is read from body.
func (f Format) Resume(body []byte, prev *wire.Conversation, at int) (*wire.Conversation, bool, int) {
	prevTop, ok := prev.Resume.(*top)
	k := prev.MessagesEndingAt(at)
	if !ok || k == 0 {
		c, chat := f.Parse(body)
		return c, chat, 0
	}
	p := newParser(body, false)
	p.top, p.seenMessages = *prevTop, true
	*p.res = *prevTop
	p.c.TakeMessages(prev, k, firstMessages(len(body)-at))
	end := wire.WalkArrayAfter(body, at, p.message)
	p.array = wire.Span{Start: p.top.array, End: end}
	wire.WalkObjectAfter(body, end, p.member) // a later `messages` is ignored: the first counts
	c, chat := p.finish()
	return c, chat, k
}

// top is what a parse has read of the top-level members once it reaches
// `messages`: what Resume starts from.
type top struct {
	model                      string
	seenModel, seenStream      bool
	stream                     bool
	tools, functions, cacheKey wire.Span
	array                      int // where the messages array opens
}

// parser is one Parse's (or Resume's) state.
type parser struct {
	body         []byte
	c            *wire.Conversation
	counted      *[2]wire.Span
	small        *smallConversation // a small request's room for its first messages; nil: none
	top          top
	res          *top // where the state at `messages` is kept (the conversation's Resume)
	seenMessages bool
	array        wire.Span
	ns           callNames
}

// newParser makes a parser and its conversation. The two Counted spans
// and the resume state are one allocation, with a small request's first
// messages and items (smallConversation); the conversation, which holds
// the body, is another: a remembered parse keeps the first and never
// the body.
func newParser(body []byte, small bool) *parser {
	p := &parser{body: body, c: &wire.Conversation{Body: body, Priming: replyPriming}}
	if small {
		p.small = &smallConversation{}
		p.counted, p.res = &p.small.counted, &p.small.resume
	} else {
		cc := &struct {
			counted [2]wire.Span
			resume  top
		}{}
		p.counted, p.res = &cc.counted, &cc.resume
	}
	return p
}

// member reads one top-level member (WalkObject's fn).
func (p *parser) member(k wire.Span, vs int) int {
	body := p.body
	switch fieldOf(body, k) {
	case fieldModel:
		ve := wire.ValueEnd(body, vs)
		if !p.top.seenModel {
			p.top.seenModel = true
			p.top.model, _ = wire.StringValue(body, wire.Span{Start: vs, End: ve})
		}
		return ve
	case fieldStream:
		ve := wire.ValueEnd(body, vs)
		if !p.top.seenStream {
			p.top.seenStream = true
			p.top.stream = string(body[vs:ve]) == "true"
		}
		return ve
	case fieldMessages:
		if p.seenMessages || body[vs] != '[' {
			p.seenMessages = true // the first one counts, as with gjson.Get
			return wire.ValueEnd(body, vs)
		}
		p.seenMessages = true
		p.top.array = vs
		*p.res = p.top
		first := firstMessages(len(body) - vs)
		if p.small != nil {
			p.c.Messages, p.c.Items = p.small.messages[:0:first], p.small.items[:0:2*first]
		} else {
			p.c.Messages = make([]wire.Message, 0, first)
			p.c.Items = make([]wire.Item, 0, 2*first)
		}
		ve := wire.WalkArray(body, vs, p.message)
		p.array = wire.Span{Start: vs, End: ve}
		return ve
	case fieldTools:
		return keepFirst(&p.top.tools, vs, wire.ValueEnd(body, vs))
	case fieldFunctions:
		return keepFirst(&p.top.functions, vs, wire.ValueEnd(body, vs))
	case fieldPromptCacheKey:
		return keepFirst(&p.top.cacheKey, vs, wire.ValueEnd(body, vs))
	}
	return wire.ValueEnd(body, vs)
}

// message reads one element of `messages` (WalkArray's fn).
func (p *parser) message(es int) int {
	c := p.c
	if len(c.Messages) == cap(c.Messages) {
		growFor(c, &p.ns, es-p.top.array, len(p.body)-es)
	}
	m := parseMessage(p.body, es, &p.ns)
	addMessage(c, &m, &p.ns)
	return m.End
}

// finish sets what the walk read and returns the conversation.
func (p *parser) finish() (*wire.Conversation, bool) {
	c := p.c
	p.ns.decode(p.body, c.Items)
	*p.counted = [2]wire.Span{p.top.tools, p.top.functions}
	c.Counted = p.counted[:]
	c.Model, c.Stream, c.CacheKey = p.top.model, p.top.stream, p.top.cacheKey
	c.Lead = leadingSystem(c.Messages)
	if p.array.Exists() {
		c.Resume = p.res
	}
	return c, p.array.Exists()
}

// smallConversation is a small request's conversation (one whose
// firstMessages is at most smallMessages) with the room for its first
// messages and items: one allocation for a short request, as a
// question with its system prompt is.
type smallConversation struct {
	counted  [2]wire.Span
	resume   top
	messages [smallMessages]wire.Message
	items    [2 * smallMessages]wire.Item
}

// smallMessages is firstMessages of a body under 2 KiB.
const smallMessages = 3

// firstMessages is the room Parse makes for the messages of an array of
// at most size bytes before it can tell how many there are: one per KiB
// and two more, at most 16 (about an agent's average message size). A
// request of two short messages then costs two Messages and four Items,
// not 16 and 32; a longer one grows (growFor) once its first messages
// tell how many the rest of the bytes hold.
func firstMessages(size int) int {
	return min(16, 2+size/1024)
}

// growFor makes room for the rest of c's messages, their items and calls
// when the messages read so far, from the first read bytes of the array,
// filled it and left bytes follow: each slice grows to its length scaled
// to the whole body, plus an eighth, instead of doubling. A long history
// then grows once or twice, not a dozen times, copying each time. The
// messages grow between 1.25 and 16 times, so a wrong guess costs what
// doubling would, or a bounded waste.
func growFor(c *wire.Conversation, ns *callNames, read, left int) {
	n := len(c.Messages)
	want := n * (read + left) / read
	want = min(max(want+want/8, n+n/4), 16*n)
	c.Messages = regrow(c.Messages, want)
	c.Items = regrow(c.Items, want*len(c.Items)/n+want/8)
	if ns.calls != nil {
		ns.calls = regrow(ns.calls, want*len(ns.calls)/n+want/8)
	}
}

// regrow returns s with capacity want, or s when it has that already.
func regrow[T any](s []T, want int) []T {
	if want <= cap(s) {
		return s
	}
	out := make([]T, len(s), want)
	copy(out, s)
	return out
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
	for n < len(ms) && ms[n].Role == wire.RoleInstruction {
		n++
	}
	return n
}

// parseMessage reads the members ctxpress uses out of the message that
// starts at body[start]; the message's span ends where the walk ends. With
// ns, the calls of its tool_calls array are collected into ns in the same
// pass (m.calls is their range there).
func parseMessage(body []byte, start int, ns *callNames) message {
	m := message{body: body, Span: wire.Span{Start: start}, object: body[start] == '{'}
	if !m.object {
		m.End = wire.ValueEnd(body, start)
		return m
	}
	var seenRole, seenName, seenID bool
	m.End = wire.WalkObject(body, start, func(k wire.Span, vs int) int {
		field := fieldOf(body, k)
		if field == fieldToolCalls && !m.toolCalls.Exists() && body[vs] == '[' && ns != nil {
			m.calls.Start = len(ns.calls)
			ve := ns.walk(body, vs)
			m.calls.End = len(ns.calls)
			m.toolCalls = wire.Span{Start: vs, End: ve}
			return ve
		}
		ve := wire.ValueEnd(body, vs)
		f := wire.Span{Start: vs, End: ve}
		switch field {
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
func addMessage(c *wire.Conversation, m *message, ns *callNames) {
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
			c.Items = appendCalls(c.Items, i, m, ns)
		}
	}
	wm.Items.End = len(c.Items)
	c.Messages = append(c.Messages, wm)
}
