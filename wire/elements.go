package wire

import "bytes"

// ReplaceElements is the edit that replaces messages [from, to) of c by
// msgs, every format's messages being the elements of one JSON array: the
// commas stay right whichever end the replaced run touches, and false
// means there is nothing to do. When c has no messages, msgs go just
// inside the empty array, at emptyAt(); a nil emptyAt gives false.
func ReplaceElements(c *Conversation, from, to int, msgs [][]byte, emptyAt func() int) (Edit, bool) {
	ms := c.Messages
	n := len(ms)
	if from == to && len(msgs) == 0 {
		return Edit{}, false
	}
	join := bytes.Join(msgs, []byte{','})
	switch {
	case to < n: // up to the first message kept
		if len(msgs) > 0 {
			join = append(join, ',')
		}
		return Edit{Start: ms[from].Start, End: ms[to].Start, Repl: join}, true
	case from > 0: // from the end of the last message kept to the end
		if len(msgs) > 0 {
			join = append([]byte{','}, join...)
		}
		return Edit{Start: ms[from-1].End, End: ms[n-1].End, Repl: join}, true
	case n > 0: // every message goes
		return Edit{Start: ms[0].Start, End: ms[n-1].End, Repl: join}, true
	case emptyAt != nil:
		at := emptyAt()
		return Edit{Start: at, End: at, Repl: join}, true
	}
	return Edit{}, false
}

// DropElements is the edit that leaves out messages [from, to), from > 0,
// with the comma before them.
func DropElements(c *Conversation, from, to int) Edit {
	return Edit{Start: c.Messages[from-1].End, End: c.Messages[to-1].End}
}
