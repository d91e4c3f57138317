package messages

import (
	"strings"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// appendTextBlock appends {"type":"text","text":text}, with cache (a raw
// cache_control value) when not nil.
func appendTextBlock(dst []byte, text string, cache []byte) []byte {
	dst = append(dst, `{"type":"text","text":`...)
	dst = wire.AppendJSONString(dst, text)
	if cache != nil {
		dst = append(dst, `,"cache_control":`...)
		dst = append(dst, cache...)
	}
	return append(dst, '}')
}

// ReplaceContent returns the edit that makes item it's content text, in
// the content's shape: a string (a text block's text, a string content)
// stays a string; a tool_result's block list becomes one text block,
// which carries the list's last cache_control marker when it had one, so
// the client's breakpoint stays where it was and no marker is added.
// Every other field of the block (tool_use_id, is_error, cache_control)
// is kept as sent.
func (Format) ReplaceContent(c *wire.Conversation, it int, text string) wire.Edit {
	s := c.Items[it].Content
	if c.Body[s.Start] != '[' {
		return wire.Edit{Start: s.Start, End: s.End, Repl: wire.AppendJSONString(nil, text)}
	}
	var cache []byte
	value(c.Body, s).ForEach(func(_, b gjson.Result) bool {
		if cc := b.Get("cache_control"); cc.Exists() && cc.Type != gjson.Null {
			cache = []byte(cc.Raw)
		}
		return true
	})
	repl := append(appendTextBlock([]byte{'['}, text, cache), ']')
	return wire.Edit{Start: s.Start, End: s.End, Repl: repl}
}

// systemSpan returns the span of the top-level "system" value, zero when
// absent.
func systemSpan(body []byte) wire.Span {
	var sys wire.Span
	wire.WalkObject(body, wire.SkipSpace(body, 0), func(k wire.Span, vs int) int {
		ve := wire.ValueEnd(body, vs)
		if wire.KeyIs(body, k, "system") {
			sys = wire.Span{Start: vs, End: ve} // the last one, as gjson reads it
		}
		return ve
	})
	return sys
}

// AddInstructions returns the edit that puts texts at the end of the
// top-level system, after everything the client sent there, so its
// cache breakpoints stay valid and no marker is added: a block list gets
// one text block per text; a string gets them appended, a blank line
// between (a string system carries no marker, so turning it into blocks
// would only change its shape); an absent, null or empty system becomes
// them as one string. It never inserts a message (the role:"system"
// messages of the history have placement rules; the top-level system
// has none). The tokens are the system's as counted (its raw JSON, as
// Conversation.Counted has it) after the edit less before.
func (Format) AddInstructions(c *wire.Conversation, texts []string, count wire.Count, _ wire.ItemCount, build bool) (*wire.Edit, []byte, int) {
	if len(texts) == 0 {
		return nil, nil, 0
	}
	sys := systemSpan(c.Body)
	joined := strings.Join(texts, "\n\n")
	var ed wire.Edit
	switch {
	case sys.Exists() && c.Body[sys.Start] == '[' && wire.SkipSpace(c.Body, sys.Start+1) != sys.End-1:
		for _, t := range texts {
			ed.Repl = appendTextBlock(append(ed.Repl, ','), t, nil)
		}
		ed.Start, ed.End = sys.End-1, sys.End-1
	case sys.Exists() && c.Body[sys.Start] == '"' && sys.End-sys.Start > 2:
		q := wire.AppendJSONString(nil, "\n\n"+joined)
		ed = wire.Edit{Start: sys.End - 1, End: sys.End, Repl: q[1:]}
	case sys.Exists():
		ed = wire.Edit{Start: sys.Start, End: sys.End, Repl: wire.AppendJSONString(nil, joined)}
	default:
		q := wire.AppendJSONString(nil, joined)
		at := wire.SkipSpace(c.Body, 0) + 1
		if !build {
			return nil, nil, count(string(q))
		}
		return &wire.Edit{Start: at, End: at, Repl: append(append([]byte(`"system":`), q...), ',')}, nil, count(string(q))
	}
	tokens := wire.EditTokens(c.Body, sys, ed, count)
	if !build {
		return nil, nil, tokens
	}
	return &ed, nil, tokens
}

// PrependText returns the edit, relative to the start of user message m,
// that puts text at the head of its content: before a string, a blank
// line between them; as a first text block of a list. false for any
// other message or content.
func (Format) PrependText(c *wire.Conversation, m int, text string, count wire.Count) (wire.Edit, int, bool) {
	msg := c.Messages[m]
	if msg.Role != wire.RoleUser || msg.Items.End == msg.Items.Start {
		return wire.Edit{}, 0, false
	}
	first := c.Items[msg.Items.Start]
	switch {
	case first.Span == first.Content && first.Content.Exists(): // a string content
		at := first.Content.Start - msg.Start
		q := wire.AppendJSONString(nil, text+"\n\n")
		return wire.Edit{Start: at + 1, End: at + 1, Repl: q[1 : len(q)-1]}, count(text + "\n\n"), true
	case first.Span.Exists() && c.Body[first.Span.Start] == '{': // a block list
		at := first.Span.Start - msg.Start
		repl := append(appendTextBlock(nil, text, nil), ',')
		return wire.Edit{Start: at, End: at, Repl: repl}, count(text), true
	}
	return wire.Edit{}, 0, false
}

// NewMessage renders a message with text as its string content: an
// assistant message for RoleAssistant, else a user message (the
// instructions go to the top-level system, never to a message).
func (Format) NewMessage(role wire.Role, text string, count wire.Count) ([]byte, int) {
	r := "user"
	if role == wire.RoleAssistant {
		r = "assistant"
	}
	b := append([]byte(`{"role":"`), r...)
	b = append(b, `","content":`...)
	b = wire.AppendJSONString(b, text)
	b = append(b, '}')
	return b, tokensPerMessage + count(r) + count(text)
}

// messagesArray returns the span of the `messages` array.
func messagesArray(body []byte) wire.Span {
	var arr wire.Span
	wire.WalkObject(body, wire.SkipSpace(body, 0), func(k wire.Span, vs int) int {
		ve := wire.ValueEnd(body, vs)
		if wire.KeyIs(body, k, "messages") && body[vs] == '[' {
			arr = wire.Span{Start: vs, End: ve}
		}
		return ve
	})
	return arr
}

// ReplaceMessages returns the edit that replaces messages [from, to) by
// msgs, the commas kept right; false when there is nothing to do.
func (Format) ReplaceMessages(c *wire.Conversation, from, to int, msgs [][]byte) (wire.Edit, bool) {
	return wire.ReplaceElements(c, from, to, msgs, func() int { return messagesArray(c.Body).Start + 1 })
}

// DropMessages returns the edit that leaves out messages [from, to),
// from > 0, with the comma before them.
func (Format) DropMessages(c *wire.Conversation, from, to int) wire.Edit {
	return wire.DropElements(c, from, to)
}
