package rewrite

import (
	"crypto/sha256"

	"github.com/tidwall/gjson"
)

// ToolCall is the call whose output Config.Squash is given.
type ToolCall struct {
	// Name is the tool's name; "" when the call cannot be found.
	Name string
	// Arguments is the call's arguments as the model wrote them, the JSON
	// text of function.arguments (`{"command":"cat -n a.go"}`); "" when
	// the call cannot be found.
	Arguments string
}

// producer is the call a tool result answers, as the squash step needs
// it: the tool's name, the digest of the call's canonical arguments (for
// memo keys: a squash that reads the arguments must not be recalled for
// another call), and the assistant message that made the call (to read the
// arguments on a memo miss). The message is the current request's.
type producer struct {
	tool string
	args [sha256.Size]byte // callKey.args; zero when the call is unknown
	from *message          // nil when the call is unknown
	id   string            // the call's id; "" for a legacy function_call
}

// call reads the producing call from the message that made it.
func (pr producer) call() ToolCall {
	c := ToolCall{Name: pr.tool}
	m := pr.from
	if m == nil {
		return c
	}
	var args gjson.Result
	if pr.id == "" {
		args = m.result(m.functionCall).Get("arguments")
	} else {
		m.result(m.toolCalls).ForEach(func(_, tc gjson.Result) bool {
			if tc.Get("id").String() != pr.id {
				return true
			}
			args = tc.Get("function.arguments")
			return false
		})
	}
	if args.Type == gjson.String {
		c.Arguments = args.Str
	} else {
		c.Arguments = args.Raw
	}
	return c
}

// callSites remembers, while a request is analysed, which assistant
// message made each call, so that a tool result's squash can be handed its
// call.
type callSites struct {
	byID   map[string]*message
	legacy *message // the message of the last legacy function_call
}

func newCallSites() *callSites { return &callSites{byID: make(map[string]*message)} }

// record notes the calls assistant message m makes (f.calls).
func (cs *callSites) record(m *message, f *facts) {
	for _, c := range f.calls {
		if c.id == "" {
			cs.legacy = m
		} else {
			cs.byID[c.id] = m
		}
	}
}

// producer returns the call result m answers, given what resultKey found
// for it: its tool, and its call's key when keyed.
func (cs *callSites) producer(m *message, tool string, key callKey, keyed bool) producer {
	pr := producer{tool: tool}
	if !keyed {
		return pr
	}
	pr.args = key.args
	if m.role == "function" {
		pr.from = cs.legacy
	} else {
		pr.from, pr.id = cs.byID[m.toolCallID], m.toolCallID
	}
	return pr
}

// edit replaces the bytes [start, end) with repl. In facts the offsets are
// relative to the start of the message; placed edits are absolute.
type edit struct {
	start, end int
	repl       []byte
}

// squashResult is a cached squash outcome; same is true when the squash
// left the text as it was (the text itself is then not stored).
type squashResult struct {
	out  string
	same bool
}

// jsonString is s as a JSON string in a slice of its own size: it is kept
// in the cache, where spare capacity would be memory the bound misses.
func exactJSONString(s string) []byte {
	b := appendJSONString(make([]byte, 0, len(s)+2), s)
	if cap(b)-len(b) > len(b)/16 {
		b = append(make([]byte, 0, len(b)), b...)
	}
	return b
}

// squashText returns the squashed form of a tool output, from the cache
// when this (call, text) was squashed before. It reports false when the
// squash changed nothing. A panicking Squash counts as changing nothing.
func (p *Pipeline) squashText(pr producer, text string) (string, bool) {
	key := newKey(kindSquash, pr.tool, string(pr.args[:]), text)
	if v, ok := p.cache.get(key); ok {
		r := v.(squashResult)
		return r.out, !r.same
	}
	out := p.callSquash(pr.call(), text)
	r := squashResult{out: out, same: out == text}
	if r.same {
		r.out = ""
	}
	p.cache.add(key, r, int64(len(r.out)))
	return out, !r.same
}

// callSquash runs the configured Squash, shielding the request from a
// panic in it: the text is then passed on unchanged.
func (p *Pipeline) callSquash(call ToolCall, text string) (out string) {
	defer func() {
		if recover() != nil {
			out = text
		}
	}()
	return p.cfg.Squash(call, text)
}

// squashContent squashes the content of tool result m: a string content as
// a whole, an array content one text part at a time (the array keeps its
// shape; other parts are untouched). A squash is used only when it saves
// tokens. It returns the edits (relative to the message start), the content
// tokens before and after, and a SquashStat per text squashed.
func (p *Pipeline) squashContent(enc Encoding, pr producer, m *message) (edits []edit, before, after int, stats []SquashStat) {
	c := p.counter
	content := m.result(m.content)
	squashOne := func(text gjson.Result) (tokBefore, tokAfter int) {
		if p.cfg.Squash == nil || !rawAt(m.body, text) {
			tokBefore = c.Count(enc, text.Str)
			return tokBefore, tokBefore
		}
		out, changed := p.squashText(pr, text.Str)
		if !changed {
			tokBefore = c.Count(enc, text.Str)
			return tokBefore, tokBefore
		}
		// The original is not sent: its count is only the savings figure,
		// so a big one is estimated (Estimate), unless the squashed form
		// comes close enough to it that the choice needs the exact count.
		tokOut := c.Count(enc, out)
		tokBefore = c.Estimate(enc, text.Str)
		if len(text.Str) > sampleOver && float64(tokOut) >= 0.8*float64(tokBefore) {
			tokBefore = c.Count(enc, text.Str)
		}
		if tokOut >= tokBefore {
			return tokBefore, tokBefore
		}
		start := text.Index - m.start
		edits = append(edits, edit{start: start, end: start + len(text.Raw), repl: exactJSONString(out)})
		st := SquashStat{TokensBefore: tokBefore, TokensAfter: tokOut}
		if p.cfg.SquashShape != nil {
			st.Shape = p.cfg.SquashShape(pr.call(), text.Str)
		}
		stats = append(stats, st)
		return tokBefore, tokOut
	}
	switch {
	case content.Type == gjson.String:
		before, after = squashOne(content)
	case content.IsArray():
		content.ForEach(func(_, part gjson.Result) bool {
			if t, ok := squashablePart(part); ok {
				b, a := squashOne(t)
				before += b
				after += a
				return true
			}
			t := c.partTokens(enc, part, nil)
			before += t
			after += t
			return true
		})
	default:
		before = c.contentTokens(enc, content)
		after = before
	}
	return edits, before, after, stats
}

// SquashStat is what squashing one tool output text saved.
type SquashStat struct {
	Shape                     string // from Config.SquashShape; "" without it
	TokensBefore, TokensAfter int    // of the text
}

// rawAt reports whether v's Index really points at its raw text in body, so
// that an edit at that offset replaces exactly v. gjson leaves Index 0 when
// it cannot tell; such a value is never edited.
func rawAt(body []byte, v gjson.Result) bool {
	i := v.Index
	return i > 0 && i+len(v.Raw) <= len(body) && string(body[i:i+len(v.Raw)]) == v.Raw
}
