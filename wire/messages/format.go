package messages

import (
	"crypto/sha256"
	"strings"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// Token accounting. Anthropic does not publish its framing nor an offline
// tokenizer; these follow chat's, and the calibration learnt from the
// usage the upstream reports (input + cache read + cache write) corrects
// what they miss.
const (
	tokensPerMessage = 3
	tokensPerBlock   = 3 // a tool_use or tool_result block's framing
	replyPriming     = 3
	// imageBlockTokens is what an image block is counted as: Anthropic's
	// cost of an image of about 1.15 megapixels, the size it scales
	// larger images down to. The real cost depends on the image, which
	// ctxpress does not decode.
	imageBlockTokens = 1600
)

// Format is the Messages adapter of wire.Format. Every element of
// `messages` is a message of the neutral conversation and every content
// block one item: text blocks are user or assistant text, a tool_use a
// call (its input object the arguments), a tool_result a result (a user
// message of tool_result blocks is a tool message, one item per result),
// and thinking, redacted_thinking, image, document and any other block
// are opaque, never edited. A string content is one text item, as the
// API reads it. The top-level `system` is the instructions' own slot
// (SystemSlot): the summary block is appended to it, and Lead is 0. A
// role:"system" message in the history (Claude Code's messages[1]) is a
// standing instruction message (StandingInstructions). Thinking blocks are
// bound to the history before them (Item.Bound), and so is the history of
// a request that asks for thinking (Conversation.Bound).
type Format struct{}

var _ wire.Resumer = Format{}

// Name names the format.
func (Format) Name() string { return "messages" }

// Parse reads a Messages body; false when it is not an object with a
// `messages` array.
func (Format) Parse(body []byte) (*wire.Conversation, bool) {
	req, ok := parseValid(body, false)
	if !ok || !req.MessagesArray.Exists() || body[req.MessagesArray.Start] != '[' {
		return &wire.Conversation{Body: body}, false
	}
	c := conversation(req)
	c.Messages = make([]wire.Message, 0, len(req.Messages))
	return finish(c, req), true
}

// Resume is Parse continued from prev at the end of one of its messages
// (see wire.Resumer): the top-level members before `messages` and the
// messages up to at are prev's; the rest is read from body.
func (f Format) Resume(body []byte, prev *wire.Conversation, at int) (*wire.Conversation, bool, int) {
	t, ok := prev.Resume.(*top)
	k := prev.MessagesEndingAt(at)
	if !ok || k == 0 {
		c, chat := f.Parse(body)
		return c, chat, 0
	}
	req := &Request{Body: body, Model: t.model, Stream: t.stream, System: t.system, Tools: t.tools,
		Thinking: t.thinking, ContextManagement: t.contextManagement, SessionID: t.sessionID, top: *t}
	end := wire.WalkArrayAfter(body, at, req.message)
	req.MessagesArray = Span{Start: t.array, End: end}
	wire.WalkObjectAfter(body, end, req.member)
	if req.MessagesArray.Start != t.array {
		c, chat := f.Parse(body) // a later `messages` replaces this one
		return c, chat, 0
	}
	c := conversation(req)
	c.TakeMessages(prev, k, len(req.Messages))
	if c.AfterCompaction = prev.AfterCompaction; c.AfterCompaction > k {
		// prev's compaction was in a message not taken: read the body
		// whole (rare: the compaction is in the last message).
		c, chat := f.Parse(body)
		return c, chat, 0
	}
	return finish(c, req), true, k
}

// conversation is the conversation of req, a Messages request with a
// `messages` array, before its messages are added.
func conversation(req *Request) *wire.Conversation {
	resume := req.top // not &req.top: a remembered parse keeps it, and never the body
	c := &wire.Conversation{Body: req.Body, Model: req.Model, Stream: req.Stream, Priming: replyPriming,
		SystemSlot: true, SessionID: req.SessionID, StandingInstructions: true, DropsBeforeCompaction: true, Resume: &resume}
	for _, s := range []Span{req.System, req.Tools} {
		if s.Exists() {
			c.Counted = append(c.Counted, s)
		}
	}
	return c
}

// finish adds req's messages to c, and returns c bound when the request
// asks for thinking or any of its items is bound.
func finish(c *wire.Conversation, req *Request) *wire.Conversation {
	for i := range req.Messages {
		addMessage(c, &req.Messages[i])
	}
	c.Bound = thinkingOn(c.Body, req.Thinking)
	for _, it := range c.Items {
		c.Bound = c.Bound || it.Bound
	}
	c.ProviderCompacts = compactsOnServer(c.Body, req.ContextManagement)
	return c
}

// compactionBlock reports whether b is a compaction block the API reads
// as one: a failed compaction (content null) is a no-op.
func compactionBlock(body []byte, b *Block) bool {
	return b.Type == BlockCompaction && b.Content.Exists() && string(b.Content.Of(body)) != "null"
}

// compactsOnServer reports whether context_management asks the server to
// compact the conversation (an edit of type compact_*, such as
// compact_20260112); clearing tool uses or thinking does not.
func compactsOnServer(body []byte, s Span) bool {
	compacts := false
	value(body, s).Get("edits").ForEach(func(_, e gjson.Result) bool {
		compacts = strings.HasPrefix(e.Get("type").Str, "compact_")
		return !compacts
	})
	return compacts
}

// thinkingOn reports whether the request asks for thinking (type enabled
// or adaptive): its answers' thinking blocks come back bound to the
// history, so the history is bound from the first turn on.
func thinkingOn(body []byte, s Span) bool {
	switch value(body, s).Get("type").String() {
	case "enabled", "adaptive":
		return true
	}
	return false
}

// addMessage adds message m and its blocks to c.
func addMessage(c *wire.Conversation, m *Message) {
	msg := wire.Message{Span: m.Span, Object: c.Body[m.Span.Start] == '{', WireRole: m.Role}
	msg.Items.Start = len(c.Items)
	kind := wire.KindOpaque
	switch m.Role {
	case "user":
		msg.Role, kind = wire.RoleUser, wire.KindUser
	case "assistant":
		msg.Role, kind = wire.RoleAssistant, wire.KindAssistant
	case "system":
		msg.Role, kind = wire.RoleInstruction, wire.KindInstruction
	}
	for _, b := range m.Blocks {
		it := wire.Item{Kind: wire.KindOpaque, Message: len(c.Messages), Span: b.Span}
		switch b.Type {
		case BlockText:
			if b.Content.Exists() && c.Body[b.Content.Start] == '"' {
				it.Kind, it.Content = kind, b.Content
			}
		case BlockToolUse:
			if msg.Role == wire.RoleAssistant {
				it.Kind, it.CallID, it.Tool, it.Args = wire.KindToolCall, b.ID, b.Name, b.Input
			}
		case BlockThinking, BlockRedactedThinking:
			it.Bound = msg.Role == wire.RoleAssistant
		case BlockCompaction:
			if msg.Role == wire.RoleAssistant && compactionBlock(c.Body, &b) {
				c.AfterCompaction = len(c.Messages) + 1
			}
		case BlockToolResult:
			if msg.Role == wire.RoleUser || msg.Role == wire.RoleTool {
				// A user message that answers calls is a tool message
				// (the compactor keeps it with its calls).
				msg.Role, msg.WireRole = wire.RoleTool, "tool"
				it.Kind, it.CallID, it.Content = wire.KindToolResult, b.ID, b.Content
			}
		}
		c.Items = append(c.Items, it)
	}
	msg.Items.End = len(c.Items)
	c.Messages = append(c.Messages, msg)
}

// value is the JSON value at s, its Index the offset of s in the body.
func value(body []byte, s wire.Span) gjson.Result {
	if !s.Exists() {
		return gjson.Result{}
	}
	r := gjson.ParseBytes(body[s.Start:s.End])
	r.Index = s.Start
	return r
}

// Overhead is message m's tokens besides its text contents: framing and
// role, a tool_use's name and input, a tool_result's framing, and each
// opaque block (a thinking block's text, an image at imageBlockTokens,
// anything else as its raw JSON).
func (Format) Overhead(c *wire.Conversation, m int, count wire.Count) int {
	msg := c.Messages[m]
	if !msg.Object {
		return tokensPerMessage + count(string(c.Bytes(m)))
	}
	role := msg.WireRole
	if msg.Role == wire.RoleTool {
		role = "user"
	}
	n := tokensPerMessage + count(role)
	for i := msg.Items.Start; i < msg.Items.End; i++ {
		it := c.Items[i]
		switch it.Kind {
		case wire.KindToolCall:
			n += tokensPerBlock + count(it.Tool) + count(string(it.Args.Of(c.Body)))
		case wire.KindToolResult:
			n += tokensPerBlock
		case wire.KindOpaque:
			n += opaqueTokens(value(c.Body, it.Span), count)
		}
	}
	return n
}

// opaqueTokens counts a block the core does not look into.
func opaqueTokens(b gjson.Result, count wire.Count) int {
	switch b.Get("type").String() {
	case BlockThinking:
		return count(b.Get("thinking").String())
	case BlockRedactedThinking:
		return 0 // encrypted: its size says nothing the calibration cannot
	case BlockCompaction:
		// What the model reads is the summary; encrypted_content is
		// the provider's own state.
		return count(b.Get("content").String())
	case "image":
		return imageBlockTokens
	}
	return count(b.Raw)
}

// textBlock reports whether b is a text block with a string text, and
// returns the text.
func textBlock(b gjson.Result) (gjson.Result, bool) {
	if !b.IsObject() || b.Get("type").String() != BlockText {
		return gjson.Result{}, false
	}
	t := b.Get("text")
	return t, t.Type == gjson.String
}

// Parts returns item it's content part by part: a string is one text
// part; a list one part per block, text blocks as text, an image at
// imageBlockTokens, any other block as its raw JSON.
func (Format) Parts(c *wire.Conversation, it int, count wire.Count) []wire.Part {
	v := value(c.Body, c.Items[it].Content)
	switch {
	case v.Type == gjson.String:
		return []wire.Part{{IsText: true, Text: v.Str, Span: c.Items[it].Content}}
	case v.IsArray():
		var parts []wire.Part
		v.ForEach(func(_, b gjson.Result) bool {
			switch t, ok := textBlock(b); {
			case ok:
				parts = append(parts, wire.Part{IsText: true, Text: t.Str, Span: wire.Span{Start: t.Index, End: t.Index + len(t.Raw)}})
			case count == nil:
				parts = append(parts, wire.Part{})
			case b.Get("type").String() == "image":
				parts = append(parts, wire.Part{Tokens: imageBlockTokens})
			default:
				parts = append(parts, wire.Part{Tokens: count(b.Raw)})
			}
			return true
		})
		return parts
	case v.Exists() && v.Type != gjson.Null && count != nil:
		return []wire.Part{{Tokens: count(v.Raw)}}
	}
	return nil
}

// Text is item it's content as plain text: the string, or its text
// blocks joined by newlines.
func (f Format) Text(c *wire.Conversation, it int) string {
	var texts []string
	for _, p := range f.Parts(c, it, nil) {
		if p.IsText {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// Arguments is tool_use item it's input object as the model wrote it.
func (Format) Arguments(c *wire.Conversation, it int) string {
	return string(c.Items[it].Args.Of(c.Body))
}

// CanonicalArguments is tool_use item it's input in canonical form; nil
// when it has none.
func (Format) CanonicalArguments(c *wire.Conversation, it int) []byte {
	a := c.Items[it].Args
	if !a.Exists() {
		return nil
	}
	return wire.AppendCanonical(nil, value(c.Body, a))
}

// Digest is the sha256 of message m's canonical form: cache_control
// markers left out (Claude Code moves its breakpoints to the newest block
// every turn) and a string content, of the message or of a tool_result,
// taken as the one text block it stands for (Claude Code sends a content
// as a string on one turn and as a block list on the next), as the API
// reads them.
func (Format) Digest(c *wire.Conversation, m int) [sha256.Size]byte {
	return sha256.Sum256(appendCanonicalObject(nil, value(c.Body, c.Messages[m].Span), true))
}

// appendCanonicalObject appends the canonical form of v with
// cache_control left out; when v is an object with a content (a message,
// or with blocks false a tool_result) the content as appendCanonicalContent
// has it. Anything else is as wire.AppendCanonicalSkip has it.
func appendCanonicalObject(dst []byte, v gjson.Result, message bool) []byte {
	if !v.IsObject() {
		return wire.AppendCanonicalSkip(dst, v, "cache_control")
	}
	return wire.AppendCanonicalMembers(dst, v, "cache_control", func(dst []byte, key string, e gjson.Result) []byte {
		if key == "content" {
			return appendCanonicalContent(dst, e, message)
		}
		return wire.AppendCanonicalSkip(dst, e, "cache_control")
	})
}

// appendCanonicalContent appends a content: a string as the list of the
// one text block it stands for, a list block by block (with blocks, a
// message's: a tool_result among them has its own content so too).
func appendCanonicalContent(dst []byte, v gjson.Result, blocks bool) []byte {
	switch {
	case v.Type == gjson.String:
		dst = append(dst, `[{"text":`...)
		dst = wire.AppendJSONString(dst, v.Str)
		return append(dst, `,"type":"text"}]`...)
	case v.IsArray():
		dst = append(dst, '[')
		first := true
		v.ForEach(func(_, b gjson.Result) bool {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			if blocks && b.Get("type").String() == BlockToolResult {
				dst = appendCanonicalObject(dst, b, false)
			} else {
				dst = wire.AppendCanonicalSkip(dst, b, "cache_control")
			}
			return true
		})
		return append(dst, ']')
	}
	return wire.AppendCanonicalSkip(dst, v, "cache_control")
}
