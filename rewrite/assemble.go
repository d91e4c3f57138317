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
//     system message (when the additions have nowhere else to go), a user
//     message with the user-side additions (when no user message follows
//     to take them), the re-sent user message;
//   - the user-side additions (PlacementUser) at the head of the first
//     user message forwarded: the re-sent one, or the first client message
//     kept;
//   - the squash and dedup edits of the messages forwarded after it, and
//     the Omit messages among them cut out with the separator before them.
//
// The leading system messages are never tool results, so they carry no
// squash or dedup edit and the edits come out in body order.
func (v *view) render(plan dedupPlan, res *Result) {
	req, a := v.req, v.a
	n := len(req.messages)
	first := firstKept(v.msgs, v.dropTo)
	res.TokensBefore = v.fixed
	res.TokensAfter = v.fixed - plan.saved
	res.DedupSavedTokens = plan.saved
	for i, f := range a.facts {
		res.TokensBefore += f.before
		if (i < v.lead || i >= v.dropTo) && !v.msgs[i].Omit {
			res.TokensAfter += f.after
		}
	}

	var block string
	if v.branch != nil {
		block = compactor.Block(v.branch.Summary)
	}
	sysAdds, userAdds := v.additions(block, v.branch != nil)
	var edits []edit
	sys, newSys, tokens := v.leadChange(sysAdds, true)
	res.TokensAfter += tokens
	if sys != nil {
		edits = append(edits, *sys)
	}
	var inserted [][]byte
	if newSys != nil {
		inserted = append(inserted, newSys)
	}
	uc := v.userChange(userAdds, v.dropTo, n, true)
	res.TokensAfter += uc.tokens
	if uc.msg != nil {
		inserted = append(inserted, uc.msg)
	}
	if v.resend >= 0 {
		m := req.messages[v.resend].bytes()
		if uc.into == v.resend {
			m = splice(m, []edit{uc.merge})
		}
		inserted = append(inserted, m)
		res.TokensAfter += a.facts[v.resend].after
	}
	if e, ok := v.boundary(first, inserted); ok {
		edits = append(edits, e)
	}
	if uc.into == first {
		at := req.messages[first].start
		edits = append(edits, edit{start: at + uc.merge.start, end: at + uc.merge.end, repl: uc.merge.repl})
	}

	edits = v.tailEdits(edits, first, plan, res)
	if len(edits) > 0 {
		res.Body = splice(req.body, edits)
		res.Changed = true
		res.BytesAfter = len(res.Body)
	}
}

// tailEdits appends to edits those of the client messages forwarded from
// first on, and counts the squashes and dedups in res: each squash edit,
// each dedup, and the cut of each run of Omit messages (with the comma
// before it: message first is forwarded, so one is always there).
func (v *view) tailEdits(edits []edit, first int, plan dedupPlan, res *Result) []edit {
	ms, n := v.req.messages, len(v.req.messages)
	for i := first; i < n; i++ {
		m, f := &ms[i], v.a.facts[i]
		switch {
		case v.msgs[i].Omit:
			j := i + 1
			for j < n && v.msgs[j].Omit {
				j++
			}
			edits = append(edits, edit{start: ms[i-1].end, end: ms[j-1].end})
			i = j - 1
		case plan.replace[i]:
			edits = append(edits, placeholderEdit(m))
			res.Deduped++
		default:
			res.Squashed += f.squashed
			res.SquashStats = append(res.SquashStats, f.stats...)
			for _, e := range f.edits {
				edits = append(edits, edit{start: m.start + e.start, end: m.start + e.end, repl: e.repl})
			}
		}
	}
	return edits
}

// additions returns what goes at the end of the system prompt and what
// goes at the head of the first user message, each in order:
// ConciseInstruction, then the summary block (hasBlock). The instruction
// stays in the system prompt when the client sent one; the block goes
// where the placement says.
func (v *view) additions(block string, hasBlock bool) (sys, user []string) {
	if v.concise {
		if v.lead > 0 || !v.user {
			sys = append(sys, ConciseInstruction)
		} else {
			user = append(user, ConciseInstruction)
		}
	}
	if hasBlock {
		if v.user {
			user = append(user, block)
		} else {
			sys = append(sys, block)
		}
	}
	if v.fitNote != "" {
		if v.user {
			user = append(user, v.fitNote)
		} else {
			sys = append(sys, v.fitNote)
		}
	}
	return sys, user
}

// userChange is how the user-side additions change a request.
type userChange struct {
	into   int    // the client message they go into: the re-sent one or the first kept; -1
	merge  edit   // the edit of that message, offsets relative to its start
	msg    []byte // else a user message of their own, inserted at the boundary
	tokens int    // tokens they add to the request
}

// userChange returns how adds change the request when client messages
// [lead, cut) are left out and [cut, n) kept: they go at the head of the
// first user message forwarded, so that no two user messages follow each
// other; only when none follows (or its content is of no known shape)
// are they a user message of their own, followed by an assistant message.
// With build false only the tokens are computed.
func (v *view) userChange(adds []string, cut, n int, build bool) userChange {
	uc := userChange{into: -1}
	if len(adds) == 0 {
		return uc
	}
	text := strings.Join(adds, "\n\n")
	into := -1
	if cut > v.lead {
		into = resendAfterSummary(v.msgs[:n], v.lead, cut)
	}
	if f := firstKept(v.msgs[:n], cut); into < 0 && f < n && v.msgs[f].Role == "user" {
		into = f
	}
	if into >= 0 {
		m := &v.req.messages[into]
		if e, ok := mergeEdit(m, text); ok {
			merged := splice(m.bytes(), []edit{e})
			mm := parseMessage(merged, 0)
			uc.into, uc.merge = into, e
			uc.tokens = v.p.counter.messageTokens(v.enc, &mm) - v.a.facts[into].after
			return uc
		}
	}
	uc.tokens = v.messageTokens("user", text)
	if build {
		uc.msg = textMessage("user", text)
	}
	return uc
}

// mergeEdit returns the edit, relative to the start of m, that puts text
// at the head of m's content: before the string, a blank line between
// them; as a first text part of an array; as the content when it is null,
// empty or absent. false for a content of another shape.
func mergeEdit(m *message, text string) (edit, bool) {
	if !m.object {
		return edit{}, false
	}
	c := m.content
	if !c.exists() {
		at := m.end - 1 - m.start // the closing brace
		return edit{start: at, end: at, repl: append([]byte(`,"content":`), appendJSONString(nil, text)...)}, true
	}
	s, e := c.start-m.start, c.end-m.start
	switch m.body[c.start] {
	case '"':
		if c.end-c.start == 2 { // ""
			return edit{start: s, end: e, repl: appendJSONString(nil, text)}, true
		}
		q := appendJSONString(nil, text+"\n\n")
		return edit{start: s + 1, end: s + 1, repl: q[1 : len(q)-1]}, true
	case '[':
		repl := append([]byte(`{"type":"text","text":`), appendJSONString(nil, text)...)
		repl = append(repl, '}')
		if skipSpace(m.body, c.start+1) != c.end-1 { // not empty
			repl = append(repl, ',')
		}
		return edit{start: s + 1, end: s + 1, repl: repl}, true
	case 'n':
		return edit{start: s, end: e, repl: appendJSONString(nil, text)}, true
	}
	return edit{}, false
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

// additionTokens returns the tokens the additions (the summary block when
// hasBlock) add to the request when client messages [lead, cut) are left
// out and [cut, n) kept.
func (v *view) additionTokens(block string, hasBlock bool, cut, n int) int {
	sys, user := v.additions(block, hasBlock)
	_, _, t := v.leadChange(sys, false)
	return t + v.userChange(user, cut, n, false).tokens
}

// boundary returns the edit that replaces the client messages
// [lead, first) by the messages ins, keeping the body's separators
// elsewhere; false when there is nothing to do.
func (v *view) boundary(first int, ins [][]byte) (edit, bool) {
	ms := v.req.messages
	a, b, n := v.lead, first, len(ms)
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
