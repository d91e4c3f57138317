package chat

import (
	"strings"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// The calls of assistant messages, collected while the body is walked:
// their items, and their ids and tool names decoded at the end in one
// string (callNames).

// appendCalls appends the calls assistant message m (index i) makes:
// each tool_calls entry ns collected while m was parsed (id, function
// name and arguments, as gjson reads them: the first member of a name
// wins) and a legacy function_call (ByName, no id). Ids and names are set
// by ns.decode.
func appendCalls(items []wire.Item, i int, m *message, ns *callNames) []wire.Item {
	for k := m.calls.Start; k < m.calls.End; k++ {
		pc := &ns.calls[k]
		pc.item = len(items)
		// No id until ns.decode finds one.
		items = append(items, wire.Item{Kind: wire.KindToolCall, Message: i, Span: pc.span, Args: pc.args, ByName: true})
	}
	if fc := m.functionCall; fc.Exists() {
		it := wire.Item{Kind: wire.KindToolCall, Message: i, Span: fc, ByName: true}
		var name wire.Span
		name, it.Args = callMembers(m.body, fc)
		ns.calls = append(ns.calls, pendingCall{item: len(items), name: name})
		ns.size += name.End - name.Start
		items = append(items, it)
	}
	return items
}

// walk collects the entries of the tool_calls array at body[vs] and
// returns the index just past it, reading every byte once.
func (ns *callNames) walk(body []byte, vs int) int {
	return wire.WalkArray(body, vs, func(es int) int {
		if ns.calls == nil {
			ns.calls = make([]pendingCall, 0, firstMessages(len(body)-es))
		}
		pc := pendingCall{}
		if body[es] != '{' {
			pc.span = wire.Span{Start: es, End: wire.ValueEnd(body, es)}
			ns.calls = append(ns.calls, pc)
			return pc.span.End
		}
		seenFn := false
		ee := wire.WalkObject(body, es, func(k wire.Span, vs int) int {
			switch fieldOf(body, k) {
			case fieldID:
				return keepFirst(&pc.id, vs, wire.ValueEnd(body, vs))
			case fieldFunction:
				if !seenFn {
					seenFn = true
					if body[vs] == '{' {
						var fn wire.Span
						fn.Start = vs
						fn.End = wire.WalkObject(body, vs, func(k wire.Span, vs int) int {
							switch fieldOf(body, k) {
							case fieldName:
								return keepFirst(&pc.name, vs, wire.ValueEnd(body, vs))
							case fieldArguments:
								return keepFirst(&pc.args, vs, wire.ValueEnd(body, vs))
							}
							return wire.ValueEnd(body, vs)
						})
						return fn.End
					}
				}
			}
			return wire.ValueEnd(body, vs)
		})
		pc.span = wire.Span{Start: es, End: ee}
		ns.calls = append(ns.calls, pc)
		ns.size += pc.id.End - pc.id.Start + pc.name.End - pc.name.Start
		return ee
	})
}

// callMembers reads the spans of a function object's name and arguments.
func callMembers(b []byte, fn wire.Span) (ns, args wire.Span) {
	wire.WalkObject(b, fn.Start, func(k wire.Span, vs int) int {
		ve := wire.ValueEnd(b, vs)
		switch fieldOf(b, k) {
		case fieldName:
			keepFirst(&ns, vs, ve)
		case fieldArguments:
			keepFirst(&args, vs, ve)
		}
		return ve
	})
	return ns, args
}

// stringOf is gjson's Result.String of the value at s: a string decoded,
// null "", anything else as gjson renders it.
func stringOf(b []byte, s wire.Span) string {
	if v, ok := wire.StringValue(b, s); ok {
		return v
	}
	return gjson.ParseBytes(b[s.Start:s.End]).String()
}

// callNames collects the spans of the calls' ids and tool names while a
// body is walked, and decodes them at the end into one string that the
// items' CallID and Tool slice: a long history has hundreds of calls, and
// one allocation for all of them keeps a warm turn's parse as cheap as it
// was before calls were items.
type callNames struct {
	calls []pendingCall
	size  int
}

// pendingCall is a call item's id and name spans, before decoding.
type pendingCall struct {
	item       int       // the call's item
	span, args wire.Span // the entry, its arguments
	id, name   wire.Span
}

// decode sets CallID, Tool and ByName of the collected call items. A value
// that is a plain string (no escapes) is a slice of the shared string; any
// other is decoded as gjson would (stringOf).
func (ns *callNames) decode(body []byte, items []wire.Item) {
	if len(ns.calls) == 0 {
		return
	}
	var sb strings.Builder
	sb.Grow(ns.size)
	for _, pc := range ns.calls {
		for _, s := range [2]wire.Span{pc.id, pc.name} {
			if raw, ok := plainString(body, s); ok {
				sb.Write(raw)
			}
		}
	}
	// The second pass walks the same values in the same order, so the
	// plain ones are consecutive slices of all.
	all, at := sb.String(), 0
	for _, pc := range ns.calls {
		it := &items[pc.item]
		for j, s := range [2]wire.Span{pc.id, pc.name} {
			var v string
			if raw, ok := plainString(body, s); ok {
				v, at = all[at:at+len(raw)], at+len(raw)
			} else if s.Exists() {
				v = stringOf(body, s)
			}
			if j == 0 {
				it.CallID = v
			} else {
				it.Tool = v
			}
		}
		if pc.id.Exists() {
			it.ByName = it.CallID == ""
		}
	}
}

// plainString returns the bytes of the JSON string at s when it has no
// escapes; false for an escaped string, another value or an absent one.
func plainString(body []byte, s wire.Span) ([]byte, bool) {
	if !s.Exists() || body[s.Start] != '"' {
		return nil, false
	}
	raw := body[s.Start+1 : s.End-1]
	for _, c := range raw {
		if c == '\\' {
			return nil, false
		}
	}
	return raw, true
}
