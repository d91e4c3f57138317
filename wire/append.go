package wire

// Member returns the span of the value of the first member named key of
// the JSON object that opens at b[i]; zero when it has none. b must be
// valid JSON.
func Member(b []byte, i int, key string) Span {
	var s Span
	WalkObject(b, i, func(k Span, vs int) int {
		ve := ValueEnd(b, vs)
		if KeyIs(b, k, key) {
			s = Span{Start: vs, End: ve}
			return -1
		}
		return ve
	})
	return s
}

// TopArray is the array that body's top-level member key holds, found by
// member (nil: Member; a format that takes other spellings of its keys
// passes its own); false when body is no object or the member no array.
func TopArray(body []byte, key string, member func(b []byte, i int, key string) Span) (Span, bool) {
	if member == nil {
		member = Member
	}
	top := SkipSpace(body, 0)
	if top >= len(body) || body[top] != '{' {
		return Span{}, false
	}
	arr := member(body, top, key)
	return arr, arr.Exists() && body[arr.Start] == '['
}

// UserText is how a format holds a user's text, for AppendUserText.
type UserText struct {
	// IsUser reports whether a message (its bytes) is the user's, so
	// that text may join its content.
	IsUser func(msg []byte) bool
	// CanFollow reports whether a new user message may follow a message
	// that is not the user's (Messages: not after a role:"system" one).
	CanFollow func(msg []byte) bool
	// Part renders a text part of a content array; Message a new user
	// message whose content is text.
	Part, Message func(text string) []byte
	// Bridge, when not nil, is the message that goes between the last
	// message and the new user message, or nil for none.
	Bridge func(msg []byte) []byte
}

// AppendUserText returns body with text at the end of the conversation in
// the array of its top-level member key: at the end of the last message's
// content when that message is the user's (after a blank line in a string
// content, as one more text part in a list), else as one new user message
// after it (after f.Bridge's message, if any). Two user messages in a row
// are what strict chat templates refuse, and a user turn may end with the
// user's own text or with tool results. Every byte before the insertion is the body's, so the
// provider's cached prefix still matches. false when there is no message
// to append to, or the format allows no user message after the last one.
// body must be valid JSON; it is not modified.
func AppendUserText(body []byte, key, text string, f UserText) ([]byte, bool) {
	arr, ok := TopArray(body, key, nil)
	if !ok {
		return nil, false
	}
	var last Span
	WalkArray(body, arr.Start, func(vs int) int {
		last = Span{Start: vs, End: ValueEnd(body, vs)}
		return last.End
	})
	if !last.Exists() || body[last.Start] != '{' {
		return nil, false
	}
	msg := last.Of(body)
	if f.IsUser(msg) {
		if ed, ok := joinContent(body, last, text, f.Part); ok {
			return Splice(body, []Edit{ed}), true
		}
	} else if !f.CanFollow(msg) {
		return nil, false
	}
	repl := []byte{','}
	if f.Bridge != nil {
		if b := f.Bridge(msg); b != nil {
			repl = append(append(repl, b...), ',')
		}
	}
	repl = append(repl, f.Message(text)...)
	return Splice(body, []Edit{{Start: last.End, End: last.End, Repl: repl}}), true
}

// joinContent is the edit that puts text at the end of message m's
// content: inside a string, after a blank line; in a list, as the part
// part renders. false for a content of another shape (absent, null).
func joinContent(body []byte, m Span, text string, part func(string) []byte) (Edit, bool) {
	c := Member(body, m.Start, "content")
	if !c.Exists() {
		return Edit{}, false
	}
	end := c.End - 1 // the closing quote or bracket
	switch body[c.Start] {
	case '"':
		s := AppendJSONString(nil, "\n\n"+text)
		return Edit{Start: end, End: end, Repl: s[1 : len(s)-1]}, true
	case '[':
		p := part(text)
		if SkipSpace(body, c.Start+1) < end {
			p = append([]byte{','}, p...)
		}
		return Edit{Start: end, End: end, Repl: p}, true
	}
	return Edit{}, false
}

// EditTokens is how many tokens ed, an edit inside the value at s of
// body, adds to that value as count counts it.
func EditTokens(body []byte, s Span, ed Edit, count Count) int {
	old := s.Of(body)
	shifted := Edit{Start: ed.Start - s.Start, End: ed.End - s.Start, Repl: ed.Repl}
	return count(string(Splice(old, []Edit{shifted}))) - count(string(old))
}
