package rewrite

import (
	"slices"
	"strings"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/wire"
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
	n := len(req.Messages)
	first := v.firstKept(v.dropTo, n)
	res.TokensBefore = v.fixed
	res.TokensAfter = v.fixed - plan.saved
	res.DedupSavedTokens = plan.saved
	// The originals the body's markers name, in one allocation: every
	// turn reports them all (the caller keeps those it has not).
	if n := len(plan.origins) + countOriginals(a.facts); n > 0 {
		res.Originals = make([]Original, 0, n)
	}
	for i, f := range a.facts {
		if !req.ProviderReads(i) {
			continue // the provider reads from its latest compaction on
		}
		res.TokensBefore += f.before
		if (i < v.lead || i >= v.dropTo) && !v.omitted(i) {
			res.TokensAfter += f.after
		}
	}

	var block string
	if v.branch != nil {
		block = compactor.Block(v.branch.Summary, v.branch.Kept.Note)
	}
	sysAdds, userAdds := v.additions(block, v.branch != nil, v.dropTo)
	var edits []wire.Edit
	var sys *wire.Edit
	var newSys []byte
	if len(sysAdds) > 0 { // else nothing to add, and no method value of v to make
		var tokens int
		sys, newSys, tokens = req.f.AddInstructions(req.Conversation, sysAdds, req.count, v.counted, true)
		res.TokensAfter += tokens
	}
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
		m := req.Bytes(v.resend)
		if uc.into == v.resend {
			m = wire.Splice(m, []wire.Edit{uc.merge})
		}
		inserted = append(inserted, m)
		res.TokensAfter += a.facts[v.resend].after
	}
	if e, ok := req.f.ReplaceMessages(req.Conversation, v.lead, first, inserted); ok {
		edits = append(edits, e)
	}
	if uc.into == first {
		at := req.Messages[first].Start
		edits = append(edits, wire.Edit{Start: at + uc.merge.Start, End: at + uc.merge.End, Repl: uc.merge.Repl})
	}

	if from := v.firstRead(); from < v.lead {
		// Up to a provider's compaction and the outputs of its calls:
		// kept where the client put them, with their squash edits.
		edits = v.tailEdits(edits, from, v.lead, plan, res)
	}
	edits = v.tailEdits(edits, first, n, plan, res)
	edits = v.boundEdits(edits, res)
	// The instructions may sit after the messages (Anthropic's system
	// often follows them): the edits go in body order.
	if byStart := func(a, b wire.Edit) int { return a.Start - b.Start }; !slices.IsSortedFunc(edits, byStart) {
		slices.SortStableFunc(edits, byStart)
	}
	if len(edits) > 0 {
		res.Body = wire.Splice(req.Body, edits)
		res.Changed = true
		res.BytesAfter = len(res.Body)
	}
}

// firstRead is the first message after the leading instructions that the
// provider reads.
func (v *view) firstRead() int {
	from := v.req.Lead
	for from < v.lead && !v.req.ProviderReads(from) {
		from++
	}
	return from
}

// tailEdits appends to edits those of the client messages [first, end)
// forwarded, and counts the squashes and dedups in res: each squash edit,
// each dedup, and the cut of each run of Omit messages (with the comma
// before it: message first is forwarded, so one is always there).
func (v *view) tailEdits(edits []wire.Edit, first, n int, plan dedupPlan, res *Result) []wire.Edit {
	req := v.req
	for i := first; i < n; i++ {
		f := v.a.facts[i]
		switch {
		case v.omitted(i):
			j := i + 1
			for j < n && v.omitted(j) {
				j++
			}
			edits = append(edits, req.f.DropMessages(req.Conversation, i, j))
			i = j - 1
		case plan.replace[i]:
			edits = plan.appendEdits(edits, req, i, f, res)
		default:
			res.Squashed += f.squashed
			res.SquashStats = append(res.SquashStats, f.stats...)
			at := req.Messages[i].Start
			for _, e := range f.edits {
				edits = append(edits, wire.Edit{Start: at + e.Start, End: at + e.End, Repl: e.Repl})
			}
			res.Originals = appendOriginals(res.Originals, req, i, f.originals)
		}
	}
	return edits
}

// additions returns what goes at the end of the system prompt and what
// goes at the head of the first user message, each in order:
// ConciseInstruction, the standing instruction messages client messages
// [lead, cut) leave out (standingTexts), then the summary block
// (hasBlock). The instruction stays in the system prompt when the client
// sent one; the block goes where the placement says.
func (v *view) additions(block string, hasBlock bool, cut int) (sys, user []string) {
	if v.concise {
		if v.lead > 0 || !v.user {
			sys = append(sys, ConciseInstruction)
		} else {
			user = append(user, ConciseInstruction)
		}
	}
	sys = append(sys, v.standingTexts(cut)...)
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
	into   int       // the client message they go into: the re-sent one or the first kept; -1
	merge  wire.Edit // the edit of that message, offsets relative to its start
	msg    []byte    // else a user message of their own, inserted at the boundary
	tokens int       // tokens they add to the request
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
		into = v.resendAfter(cut, n)
	}
	if f := v.firstKept(cut, n); into < 0 && f < n && v.isUser(f) {
		into = f
	}
	if into >= 0 {
		if e, tokens, ok := v.req.f.PrependText(v.req.Conversation, into, text, v.req.count); ok {
			uc.into, uc.merge, uc.tokens = into, e, tokens
			return uc
		}
	}
	msg, tokens := v.req.f.NewMessage(wire.RoleUser, text, v.req.count)
	uc.tokens = tokens
	if build {
		uc.msg = msg
	}
	return uc
}

// additionTokens returns the tokens the additions (the summary block when
// hasBlock) add to the request when client messages [lead, cut) are left
// out and [cut, n) kept.
func (v *view) additionTokens(block string, hasBlock bool, cut, n int) int {
	sys, user := v.additions(block, hasBlock, cut)
	_, _, t := v.req.f.AddInstructions(v.req.Conversation, sys, v.req.count, v.counted, false)
	return t + v.userChange(user, cut, n, false).tokens
}

// counted is item it's content tokens as sent. A message of one item
// that squash left alone has them in its facts (the leading instructions'
// case), so an addition to the system prompt does not hash the prompt
// again on every turn; any other item is counted through the cache.
func (v *view) counted(it int) int {
	m := v.req.Items[it].Message
	if r := v.req.Messages[m].Items; r.End-r.Start == 1 && len(v.a.facts[m].edits) == 0 {
		return v.a.facts[m].contentAfter
	}
	return contentTokens(v.req, it)
}
