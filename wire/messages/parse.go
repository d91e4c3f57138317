package messages

import (
	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// Span is a [Start, End) range of bytes in a request body.
type Span = wire.Span

// Block types ctxpress looks into; every other block (image, document,
// server tool blocks, future ones) is opaque, and thinking blocks are never
// edited, moved or given a cache_control marker.
const (
	BlockText             = "text"
	BlockToolUse          = "tool_use"
	BlockToolResult       = "tool_result"
	BlockThinking         = "thinking"
	BlockRedactedThinking = "redacted_thinking"
	// BlockCompaction is the provider's summary of everything before it
	// (server-side compaction): the API reads nothing before the latest
	// one, unless its content is null (a failed compaction, a no-op).
	BlockCompaction = "compaction"
)

// Block is one content block of a message, or the whole content when it
// is a string (Type BlockText, String true).
type Block struct {
	Span   Span
	Type   string
	String bool // the message's content is this one string, not a list
	// ID is a tool_use's id or a tool_result's tool_use_id; Name a
	// tool_use's tool.
	ID, Name string
	// Input is a tool_use's input object; Content a tool_result's content
	// (a string or a list of blocks) or a text block's text.
	Input, Content Span
	IsError        bool // a tool_result's is_error
	CacheControl   bool // the block carries a cache_control marker
}

// Message is one element of "messages".
type Message struct {
	Span    Span
	Role    string // user, assistant, or system (Claude Code sends system messages mid-history)
	Content Span
	Blocks  []Block
}

// Request is a Messages request body as ctxpress reads it.
type Request struct {
	Body   []byte
	Model  string
	Stream bool
	System Span // top-level "system": a string or a list of text blocks
	Tools  Span
	// Thinking is the top-level "thinking" object (type, display,
	// block_binding); zero when absent.
	Thinking Span
	// ContextManagement is the top-level "context_management" (edits the
	// server applies: compaction, clearing tool uses or thinking).
	ContextManagement Span
	// MessagesArray is the "messages" value; Messages are its elements.
	MessagesArray Span
	Messages      []Message
	// SessionID is metadata.user_id's session_id when user_id is a JSON
	// string holding one (Claude Code's), else "".
	SessionID string
	// Markers counts the cache_control markers in system, tools and
	// messages: Anthropic refuses more than 4.
	Markers int
	// top is the top-level members read when the messages array opened:
	// where Format.Resume continues from.
	top top
	// countMarkers: Markers is counted (Parse); the Format's parse does
	// not read it, and Claude Code's tools would be walked again for it.
	countMarkers bool
}

// top is what the top-level walk has read when `messages` opens.
type top struct {
	model                   string
	stream                  bool
	system, tools, thinking Span
	contextManagement       Span
	sessionID               string
	array                   int // where the messages array opens
}

// Parse reads a Messages request body. ok is false when body is not a JSON
// object: the shell then forwards it unchanged.
func Parse(body []byte) (req *Request, ok bool) {
	if !jsonvalid.Valid(body) {
		return nil, false
	}
	return parseValid(body, true)
}

// parseValid is Parse of a body already known to be valid JSON. It scans
// the body without decoding it (wire's scanner): only the few short
// strings it names (role, type, ids, names) are decoded, so a turn does
// not unescape the megabytes of tool output it carries. A member sent
// twice counts as its last value, as most JSON readers take it.
func parseValid(body []byte, countMarkers bool) (req *Request, ok bool) {
	i := wire.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, false
	}
	req = &Request{Body: body, countMarkers: countMarkers}
	wire.WalkObject(body, i, req.member)
	return req, true
}

// member reads one top-level member of req's body (WalkObject's fn).
func (req *Request) member(k wire.Span, vs int) int {
	body := req.Body
	name := wire.KeyName(body, k)
	if name == "messages" && body[vs] == '[' {
		// Read once: the walk's end is the array's.
		req.top = top{model: req.Model, stream: req.Stream, system: req.System, tools: req.Tools,
			thinking: req.Thinking, contextManagement: req.ContextManagement, sessionID: req.SessionID, array: vs}
		req.Messages = nil
		ve := wire.WalkArray(body, vs, req.message)
		req.MessagesArray = Span{Start: vs, End: ve}
		return ve
	}
	ve := wire.ValueEnd(body, vs)
	v := Span{Start: vs, End: ve}
	switch name {
	case "model":
		req.Model, _ = wire.StringValue(body, v)
	case "stream":
		req.Stream = string(v.Of(body)) == "true"
	case "system":
		req.System = v
		if req.countMarkers {
			req.Markers += markers(body, v)
		}
	case "tools":
		req.Tools = v
		if req.countMarkers {
			req.Markers += markers(body, v)
		}
	case "metadata":
		req.SessionID = sessionID(body, v)
	case "thinking":
		req.Thinking = v
	case "context_management":
		req.ContextManagement = v
	case "messages":
		req.MessagesArray, req.Messages = v, nil
	}
	return ve
}

// message reads one element of req's messages (WalkArray's fn).
func (req *Request) message(ms int) int {
	msg := readMessage(req.Body, ms)
	for _, b := range msg.Blocks {
		if b.CacheControl && req.countMarkers {
			req.Markers++
		}
	}
	req.Messages = append(req.Messages, msg)
	return msg.Span.End
}

// sessionID is metadata.user_id's session_id, when user_id is a JSON
// string holding an object with one (Claude Code's); "" otherwise.
func sessionID(body []byte, metadata Span) string {
	if body[metadata.Start] != '{' {
		return ""
	}
	uid := gjson.ParseBytes(metadata.Of(body)).Get("user_id")
	if uid.Type != gjson.String || !gjson.Valid(uid.Str) {
		return ""
	}
	return gjson.Get(uid.Str, "session_id").String()
}

// markers counts the elements of a list (system blocks, tools) that carry
// a cache_control marker.
func markers(body []byte, list Span) int {
	n := 0
	if body[list.Start] == '[' {
		wire.WalkArray(body, list.Start, func(es int) int {
			ee := wire.ValueEnd(body, es)
			if body[es] == '{' && marked(body, es) {
				n++
			}
			return ee
		})
	}
	return n
}

// marked reports whether the object that opens at body[i] has a
// cache_control member that is not null.
func marked(body []byte, i int) bool {
	found := false
	wire.WalkObject(body, i, func(k wire.Span, vs int) int {
		ve := wire.ValueEnd(body, vs)
		if wire.KeyIs(body, k, "cache_control") {
			found = string(body[vs:ve]) != "null"
		}
		return ve
	})
	return found
}

// readMessage reads the element of messages that starts at body[i],
// walking each of its bytes once.
func readMessage(body []byte, i int) Message {
	msg := Message{Span: Span{Start: i}}
	if body[i] != '{' {
		msg.Span.End = wire.ValueEnd(body, i)
		return msg
	}
	msg.Span.End = wire.WalkObject(body, i, func(k wire.Span, vs int) int {
		switch wire.KeyName(body, k) {
		case "role":
			ve := wire.ValueEnd(body, vs)
			msg.Role, _ = wire.StringValue(body, Span{Start: vs, End: ve})
			return ve
		case "content":
			msg.Blocks = nil
			switch body[vs] {
			case '"':
				msg.Content = Span{Start: vs, End: wire.StringEnd(body, vs)}
				msg.Blocks = []Block{{Span: msg.Content, Type: BlockText, String: true, Content: msg.Content}}
			case '[':
				msg.Content = Span{Start: vs, End: wire.WalkArray(body, vs, func(bs int) int {
					b := readBlock(body, bs)
					msg.Blocks = append(msg.Blocks, b)
					return b.Span.End
				})}
			default:
				msg.Content = Span{Start: vs, End: wire.ValueEnd(body, vs)}
			}
			return msg.Content.End
		}
		return wire.ValueEnd(body, vs)
	})
	return msg
}

// readBlock reads the content block that starts at body[i], walking each
// of its bytes once.
func readBlock(body []byte, i int) Block {
	blk := Block{Span: Span{Start: i}}
	if body[i] != '{' {
		blk.Span.End = wire.ValueEnd(body, i)
		return blk
	}
	blk.Span.End = wire.WalkObject(body, i, func(k wire.Span, vs int) int {
		ve := wire.ValueEnd(body, vs)
		v := Span{Start: vs, End: ve}
		switch wire.KeyName(body, k) {
		case "type":
			blk.Type, _ = wire.StringValue(body, v)
		case "id", "tool_use_id":
			blk.ID, _ = wire.StringValue(body, v)
		case "name":
			blk.Name, _ = wire.StringValue(body, v)
		case "input":
			blk.Input = v
		case "content", "text":
			blk.Content = v
		case "is_error":
			blk.IsError = string(v.Of(body)) == "true"
		case "cache_control":
			blk.CacheControl = string(v.Of(body)) != "null"
		}
		return ve
	})
	return blk
}
