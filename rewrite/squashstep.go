package rewrite

import (
	"crypto/sha256"
	"strings"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/wire"
)

// Squasher compresses one tool output, given the call that produced it
// (Tool and Args "" when it cannot be found): *squash.Squasher is the one
// ctxpress runs (Config.Squash builds it). It must be deterministic, pure
// and safe for concurrent use, and depend on the arguments only through
// their JSON value (results are memoised on their canonical form);
// exemptions (read-type tools, file reads, a size floor) and whether a
// squash is worth it are its business. The pipeline keeps its Result: the
// text, the shape for SquashStats.
type Squasher interface {
	ApplyCall(call squash.Call, output string) squash.Result
}

// producer is the call a tool result answers, as the squash step needs
// it: the tool's name, the digest of the call's canonical arguments (for
// memo keys: a squash that reads the arguments must not be recalled for
// another call), and the call item (to read the arguments on a memo miss).
// The item is the current request's.
type producer struct {
	req  *request
	tool string
	args [sha256.Size]byte // callKey.args; zero when the call is unknown
	call int               // the call's item, -1 when the call is unknown
}

// toolCall reads the producing call from its item.
func (pr producer) toolCall() squash.Call {
	c := squash.Call{Tool: pr.tool}
	if pr.call < 0 {
		return c
	}
	c.Args = pr.req.f.Arguments(pr.req.Conversation, pr.call)
	return c
}

// callSites remembers, while a request is analysed, which item made each
// call, so that a tool result's squash can be handed its call.
type callSites struct {
	byID   map[string]int
	legacy int // the last call without an id, -1
}

// newCallSites returns the callSites of a request that makes about
// ncalls calls.
func newCallSites(ncalls int) *callSites {
	return &callSites{byID: make(map[string]int, ncalls), legacy: -1}
}

// record notes the calls message i makes. Within a message the first call
// of an id counts; a later message's call of the same id replaces it.
func (cs *callSites) record(req *request, i int) {
	r := req.Messages[i].Items
	for it := r.End - 1; it >= r.Start; it-- {
		if c := &req.Items[it]; c.Kind == wire.KindToolCall && c.CallID != "" {
			cs.byID[c.CallID] = it
		}
	}
	for it := r.Start; it < r.End; it++ {
		if c := &req.Items[it]; c.Kind == wire.KindToolCall && c.CallID == "" {
			cs.legacy = it
		}
	}
}

// producer returns the call result item r (-1: none) answers, given what
// resultKey found for it: its tool, and its call's key when keyed.
func (cs *callSites) producer(req *request, r int, tool string, key callKey, keyed bool) producer {
	pr := producer{req: req, tool: tool, call: -1}
	if !keyed {
		return pr
	}
	pr.args = key.args
	if it := &req.Items[r]; it.ByName {
		pr.call = cs.legacy
	} else if c, ok := cs.byID[it.CallID]; ok {
		pr.call = c
	}
	return pr
}

// squashResult is a cached squash outcome; same is true when the squash
// left the text as it was (the text itself is then not stored).
type squashResult struct {
	out   string
	shape squash.Shape
	same  bool
	kept  []expand.Original // squashOriginals
}

// jsonString is s as a JSON string in a slice of its own size: it is kept
// in the cache, where spare capacity would be memory the bound misses.
func exactJSONString(s string) []byte {
	b := wire.AppendJSONString(make([]byte, 0, len(s)+2), s)
	if cap(b)-len(b) > len(b)/16 {
		b = append(make([]byte, 0, len(b)), b...)
	}
	return b
}

// squashText returns the squashed form of a tool output and its shape,
// from the cache when this (call, text) was squashed before. It reports
// false when the squash changed nothing. A panicking Squasher counts as
// changing nothing.
func (p *Pipeline) squashText(pr producer, text string) (string, squash.Shape, []expand.Original, bool) {
	key := newKey(kindSquash, pr.tool, string(pr.args[:]), text)
	if v, ok := p.cache.get(key); ok {
		r := v.(squashResult)
		return r.out, r.shape, r.kept, !r.same
	}
	res := p.callSquash(pr.toolCall(), text)
	r := squashResult{out: res.Text, shape: res.Shape, same: !res.Squashed || res.Text == text}
	if r.same {
		r.out, r.shape = "", ""
	} else {
		r.kept = squashOriginals(res.Originals, text)
	}
	// A squasher builds its output in a strings.Builder, whose buffer is up
	// to twice the text: the cache keeps a copy of the text's own size.
	r.out = strings.Clone(r.out)
	size := len(r.out) + len(r.shape)
	for _, o := range r.kept {
		size += 48 + len(o.Ref) + len(o.Tool) + len(o.Text)
	}
	p.cache.add(key, r, int64(size))
	if r.same {
		return text, "", nil, false
	}
	return r.out, r.shape, r.kept, true
}

// callSquash runs the squasher, shielding the request from a panic in it:
// the text is then passed on unchanged.
func (p *Pipeline) callSquash(call squash.Call, text string) (res squash.Result) {
	defer func() {
		if recover() != nil {
			res = squash.Result{Text: text}
		}
	}()
	return p.squasher.ApplyCall(call, text)
}

// squashContent squashes the content of tool result item r: a string
// content as a whole, an array content one text part at a time (the array
// keeps its shape; other parts are untouched). A squash is used only when
// it saves tokens. It returns the edits (relative to the message start),
// the content tokens before and after, and a SquashStat per text squashed.
// kept are the originals its markers point to (their Item ord, the
// result's place among the message's results).
func (p *Pipeline) squashContent(req *request, pr producer, r, ord int) (edits []wire.Edit, before, after int, stats []SquashStat, kept []Original) {
	c, enc := p.counter, EncodingForModel(req.Model)
	msgStart := req.Messages[req.Items[r].Message].Start
	part := -1
	squashOne := func(text wire.Part) (tokBefore, tokAfter int) {
		if p.squasher == nil || !text.Span.Exists() {
			tokBefore = c.Count(enc, text.Text)
			return tokBefore, tokBefore
		}
		out, shape, origs, changed := p.squashText(pr, text.Text)
		if !changed {
			tokBefore = c.Count(enc, text.Text)
			return tokBefore, tokBefore
		}
		// squash decided the squash is worth it, counting with o200k_base;
		// the request's encoding may count otherwise, and a squash that
		// does not save tokens in it is not forwarded.
		// The original is not sent: its count is only the savings figure,
		// so a big one is estimated (Estimate), unless the squashed form
		// comes close enough to it that the choice needs the exact count.
		tokOut := c.Count(enc, out)
		tokBefore = c.Estimate(enc, text.Text)
		if len(text.Text) > sampleOver && float64(tokOut) >= 0.8*float64(tokBefore) {
			tokBefore = c.Count(enc, text.Text)
		}
		if tokOut >= tokBefore {
			return tokBefore, tokBefore
		}
		edits = append(edits, wire.Edit{Start: text.Span.Start - msgStart, End: text.Span.End - msgStart, Repl: exactJSONString(out)})
		stats = append(stats, SquashStat{Shape: string(shape), TokensBefore: tokBefore, TokensAfter: tokOut})
		kept = partOriginals(kept, origs, ord, part)
		return tokBefore, tokOut
	}
	for k, pt := range req.f.Parts(req.Conversation, r, req.count) {
		part = k
		if pt.IsText {
			b, a := squashOne(pt)
			before += b
			after += a
			continue
		}
		before += pt.Tokens
		after += pt.Tokens
	}
	return edits, before, after, stats, kept
}

// SquashStat is what squashing one tool output text saved.
type SquashStat struct {
	Shape                     string // the squasher's (squash.Result.Shape)
	TokensBefore, TokensAfter int    // of the text
}
