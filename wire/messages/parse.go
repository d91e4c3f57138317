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
	// MessagesArray is the "messages" value; Messages are its elements.
	MessagesArray Span
	Messages      []Message
	// SessionID is metadata.user_id's session_id when user_id is a JSON
	// string holding one (Claude Code's), else "".
	SessionID string
	// Markers counts the cache_control markers in system, tools and
	// messages: Anthropic refuses more than 4.
	Markers int
}

// Parse reads a Messages request body. ok is false when body is not a JSON
// object: the shell then forwards it unchanged.
func Parse(body []byte) (req *Request, ok bool) {
	if !jsonvalid.Valid(body) {
		return nil, false
	}
	return parseValid(body)
}

// parseValid is Parse of a body already known to be valid JSON.
func parseValid(body []byte) (req *Request, ok bool) {
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return nil, false
	}
	req = &Request{Body: body}
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "model":
			req.Model = v.String()
		case "stream":
			req.Stream = v.Type == gjson.True
		case "system":
			req.System = spanOf(v)
			req.Markers += markers(v)
		case "tools":
			req.Tools = spanOf(v)
			req.Markers += markers(v)
		case "metadata":
			if uid := v.Get("user_id"); uid.Type == gjson.String && gjson.Valid(uid.Str) {
				req.SessionID = gjson.Get(uid.Str, "session_id").String()
			}
		case "thinking":
			req.Thinking = spanOf(v)
		case "messages":
			req.MessagesArray = spanOf(v)
			v.ForEach(func(_, m gjson.Result) bool {
				msg := readMessage(m)
				for _, b := range msg.Blocks {
					if b.CacheControl {
						req.Markers++
					}
				}
				req.Messages = append(req.Messages, msg)
				return true
			})
		}
		return true
	})
	return req, true
}

// markers counts the elements of a list (system blocks, tools) that carry
// cache_control.
func markers(v gjson.Result) int {
	n := 0
	if v.IsArray() {
		v.ForEach(func(_, e gjson.Result) bool {
			if e.Get("cache_control").Exists() {
				n++
			}
			return true
		})
	}
	return n
}

func readMessage(m gjson.Result) Message {
	msg := Message{Span: spanOf(m)}
	if !m.IsObject() {
		return msg
	}
	msg.Role = m.Get("role").String()
	c := m.Get("content")
	msg.Content = spanOf(c)
	switch {
	case c.Type == gjson.String:
		msg.Blocks = []Block{{Span: spanOf(c), Type: BlockText, String: true, Content: spanOf(c)}}
	case c.IsArray():
		c.ForEach(func(_, b gjson.Result) bool {
			msg.Blocks = append(msg.Blocks, readBlock(b))
			return true
		})
	}
	return msg
}

func readBlock(b gjson.Result) Block {
	blk := Block{Span: spanOf(b)}
	if !b.IsObject() {
		return blk
	}
	b.ForEach(func(k, f gjson.Result) bool {
		switch k.Str {
		case "type":
			blk.Type = f.String()
		case "id", "tool_use_id":
			blk.ID = f.String()
		case "name":
			blk.Name = f.String()
		case "input":
			blk.Input = spanOf(f)
		case "content", "text":
			blk.Content = spanOf(f)
		case "is_error":
			blk.IsError = f.Type == gjson.True
		case "cache_control":
			blk.CacheControl = true
		}
		return true
	})
	return blk
}

// spanOf is where v's raw bytes sit in the body.
func spanOf(v gjson.Result) Span {
	if !v.Exists() {
		return Span{}
	}
	return Span{Start: v.Index, End: v.Index + len(v.Raw)}
}
