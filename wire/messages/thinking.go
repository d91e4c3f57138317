package messages

import "github.com/ctxpress/ctxpress/wire"

var _ wire.Binder = Format{}

// LeaveOut returns the edits, relative to the start of assistant message
// m, that leave out its thinking and redacted_thinking blocks with their
// commas, and the tokens they counted; false when it has none, or no
// other block (a message may not be left empty).
func (Format) LeaveOut(c *wire.Conversation, m int, count wire.Count) ([]wire.Edit, int, bool) {
	items := c.ItemsOf(m)
	bound, other := 0, 0
	for _, it := range items {
		if it.Bound {
			bound++
		} else {
			other++
		}
	}
	if bound == 0 || other == 0 {
		return nil, 0, false
	}
	at := c.Messages[m].Start
	var eds []wire.Edit
	tokens := 0
	for a := 0; a < len(items); a++ {
		if !items[a].Bound {
			continue
		}
		b := a
		for b < len(items) && items[b].Bound {
			tokens += opaqueTokens(value(c.Body, items[b].Span), count)
			b++
		}
		// A run of blocks goes with the comma before it, or, first in the
		// list, with the comma after it.
		if a > 0 {
			eds = append(eds, wire.Edit{Start: items[a-1].Span.End - at, End: items[b-1].Span.End - at})
		} else {
			eds = append(eds, wire.Edit{Start: items[a].Span.Start - at, End: items[b].Span.Start - at})
		}
		a = b
	}
	return eds, tokens, true
}

// dropBlock is the block_binding setting that makes the upstream drop a
// thinking block whose prefix changed instead of refusing the request.
const dropBlock = `"prefix_mismatch_behavior":"drop_block"`

// DropMismatched returns the edit that sets
// thinking.block_binding.prefix_mismatch_behavior to "drop_block" in
// place: inside the client's thinking object (and block_binding object),
// every other byte kept. false when the request has no thinking object,
// or already says drop_block.
func (Format) DropMismatched(c *wire.Conversation) (wire.Edit, bool) {
	b := c.Body
	th := member(b, wire.SkipSpace(b, 0), "thinking")
	if !th.Exists() || b[th.Start] != '{' {
		return wire.Edit{}, false
	}
	bb := member(b, th.Start, "block_binding")
	switch {
	case !bb.Exists():
		return insertMember(b, th, `"block_binding":{`+dropBlock+`}`), true
	case b[bb.Start] != '{':
		return wire.Edit{Start: bb.Start, End: bb.End, Repl: []byte(`{` + dropBlock + `}`)}, true
	}
	pm := member(b, bb.Start, "prefix_mismatch_behavior")
	switch {
	case !pm.Exists():
		return insertMember(b, bb, dropBlock), true
	case string(pm.Of(b)) == `"drop_block"`:
		return wire.Edit{}, false
	}
	return wire.Edit{Start: pm.Start, End: pm.End, Repl: []byte(`"drop_block"`)}, true
}

// member returns the span of the (last) member name of the object that
// opens at b[i], zero when absent.
func member(b []byte, i int, name string) wire.Span {
	var s wire.Span
	wire.WalkObject(b, i, func(k wire.Span, vs int) int {
		ve := wire.ValueEnd(b, vs)
		if wire.KeyIs(b, k, name) {
			s = wire.Span{Start: vs, End: ve}
		}
		return ve
	})
	return s
}

// insertMember returns the edit that adds the member kv (`"k":v`) at the
// end of the object obj.
func insertMember(b []byte, obj wire.Span, kv string) wire.Edit {
	at := obj.End - 1 // the closing brace
	if wire.SkipSpace(b, obj.Start+1) != at {
		kv = "," + kv
	}
	return wire.Edit{Start: at, End: at, Repl: []byte(kv)}
}
