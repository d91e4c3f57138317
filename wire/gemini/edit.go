package gemini

import "github.com/ctxpress/ctxpress/wire"

// appendTextPart appends {"text":text}.
func appendTextPart(dst []byte, text string) []byte {
	return append(wire.AppendJSONString(append(dst, `{"text":`...), text), '}')
}

// ReplaceContent returns the edit that makes item it's content text, in
// the content's shape: a text part's text stays a string; a
// functionResponse's main string (mainString) is replaced, every other
// member of its response kept as sent; a response without one becomes
// {"output": text}, the shape Gemini CLI sends. A part's other members
// (id, name, a signature) are never touched, and a bound part (a signed
// text of the model's) is never edited: its edit changes nothing.
func (Format) ReplaceContent(c *wire.Conversation, it int, text string) wire.Edit {
	item := c.Items[it]
	s := item.Content
	if item.Bound {
		return wire.Edit{Start: s.Start, End: s.Start}
	}
	if item.Kind == wire.KindToolResult {
		if main := mainString(c.Body, s); main.Exists() {
			return wire.Edit{Start: main.Start, End: main.End, Repl: wire.AppendJSONString(nil, text)}
		}
		return wire.Edit{Start: s.Start, End: s.End, Repl: append(wire.AppendJSONString([]byte(`{"output":`), text), '}')}
	}
	return wire.Edit{Start: s.Start, End: s.End, Repl: wire.AppendJSONString(nil, text)}
}

// systemSpan returns the span of the top-level systemInstruction (either
// spelling), zero when absent.
func systemSpan(body []byte) Span {
	return member(body, wire.SkipSpace(body, 0), "systemInstruction")
}

// AddInstructions returns the edit that puts texts at the end of the
// top-level systemInstruction, after everything the client sent there: one
// text part per text appended to its parts (so its cached prefix stays);
// a systemInstruction without parts gets them as its parts; an absent or
// null one becomes {"parts":[…]} first in the body. It never inserts a
// content. The tokens are the systemInstruction's as counted (its raw
// JSON, as Conversation.Counted has it) after the edit less before.
func (Format) AddInstructions(c *wire.Conversation, texts []string, count wire.Count, _ wire.ItemCount, build bool) (*wire.Edit, []byte, int) {
	if len(texts) == 0 {
		return nil, nil, 0
	}
	var parts []byte
	for i, t := range texts {
		if i > 0 {
			parts = append(parts, ',')
		}
		parts = appendTextPart(parts, t)
	}
	sys := systemSpan(c.Body)
	var ed wire.Edit
	switch {
	case sys.Exists() && c.Body[sys.Start] == '{':
		ps := member(c.Body, sys.Start, "parts")
		switch {
		case ps.Exists() && c.Body[ps.Start] == '[' && wire.SkipSpace(c.Body, ps.Start+1) != ps.End-1:
			ed = wire.Edit{Start: ps.End - 1, End: ps.End - 1, Repl: append([]byte{','}, parts...)}
		case ps.Exists():
			ed = wire.Edit{Start: ps.Start, End: ps.End, Repl: append(append([]byte{'['}, parts...), ']')}
		default:
			kv := append(append([]byte(`"parts":[`), parts...), ']')
			if wire.SkipSpace(c.Body, sys.Start+1) != sys.End-1 {
				kv = append(kv, ',')
			}
			ed = wire.Edit{Start: sys.Start + 1, End: sys.Start + 1, Repl: kv}
		}
	case sys.Exists():
		ed = wire.Edit{Start: sys.Start, End: sys.End, Repl: append(append([]byte(`{"parts":[`), parts...), "]}"...)}
	default:
		v := append(append([]byte(`{"parts":[`), parts...), "]}"...)
		tokens := count(string(v))
		if !build {
			return nil, nil, tokens
		}
		at := wire.SkipSpace(c.Body, 0) + 1
		repl := append(append([]byte(`"systemInstruction":`), v...), ',')
		return &wire.Edit{Start: at, End: at, Repl: repl}, nil, tokens
	}
	tokens := wire.EditTokens(c.Body, sys, ed, count)
	if !build {
		return nil, nil, tokens
	}
	return &ed, nil, tokens
}

// PrependText returns the edit, relative to the start of user content m,
// that puts text at the head of its parts: before the text of a first text
// part, a blank line between them; else as a text part of its own first.
// false for any other content, or one without parts.
func (Format) PrependText(c *wire.Conversation, m int, text string, count wire.Count) (wire.Edit, int, bool) {
	msg := c.Messages[m]
	if msg.Role != wire.RoleUser || msg.Items.End == msg.Items.Start {
		return wire.Edit{}, 0, false
	}
	first := c.Items[msg.Items.Start]
	if first.Kind == wire.KindUser && first.Content.Exists() {
		at := first.Content.Start - msg.Start
		q := wire.AppendJSONString(nil, text+"\n\n")
		return wire.Edit{Start: at + 1, End: at + 1, Repl: q[1 : len(q)-1]}, count(text + "\n\n"), true
	}
	at := first.Span.Start - msg.Start
	return wire.Edit{Start: at, End: at, Repl: append(appendTextPart(nil, text), ',')}, count(text), true
}

// NewMessage renders a content of one text part: the model's for
// RoleAssistant, else the user's (instructions go to systemInstruction).
func (Format) NewMessage(role wire.Role, text string, count wire.Count) ([]byte, int) {
	r := "user"
	if role == wire.RoleAssistant {
		r = "model"
	}
	b := append([]byte(`{"role":"`), r...)
	b = append(appendTextPart(append(b, `","parts":[`...), text), "]}"...)
	return b, tokensPerMessage + count(r) + count(text)
}

// contentsArray returns the span of the contents array.
func contentsArray(body []byte) Span {
	return member(body, wire.SkipSpace(body, 0), "contents")
}

// ReplaceMessages returns the edit that replaces contents [from, to) by
// msgs, the commas kept right; false when there is nothing to do.
func (Format) ReplaceMessages(c *wire.Conversation, from, to int, msgs [][]byte) (wire.Edit, bool) {
	return wire.ReplaceElements(c, from, to, msgs, func() int { return contentsArray(c.Body).Start + 1 })
}

// DropMessages returns the edit that leaves out contents [from, to),
// from > 0, with the comma before them.
func (Format) DropMessages(c *wire.Conversation, from, to int) wire.Edit {
	return wire.DropElements(c, from, to)
}
