package rewrite

import (
	"strings"

	"github.com/ctxpress/ctxpress/wire"
)

// Rules for histories the upstream binds (wire.Conversation.Bound:
// Anthropic's thinking blocks, whose signature covers everything before
// them) and for standing instruction messages (Claude Code's role:"system"
// message). Each is a pure function of the history, the applied summary
// and the cut, so turn N+1 re-derives what turn N forwarded.

// standingTexts returns the texts of the standing instruction messages
// among the client messages [lead, cut) (wire.Conversation.
// StandingInstructions), in order: a summary or a cut that leaves them out
// keeps them verbatim at the end of the instructions, before the summary
// block, so Claude Code's environment and CLAUDE.md rules are never
// summarised away.
func (v *view) standingTexts(cut int) []string {
	req := v.req
	if !req.StandingInstructions {
		return nil
	}
	var out []string
	for i := v.lead; i < cut && i < len(req.Messages); i++ {
		if v.standing(i) {
			if t := messageText(req, i); t != "" {
				out = append(out, t)
			}
		}
	}
	return out
}

// standing reports whether client message i is a standing instruction
// message: an instruction message after the leading ones of a format
// whose instruction messages stand.
func (v *view) standing(i int) bool {
	return v.req.StandingInstructions && i >= v.lead && v.req.Messages[i].Role == wire.RoleInstruction && !v.omitted(i)
}

// pastStanding returns cut moved past the standing instruction messages
// that start at it: a kept history may not open with one (Anthropic takes
// a role:"system" message only after a user message), and a covered one
// is kept anyway.
func (v *view) pastStanding(cut int) int {
	for cut < len(v.req.Messages) && v.standing(cut) {
		cut++
	}
	return cut
}

// messageText is the text of message i's text and result items, joined
// by newlines.
func messageText(req *request, i int) string {
	var texts []string
	r := req.Messages[i].Items
	for it := r.Start; it < r.End; it++ {
		if k := req.Items[it].Kind; k != wire.KindOpaque && k != wire.KindToolCall && req.Items[it].Content.Exists() {
			texts = append(texts, req.f.Text(req.Conversation, it))
		}
	}
	return strings.Join(texts, "\n")
}

// boundShape is what the thinking rules read of one client message.
type boundShape struct {
	role  wire.Role
	omit  bool // not forwarded (a /compact exchange)
	bound bool // it carries bound items
}

// leaveOutBefore returns where the kept messages [cut, …) whose bound items
// are left out end: before the latest user ask of the request the applied
// summary was made for (its first since messages), when that ask is kept.
// -1 (nothing left out) when no summary or cut applies (cut <= lead), when
// since is unknown (0), or when that ask is covered.
//
// The bound items kept after a summary were produced over the history it
// replaced, except those the upstream produced after the summary was first
// applied. Those before the compaction's ask belong to earlier user turns:
// Anthropic lets a request leave earlier turns' thinking out, so they are,
// on every request with the summary from the compaction's on, which
// therefore forwards them alike. The ones after it may be the current tool
// loop's, whose latest thinking must stay: they are kept, and the request
// asks the upstream to drop those whose prefix changed (see dropAsked).
func leaveOutBefore(ms []boundShape, lead, cut, since int) int {
	if cut <= lead || since <= 0 {
		return -1
	}
	for i := min(since, len(ms)) - 1; i >= cut; i-- {
		if ms[i].role == wire.RoleUser && !ms[i].omit {
			return i
		}
	}
	return -1
}

// dropAsked reports whether a request asks the upstream to drop the bound
// items whose prefix changed (wire.Binder.DropMismatched): when a summary
// or cut applies and some kept message forwards bound items (its items
// not left out before end, or a message that has nothing else). The set
// of such messages only grows as the history does, so once a request of a
// summary asks, every later one with it asks too.
func dropAsked(ms []boundShape, lead, cut, end int, keptWhole func(i int) bool) bool {
	if cut <= lead {
		return false
	}
	for i := cut; i < len(ms); i++ {
		if ms[i].bound && !ms[i].omit && (i >= end || keptWhole(i)) {
			return true
		}
	}
	return false
}

// boundEdits appends to edits the thinking rules' edits of the messages
// forwarded after a summary or cut: their bound items left out before
// leaveOutBefore, and the request's ask to drop mismatched ones
// (dropAsked); and those of the messages a prune batch changed the prefix
// of (prunePlan.leavesOut): their bound items left out, as the ask that
// decided the batch allowed, and a drop asked for where a message has
// nothing else to keep. It counts them in res.
func (v *view) boundEdits(edits []wire.Edit, res *Result) []wire.Edit {
	req := v.req
	binder, ok := req.f.(wire.Binder)
	if !req.Bound || !ok || v.dropTo <= v.lead && len(v.prune.spans) == 0 && !v.missed {
		return edits
	}
	ms := make([]boundShape, len(req.Messages))
	for i := range req.Messages {
		ms[i] = boundShape{role: req.Messages[i].Role, omit: v.omitted(i)}
		for _, it := range req.ItemsOf(i) {
			ms[i].bound = ms[i].bound || it.Bound
		}
	}
	since := 0
	if v.branch != nil {
		since = v.branch.Since
	}
	end := leaveOutBefore(ms, v.lead, v.dropTo, since)
	whole, prunedWhole := map[int]bool{}, false
	for i := v.dropTo; i < len(ms); i++ {
		pruned := v.prune.leavesOut(i)
		if i >= end && !pruned || !ms[i].bound || ms[i].omit {
			continue
		}
		eds, tokens, ok := binder.LeaveOut(req.Conversation, i, req.count)
		if !ok {
			whole[i] = true
			prunedWhole = prunedWhole || pruned
			continue
		}
		at := req.Messages[i].Start
		for _, e := range eds {
			edits = append(edits, wire.Edit{Start: at + e.Start, End: at + e.End, Repl: e.Repl})
		}
		res.TokensAfter -= tokens
		v.fwd[i] -= tokens
		res.ThinkingLeftOut++
	}
	// A summary sent before and not now (the client rewound, or a
	// provider compaction moved where ctxpress's coverage starts) leaves
	// the thinking produced under it bound to a prefix no longer sent.
	if dropAsked(ms, v.lead, v.dropTo, end, func(i int) bool { return whole[i] }) || prunedWhole || v.missed {
		if e, ok := binder.DropMismatched(req.Conversation); ok {
			edits = append(edits, e)
		}
		res.DropMismatched = true
	}
	return edits
}
