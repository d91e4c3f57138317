package responses

import (
	"crypto/sha256"
	"strings"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// Token accounting. OpenAI does not publish the Responses API's framing;
// these follow chat's, and the calibration learnt from the usage the
// upstream reports corrects what they miss.
const (
	tokensPerItem   = 3
	replyPriming    = 3
	imagePartTokens = 85
)

// Format is the Responses adapter. Every input item is a message of the
// neutral conversation, except that a reasoning item and the item after
// it are one message: the upstream refuses a reasoning item "provided
// without its required following item", so no cut may fall between them.
type Format struct{}

var _ wire.Resumer = Format{}

// Name names the format.
func (Format) Name() string { return "responses" }

// Parse reads a Responses body. A request whose input is a plain string
// has no messages to edit; it is still counted and recorded.
func (Format) Parse(body []byte) (*wire.Conversation, bool) {
	req, ok := parseValid(body)
	if !ok || !req.Input.Exists() {
		return &wire.Conversation{Body: body}, false
	}
	c := conversation(req)
	if req.InputIsText {
		c.Counted = append(c.Counted, req.Input)
		return c, true
	}
	return finish(c, req.Items), true
}

// Resume is Parse continued from prev at the end of one of its messages
// (see wire.Resumer): the top-level members before `input` and the
// messages up to at are prev's; the rest is read from body.
func (f Format) Resume(body []byte, prev *wire.Conversation, at int) (*wire.Conversation, bool, int) {
	t, ok := prev.Resume.(*top)
	k := prev.MessagesEndingAt(at)
	if ok && k > 0 && reasoningLast(body, prev, k-1) {
		// A reasoning item that ended prev goes with the item after it
		// here: its message is read again.
		k--
		at = prev.Messages[max(k-1, 0)].End
	}
	if !ok || k == 0 || at <= t.array {
		c, chat := f.Parse(body)
		return c, chat, 0
	}
	req := &Request{Body: body, Model: t.model, Stream: t.stream, Store: t.store, Stored: t.stored,
		PreviousResponseID: t.previousResponseID, Conversation: t.conversation, PromptCacheKey: t.promptCacheKey,
		PromptCacheKeySpan: t.promptCacheKeySpan, Instructions: t.instructions, Tools: t.tools, top: *t}
	end := wire.WalkArrayAfter(body, at, req.item)
	req.Input = Span{Start: t.array, End: end}
	wire.WalkObjectAfter(body, end, req.member)
	if req.Input.Start != t.array {
		c, chat := f.Parse(body) // a later `input` is the one that counts
		return c, chat, 0
	}
	c := conversation(req)
	c.TakeMessages(prev, k, len(req.Items))
	if c.AfterCompaction, c.ProviderCompacts = prev.AfterCompaction, prev.ProviderCompacts; c.AfterCompaction > k || c.ProviderCompacts {
		// What prev found may lie in a message not taken: read the body
		// whole (rare: a compaction or a trigger ends a turn).
		c, chat := f.Parse(body)
		return c, chat, 0
	}
	return finish(c, req.Items), true, k
}

// reasoningLast reports whether message m of c ends with a reasoning item.
func reasoningLast(body []byte, c *wire.Conversation, m int) bool {
	r := c.Messages[m].Items
	return r.End > r.Start && gjson.GetBytes(c.Items[r.End-1].Span.Of(body), "type").Str == KindReasoning
}

// conversation is the conversation of req before its messages are added.
func conversation(req *Request) *wire.Conversation {
	c := &wire.Conversation{Body: req.Body, Model: req.Model, Stream: req.Stream, Priming: replyPriming,
		CacheKey: req.PromptCacheKeySpan, Counted: []wire.Span{req.Instructions, req.Tools},
		ServerHistory: req.PreviousResponseID != "" || req.Conversation}
	if !req.InputIsText && req.Body[req.Input.Start] == '[' {
		resume := req.top // a copy: a remembered parse keeps it, and never the body
		c.Resume = &resume
	}
	return c
}

// finish adds the messages made of items to c: each item one, except that
// a reasoning item goes with the item after it. items are the request's
// items after those of c's messages (all of them but for a Resume).
func finish(c *wire.Conversation, items []Item) *wire.Conversation {
	for i := 0; i < len(items); {
		j := i + 1
		for j-1 < len(items) && items[j-1].Kind == KindReasoning && j < len(items) {
			j++ // a reasoning item goes with the item after it
		}
		addMessage(c, items[i:j])
		i = j
	}
	c.Lead = 0
	for c.Lead < len(c.Messages) && c.Messages[c.Lead].Role == wire.RoleInstruction {
		c.Lead++
	}
	return c
}

// addMessage adds the neutral message made of the input items its.
func addMessage(c *wire.Conversation, its []Item) {
	m := wire.Message{Span: wire.Span{Start: its[0].Span.Start, End: its[len(its)-1].Span.End},
		Object: its[len(its)-1].Kind != "", Role: wire.RoleOther}
	m.Items.Start = len(c.Items)
	for _, it := range its {
		item := wire.Item{Kind: wire.KindOpaque, Message: len(c.Messages), Span: it.Span}
		switch {
		case it.IsCompaction():
			c.AfterCompaction = len(c.Messages) + 1
		case it.Kind == KindCompactionTrigger:
			c.ProviderCompacts = true
		case it.Kind == KindMessage:
			m.WireRole = it.Role
			m.Role, item.Kind = roleOf(it.Role)
			item.Content = it.Content
		case it.IsCall():
			m.Role, m.WireRole = wire.RoleAssistant, "assistant"
			item.Kind, item.CallID, item.Tool, item.Args = wire.KindToolCall, it.CallID, it.Name, it.Args
		case it.IsOutput():
			m.Role, m.WireRole = wire.RoleTool, "tool"
			item.Kind, item.CallID, item.Content = wire.KindToolResult, it.CallID, it.Content
		}
		c.Items = append(c.Items, item)
	}
	m.Items.End = len(c.Items)
	c.Messages = append(c.Messages, m)
}

// roleOf maps a message item's role to the neutral role and item kind.
func roleOf(role string) (wire.Role, wire.Kind) {
	switch role {
	case "system", "developer":
		return wire.RoleInstruction, wire.KindInstruction
	case "user":
		return wire.RoleUser, wire.KindUser
	case "assistant":
		return wire.RoleAssistant, wire.KindAssistant
	}
	return wire.RoleOther, wire.KindOpaque
}

func value(body []byte, s wire.Span) gjson.Result {
	if !s.Exists() {
		return gjson.Result{}
	}
	r := gjson.ParseBytes(body[s.Start:s.End])
	r.Index = s.Start
	return r
}

// Overhead is message m's tokens besides its contents: per item framing,
// a message's role, a call's tool name and arguments, and an opaque item
// (reasoning, compaction, unknown) as its raw text.
func (Format) Overhead(c *wire.Conversation, m int, count wire.Count) int {
	msg := c.Messages[m]
	if !msg.Object {
		return tokensPerItem + count(string(c.Bytes(m)))
	}
	n := 0
	for i := msg.Items.Start; i < msg.Items.End; i++ {
		it := c.Items[i]
		n += tokensPerItem
		switch it.Kind {
		case wire.KindOpaque:
			n += opaqueTokens(c.Body, it.Span, count)
		case wire.KindToolCall:
			if it.Args.Exists() {
				n += count(it.Tool) + count(argsText(value(c.Body, it.Args)))
			} else {
				n += count(string(it.Span.Of(c.Body))) // a shell, apply_patch or computer call: its action
			}
		case wire.KindToolResult:
			if !it.Content.Exists() {
				n += count(string(it.Span.Of(c.Body))) // an output sent as it is
			}
		default:
			n += count(msg.WireRole)
		}
	}
	return n
}

// encryptedTokensPerByte is what a compaction item's encrypted_content
// stands for: base64 (3 bytes in 4) of an encryption of about as many
// bytes of text, at about 4 bytes a token. Counted as text, the blob is
// several times what the provider counts; calibration corrects the rest.
const encryptedTokensPerByte = 3.0 / 16

// opaqueTokens counts an item the core does not look into: a compaction
// by its encrypted_content's size, anything else as its raw text.
func opaqueTokens(body []byte, s wire.Span, count wire.Count) int {
	raw := s.Of(body)
	if body[s.Start] == '{' {
		if t := gjson.GetBytes(raw, "type").Str; t == KindCompaction || t == KindCompactionSummary {
			enc := gjson.GetBytes(raw, "encrypted_content")
			return int(float64(len(enc.Str))*encryptedTokensPerByte) + count(t)
		}
	}
	return count(string(raw))
}

func argsText(v gjson.Result) string {
	if v.Type == gjson.String {
		return v.Str
	}
	return v.Raw
}

// isTextPart reports whether a content part is text: input_text,
// output_text (or a bare text) with a string text.
func isTextPart(p gjson.Result) bool {
	switch p.Get("type").String() {
	case "input_text", "output_text", "text":
		return p.Get("text").Type == gjson.String
	}
	return false
}

// Parts returns item it's content part by part: a string is one text
// part; an array one part per element, text parts as text, an image at
// its nominal cost, anything else as its raw JSON.
func (Format) Parts(c *wire.Conversation, it int, count wire.Count) []wire.Part {
	v := value(c.Body, c.Items[it].Content)
	switch {
	case v.Type == gjson.String:
		return []wire.Part{{IsText: true, Text: v.Str, Span: c.Items[it].Content}}
	case v.IsArray():
		var parts []wire.Part
		v.ForEach(func(_, p gjson.Result) bool {
			switch {
			case isTextPart(p):
				t := p.Get("text")
				parts = append(parts, wire.Part{IsText: true, Text: t.Str, Span: wire.Span{Start: t.Index, End: t.Index + len(t.Raw)}})
			case p.Get("type").String() == "input_image":
				parts = append(parts, wire.Part{Tokens: imagePartTokens})
			case count != nil:
				parts = append(parts, wire.Part{Tokens: count(p.Raw)})
			default:
				parts = append(parts, wire.Part{})
			}
			return true
		})
		return parts
	case v.Exists() && v.Type != gjson.Null && count != nil:
		return []wire.Part{{Tokens: count(v.Raw)}}
	}
	return nil
}

// Text is item it's content as plain text.
func (f Format) Text(c *wire.Conversation, it int) string {
	var texts []string
	for _, p := range f.Parts(c, it, nil) {
		if p.IsText {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// Arguments is call item it's arguments as the model wrote them: a
// function call's arguments, a custom call's input, a shell call's action.
func (Format) Arguments(c *wire.Conversation, it int) string {
	it0 := c.Items[it]
	if !it0.Args.Exists() {
		// A local shell, shell or computer call's action, an apply_patch
		// call's operation: what the call does.
		item := value(c.Body, it0.Span)
		if a := item.Get("action"); a.Exists() {
			return a.Raw
		}
		return item.Get("operation").Raw
	}
	return argsText(value(c.Body, it0.Args))
}

// CanonicalArguments is call item it's arguments in canonical form: JSON
// arguments canonical, other text as is after a NUL.
func (f Format) CanonicalArguments(c *wire.Conversation, it int) []byte {
	a := f.Arguments(c, it)
	if a == "" {
		return nil
	}
	if jsonvalid.Valid([]byte(a)) {
		return wire.AppendCanonical(nil, gjson.Parse(a))
	}
	return append([]byte{0}, a...)
}

// Digest is the sha256 of message m's items in canonical form.
func (Format) Digest(c *wire.Conversation, m int) [sha256.Size]byte {
	msg := c.Messages[m]
	var b []byte
	for i := msg.Items.Start; i < msg.Items.End; i++ {
		b = wire.AppendCanonical(b, gjson.ParseBytes(c.Items[i].Span.Of(c.Body)))
	}
	return sha256.Sum256(b)
}

// textPart renders one content part of text for a message of role.
func textPart(role, text string) []byte {
	typ := "input_text"
	if role == "assistant" {
		typ = "output_text"
	}
	b := append([]byte(`{"type":"`), typ...)
	b = append(b, `","text":`...)
	b = wire.AppendJSONString(b, text)
	return append(b, '}')
}

// ReplaceContent makes item it's content text, in its shape: a string
// stays a string, an array becomes one text part.
func (Format) ReplaceContent(c *wire.Conversation, it int, text string) wire.Edit {
	s := c.Items[it].Content
	var repl []byte
	if c.Body[s.Start] == '[' {
		repl = append(append([]byte{'['}, textPart(c.Messages[c.Items[it].Message].WireRole, text)...), ']')
	} else {
		repl = wire.AppendJSONString(nil, text)
	}
	return wire.Edit{Start: s.Start, End: s.End, Repl: repl}
}

// AddInstructions puts texts in a new developer message right after the
// leading instructions: an instruction item already sent is never edited
// (the provider has cached it), and the new item carries no id (ids are
// the client's and the provider's).
func (f Format) AddInstructions(c *wire.Conversation, texts []string, count wire.Count, _ wire.ItemCount, build bool) (*wire.Edit, []byte, int) {
	if len(texts) == 0 {
		return nil, nil, 0
	}
	msg, tokens := f.NewMessage(wire.RoleInstruction, strings.Join(texts, "\n\n"), count)
	if !build {
		msg = nil
	}
	return nil, msg, tokens
}

// PrependText puts text at the head of user message m's content.
func (f Format) PrependText(c *wire.Conversation, m int, text string, count wire.Count) (wire.Edit, int, bool) {
	msg := c.Messages[m]
	if msg.Items.End-msg.Items.Start != 1 || c.Items[msg.Items.Start].Kind != wire.KindUser {
		return wire.Edit{}, 0, false
	}
	s := c.Items[msg.Items.Start].Content
	if !s.Exists() {
		return wire.Edit{}, 0, false
	}
	at := s.Start - msg.Start
	var e wire.Edit
	switch c.Body[s.Start] {
	case '"':
		q := wire.AppendJSONString(nil, text+"\n\n")
		e = wire.Edit{Start: at + 1, End: at + 1, Repl: q[1 : len(q)-1]}
	case '[':
		repl := textPart("user", text)
		if wire.SkipSpace(c.Body, s.Start+1) != s.End-1 {
			repl = append(repl, ',')
		}
		e = wire.Edit{Start: at + 1, End: at + 1, Repl: repl}
	default:
		return wire.Edit{}, 0, false
	}
	return e, count(text + "\n\n"), true
}

// NewMessage renders a message item of role (developer for an
// instruction, else user) with text as its one input_text part, and no id.
func (Format) NewMessage(role wire.Role, text string, count wire.Count) ([]byte, int) {
	r := "user"
	if role == wire.RoleInstruction {
		r = "developer"
	}
	b := append([]byte(`{"type":"message","role":"`), r...)
	b = append(b, `","content":[`...)
	b = append(b, textPart(r, text)...)
	b = append(b, "]}"...)
	return b, tokensPerItem + count(r) + count(text)
}

// ReplaceMessages replaces messages [from, to) by msgs.
func (Format) ReplaceMessages(c *wire.Conversation, from, to int, msgs [][]byte) (wire.Edit, bool) {
	return wire.ReplaceElements(c, from, to, msgs, nil)
}

// DropMessages leaves out messages [from, to), from > 0, with the comma
// before them.
func (Format) DropMessages(c *wire.Conversation, from, to int) wire.Edit {
	return wire.DropElements(c, from, to)
}
