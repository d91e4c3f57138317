package rewrite

import (
	"bytes"
	"strings"

	"github.com/ctxpress/ctxpress/compactor"
)

// render builds the forwarded body and its counts from v and the dedup
// plan. The output is the body with a few edits, so every byte it does not
// need to change is copied as sent:
//
//   - the additions to the system prompt (ConciseInstruction, the summary
//     block) at the end of the last leading system message's content;
//   - at the boundary after the leading system messages, the messages not
//     forwarded are cut out and the new ones put in their place: a new
//     system message (when the additions have nowhere else to go), the
//     block as a user message (PlacementUser), the re-sent user message;
//   - the squash and dedup edits of the messages forwarded after it.
//
// The leading system messages are never tool results, so they carry no
// squash or dedup edit and the edits come out in body order.
func (v *view) render(plan dedupPlan, res *Result) {
	req, a := v.req, v.a
	res.TokensBefore = v.fixed
	res.TokensAfter = v.fixed - plan.saved
	res.DedupSavedTokens = plan.saved
	for i, f := range a.facts {
		res.TokensBefore += f.before
		if i < v.lead || i >= v.dropTo {
			res.TokensAfter += f.after
		}
	}

	var block string
	if v.branch != nil {
		block = compactor.Block(v.branch.Summary)
	}
	var edits []edit
	sys, newSys, tokens := v.leadChange(v.systemAdditions(block, v.branch != nil), true)
	res.TokensAfter += tokens
	if sys != nil {
		edits = append(edits, *sys)
	}
	var inserted [][]byte
	if newSys != nil {
		inserted = append(inserted, newSys)
	}
	if v.user && v.branch != nil {
		inserted = append(inserted, textMessage("user", block))
		res.TokensAfter += v.messageTokens("user", block)
	}
	if v.resend >= 0 {
		inserted = append(inserted, req.messages[v.resend].bytes())
		res.TokensAfter += a.facts[v.resend].after
	}
	if e, ok := v.boundary(inserted); ok {
		edits = append(edits, e)
	}

	for i := v.dropTo; i < len(req.messages); i++ {
		m, f := &req.messages[i], a.facts[i]
		if plan.replace[i] {
			edits = append(edits, placeholderEdit(m))
			res.Deduped++
			continue
		}
		res.Squashed += f.squashed
		res.SquashStats = append(res.SquashStats, f.stats...)
		for _, e := range f.edits {
			edits = append(edits, edit{start: m.start + e.start, end: m.start + e.end, repl: e.repl})
		}
	}
	if len(edits) > 0 {
		res.Body = splice(req.body, edits)
		res.Changed = true
		res.BytesAfter = len(res.Body)
	}
}

// systemAdditions returns what goes at the end of the system prompt, in
// order: ConciseInstruction, then the summary block unless it goes into a
// user message. hasBlock tells whether there is a block.
func (v *view) systemAdditions(block string, hasBlock bool) []string {
	var adds []string
	if v.concise {
		adds = append(adds, ConciseInstruction)
	}
	if hasBlock && !v.user {
		adds = append(adds, block)
	}
	return adds
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
// leading system message (nil when none).
func (v *view) target() (leadTarget, *message) {
	if v.lead == 0 {
		return targetNew, nil
	}
	m := &v.req.messages[v.lead-1]
	if !m.content.exists() {
		return targetEmpty, m
	}
	switch v.req.body[m.content.start] {
	case '"':
		return targetString, m
	case '[':
		return targetParts, m
	case 'n':
		return targetEmpty, m
	}
	return targetNew, m
}

// leadChange returns how adds change the request: the edit to the last
// leading system message, or (targetNew) the new system message to insert
// after the leading ones, and the tokens this adds to the request. With
// build false only the tokens are computed. Texts are joined by a blank
// line, and the message's own bytes are kept: a string content gets the
// escaped additions spliced in before its closing quote.
func (v *view) leadChange(adds []string, build bool) (ed *edit, newMsg []byte, tokens int) {
	if len(adds) == 0 {
		return nil, nil, 0
	}
	c, enc := v.p.counter, v.enc
	kind, m := v.target()
	joined := strings.Join(adds, "\n\n")
	switch kind {
	case targetString:
		base := m.result(m.content).Str
		suffix := joined
		if base != "" {
			suffix = "\n\n" + joined
		}
		// The whole new text is counted: tokens do not add up across a
		// join.
		tokens = c.Count(enc, base+suffix) - v.a.facts[v.lead-1].contentAfter
		if build {
			q := appendJSONString(nil, suffix)
			ed = &edit{start: m.content.end - 1, end: m.content.end, repl: q[1:]}
		}
	case targetParts:
		for _, s := range adds {
			tokens += c.Count(enc, s)
		}
		if build {
			var repl []byte
			empty := skipSpace(m.body, m.content.start+1) == m.content.end-1
			for i, s := range adds {
				if i > 0 || !empty {
					repl = append(repl, ',')
				}
				repl = append(repl, `{"type":"text","text":`...)
				repl = appendJSONString(repl, s)
				repl = append(repl, '}')
			}
			at := m.content.end - 1 // the closing bracket
			ed = &edit{start: at, end: at, repl: repl}
		}
	case targetEmpty:
		tokens = c.Count(enc, joined)
		if build {
			q := appendJSONString(nil, joined)
			if m.content.exists() {
				ed = &edit{start: m.content.start, end: m.content.end, repl: q}
			} else {
				at := m.end - 1 // the closing brace
				ed = &edit{start: at, end: at, repl: append([]byte(`,"content":`), q...)}
			}
		}
	case targetNew:
		tokens = v.messageTokens("system", joined)
		if build {
			newMsg = textMessage("system", joined)
		}
	}
	return ed, newMsg, tokens
}

// textMessage renders a message with a role and a string content.
func textMessage(role, text string) []byte {
	b := append([]byte(`{"role":"`), role...)
	b = append(b, `","content":`...)
	b = appendJSONString(b, text)
	return append(b, '}')
}

// messageTokens counts textMessage(role, text) as Counter.CountRequest does.
func (v *view) messageTokens(role, text string) int {
	c := v.p.counter
	return tokensPerMessage + c.Count(v.enc, role) + c.Count(v.enc, text)
}

// additionTokens returns the tokens the system-prompt additions and the
// summary block (when hasBlock) add to the request.
func (v *view) additionTokens(block string, hasBlock bool) int {
	_, _, t := v.leadChange(v.systemAdditions(block, hasBlock), false)
	if hasBlock && v.user {
		t += v.messageTokens("user", block)
	}
	return t
}

// boundary returns the edit that replaces the client messages
// [lead, dropTo) by the messages ins, keeping the body's separators
// elsewhere; false when there is nothing to do.
func (v *view) boundary(ins [][]byte) (edit, bool) {
	ms := v.req.messages
	a, b, n := v.lead, v.dropTo, len(ms)
	if a == b && len(ins) == 0 {
		return edit{}, false
	}
	join := bytes.Join(ins, []byte{','})
	switch {
	case b < n: // up to the first message kept
		if len(ins) > 0 {
			join = append(join, ',')
		}
		return edit{start: ms[a].start, end: ms[b].start, repl: join}, true
	case a > 0: // from the end of the last leading message to the end
		if len(ins) > 0 {
			join = append([]byte{','}, join...)
		}
		return edit{start: ms[a-1].end, end: ms[n-1].end, repl: join}, true
	case n > 0: // every message goes
		return edit{start: ms[0].start, end: ms[n-1].end, repl: join}, true
	default: // an empty array
		at := v.req.array.start + 1
		return edit{start: at, end: at, repl: join}, true
	}
}
