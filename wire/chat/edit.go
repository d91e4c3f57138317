package chat

import (
	"strings"

	"github.com/ctxpress/ctxpress/wire"
)

// ReplaceContent returns the edit that replaces item it's content by text:
// a JSON string for a string content, a one-part text array for an array
// content (so the content keeps its shape).
func (Format) ReplaceContent(c *wire.Conversation, it int, text string) wire.Edit {
	s := c.Items[it].Content
	var repl []byte
	if c.Body[s.Start] == '[' {
		repl = append(repl, `[{"type":"text","text":`...)
		repl = wire.AppendJSONString(repl, text)
		repl = append(repl, "}]"...)
	} else {
		repl = wire.AppendJSONString(nil, text)
	}
	return wire.Edit{Start: s.Start, End: s.End, Repl: repl}
}

// leadTarget is where additions to the system prompt go.
type leadTarget int

const (
	targetString leadTarget = iota // appended to the string content of the last leading system message
	targetParts                    // text parts appended to its array content
	targetEmpty                    // its null or absent content is set
	targetNew                      // a new system message: there is no leading system message, or its content is of no known shape
)

// target returns where additions to the system prompt go, and the last
// leading system message.
func target(c *wire.Conversation) (leadTarget, message) {
	if c.Lead == 0 {
		return targetNew, message{}
	}
	m := parseMessage(c.Body, c.Messages[c.Lead-1].Start, nil)
	if !m.content.Exists() {
		return targetEmpty, m
	}
	switch c.Body[m.content.Start] {
	case '"':
		return targetString, m
	case '[':
		return targetParts, m
	case 'n':
		return targetEmpty, m
	}
	return targetNew, m
}

// AddInstructions returns how texts change the request: the edit to the
// last leading system message, or (when there is none, or its content is
// of no known shape) the new system message to insert after the leading
// ones, and the tokens this adds. Texts are joined by a blank line, and
// the message's own bytes are kept: a string content gets the escaped
// additions spliced in before its closing quote, an array content a text
// part per text.
func (f Format) AddInstructions(c *wire.Conversation, texts []string, count wire.Count, counted wire.ItemCount, build bool) (ed *wire.Edit, newMsg []byte, tokens int) {
	if len(texts) == 0 {
		return nil, nil, 0
	}
	kind, m := target(c)
	joined := strings.Join(texts, "\n\n")
	switch kind {
	case targetString:
		base := result(c.Body, m.content).Str
		suffix := joined
		if base != "" {
			suffix = "\n\n" + joined
		}
		// The whole new text is counted: tokens do not add up across a
		// join. What the content counted before, the core knows.
		tokens = count(base+suffix) - counted(c.Messages[c.Lead-1].Items.Start)
		if build {
			q := wire.AppendJSONString(nil, suffix)
			ed = &wire.Edit{Start: m.content.End - 1, End: m.content.End, Repl: q[1:]}
		}
	case targetParts:
		for _, s := range texts {
			tokens += count(s)
		}
		if build {
			var repl []byte
			empty := wire.SkipSpace(c.Body, m.content.Start+1) == m.content.End-1
			for i, s := range texts {
				if i > 0 || !empty {
					repl = append(repl, ',')
				}
				repl = append(repl, `{"type":"text","text":`...)
				repl = wire.AppendJSONString(repl, s)
				repl = append(repl, '}')
			}
			at := m.content.End - 1 // the closing bracket
			ed = &wire.Edit{Start: at, End: at, Repl: repl}
		}
	case targetEmpty:
		tokens = count(joined)
		if build {
			q := wire.AppendJSONString(nil, joined)
			if m.content.Exists() {
				ed = &wire.Edit{Start: m.content.Start, End: m.content.End, Repl: q}
			} else {
				at := m.End - 1 // the closing brace
				ed = &wire.Edit{Start: at, End: at, Repl: append([]byte(`,"content":`), q...)}
			}
		}
	case targetNew:
		newMsg, tokens = f.NewMessage(wire.RoleInstruction, joined, count)
		if !build {
			newMsg = nil
		}
	}
	return ed, newMsg, tokens
}

// PrependText returns the edit, relative to the start of message i, that
// puts text at the head of its content: before the string, a blank line
// between them; as a first text part of an array; as the content when it
// is null, empty or absent. false for a content of another shape. The
// tokens are those of the merged message less the message's own.
func (f Format) PrependText(c *wire.Conversation, i int, text string, count wire.Count) (wire.Edit, int, bool) {
	m := parseMessage(c.Body, c.Messages[i].Start, nil)
	e, ok := mergeEdit(&m, text)
	if !ok {
		return e, 0, false
	}
	merged := wire.Splice(m.bytes(), []wire.Edit{e})
	mm := parseMessage(merged, 0, nil)
	return e, messageTokens(count, &mm) - messageTokens(count, &m), true
}

// messageTokens counts a message as Overhead and Parts do together.
func messageTokens(count wire.Count, m *message) int {
	c := &wire.Conversation{Body: m.body, Messages: []wire.Message{{Span: m.Span}}}
	c.Items = []wire.Item{{Content: m.content}}
	n := Format{}.Overhead(c, 0, count)
	if !m.object {
		return n
	}
	for _, p := range (Format{}).Parts(c, 0, count) {
		if p.IsText {
			n += count(p.Text)
		} else {
			n += p.Tokens
		}
	}
	return n
}

// mergeEdit returns the edit, relative to the start of m, that puts text
// at the head of m's content.
func mergeEdit(m *message, text string) (wire.Edit, bool) {
	if !m.object {
		return wire.Edit{}, false
	}
	c := m.content
	if !c.Exists() {
		at := m.End - 1 - m.Start // the closing brace
		return wire.Edit{Start: at, End: at, Repl: append([]byte(`,"content":`), wire.AppendJSONString(nil, text)...)}, true
	}
	s, e := c.Start-m.Start, c.End-m.Start
	switch m.body[c.Start] {
	case '"':
		if c.End-c.Start == 2 { // ""
			return wire.Edit{Start: s, End: e, Repl: wire.AppendJSONString(nil, text)}, true
		}
		q := wire.AppendJSONString(nil, text+"\n\n")
		return wire.Edit{Start: s + 1, End: s + 1, Repl: q[1 : len(q)-1]}, true
	case '[':
		repl := append([]byte(`{"type":"text","text":`), wire.AppendJSONString(nil, text)...)
		repl = append(repl, '}')
		if wire.SkipSpace(m.body, c.Start+1) != c.End-1 { // not empty
			repl = append(repl, ',')
		}
		return wire.Edit{Start: s + 1, End: s + 1, Repl: repl}, true
	case 'n':
		return wire.Edit{Start: s, End: e, Repl: wire.AppendJSONString(nil, text)}, true
	}
	return wire.Edit{}, false
}

// NewMessage renders a message with a role (system for an instruction,
// else user) and a string content, and counts it as Overhead and Parts
// would.
func (Format) NewMessage(role wire.Role, text string, count wire.Count) ([]byte, int) {
	r := "user"
	if role == wire.RoleInstruction {
		r = "system"
	}
	b := append([]byte(`{"role":"`), r...)
	b = append(b, `","content":`...)
	b = wire.AppendJSONString(b, text)
	b = append(b, '}')
	return b, tokensPerMessage + count(r) + count(text)
}

// ReplaceMessages returns the edit that replaces the messages [from, to)
// by msgs, keeping the body's separators elsewhere; false when there is
// nothing to do.
func (Format) ReplaceMessages(c *wire.Conversation, from, to int, msgs [][]byte) (wire.Edit, bool) {
	return wire.ReplaceElements(c, from, to, msgs, func() int { return messagesArray(c.Body).Start + 1 })
}

// messagesArray returns the span of the (first) `messages` array of body.
func messagesArray(body []byte) wire.Span {
	var arr wire.Span
	seen := false
	wire.WalkObject(body, wire.SkipSpace(body, 0), func(k wire.Span, vs int) int {
		ve := wire.ValueEnd(body, vs)
		if !seen && fieldOf(body, k) == fieldMessages {
			seen = true
			if body[vs] == '[' {
				arr = wire.Span{Start: vs, End: ve}
			}
		}
		return ve
	})
	return arr
}

// DropMessages returns the edit that cuts out the messages [from, to)
// with the comma before them.
func (Format) DropMessages(c *wire.Conversation, from, to int) wire.Edit {
	return wire.DropElements(c, from, to)
}
