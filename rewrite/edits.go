package rewrite

import (
	"strings"
	"unicode/utf8"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/wire"
)

// Edits lists what Body does to the client's messages, in message order:
// the run a summary replaces, the run cut to fit the window or the
// history limit, then each message whose tool output is squashed,
// deduplicated or pruned (once, as the strongest of its results' edits),
// with its tokens as sent and as forwarded. nil when nothing was done or
// the Result is not Understood. It is read off what RewriteWith already
// counted: it counts nothing again but the summary block, through the
// pipeline's cache.
func (r Result) Edits() []history.Edit {
	v := r.view
	if v == nil {
		return nil
	}
	out := make([]history.Edit, 0, v.editCount())
	if cap(out) == 0 {
		return nil
	}
	if from := v.lead; v.dropTo > from {
		if v.branch != nil {
			to := from + v.branch.Covered
			out = append(out, history.Edit{Kind: history.EditSummarised, Index: from, Count: to - from,
				Before: v.tokensSent(from, to), After: r.SummaryTokens(v.branch.Summary, v.branch.Kept.Note)})
			from = to
		}
		if v.dropTo > from {
			out = append(out, history.Edit{Kind: history.EditCut, Index: from, Count: v.dropTo - from,
				Before: v.tokensSent(from, v.dropTo)})
		}
	}
	a := v.a
	k := 0 // a.results is in message order
	var names nameCopies
	for i := range a.facts {
		var kind history.EditKind
		name := ""
		prevStats := 0
		for ; k < len(a.results) && a.results[k].msg == i; k++ {
			rr := &a.results[k]
			stats := a.facts[i].results[rr.ord].stats
			var rk history.EditKind
			switch _, pruned := v.prune.turns[rr.item]; {
			case pruned:
				rk = history.EditPruned
			case v.dedup.items[rr.item] > 0:
				rk = history.EditDeduped
			case stats > prevStats:
				rk = history.EditSquashed
			}
			prevStats = stats
			if rk > kind {
				kind, name = rk, names.of(v.resultName(rr))
			}
		}
		if kind == 0 || !v.forwardedMessage(i) {
			continue
		}
		out = append(out, history.Edit{Kind: kind, Index: i, Count: 1, Name: name, Before: a.facts[i].before, After: v.fwd[i]})
	}
	return out
}

// tokensSent is the tokens of client messages [from, to) as sent, those
// the provider reads and ctxpress forwards in some form: not the /compact
// exchanges, nor a user ask re-sent verbatim after the run.
func (v *view) tokensSent(from, to int) int {
	n := 0
	for i := from; i < to; i++ {
		if i != v.resend && !v.omitted(i) && v.req.ProviderReads(i) {
			n += v.a.facts[i].before
		}
	}
	return n
}

// editCount is at most how many edits Edits lists: the runs, and the
// messages whose results are edited (for a capacity: one allocation).
func (v *view) editCount() int {
	n := 0
	if v.dropTo > v.lead {
		n += 2
	}
	for i, f := range v.a.facts {
		if f.squashed > 0 || v.dedup.replace[i] {
			n++
		}
	}
	return n
}

// resultName is the tool whose output rr is (its own, else its call's),
// else its message's role as sent; a view of the parse.
func (v *view) resultName(rr *resultRef) string {
	req := v.req
	name := req.Items[rr.item].Tool
	if name == "" && rr.call >= 0 {
		name = req.Items[rr.call].Tool
	}
	if name == "" {
		name = req.Messages[rr.msg].WireRole
	}
	return name
}

// nameCopies copies names out of a parse, which may view the request's
// body, once for a run of the same name: an agent's results are mostly
// one tool's.
type nameCopies struct{ view, copied string }

func (c *nameCopies) of(name string) string {
	if name != c.view || c.copied == "" {
		c.view, c.copied = name, strings.Clone(name)
	}
	return c.copied
}

// FirstAsk is the client's first user text that is not context a client
// wraps in tags (Claude Code's <system-reminder>, codex's
// <environment_context> and <user_instructions>): what the user first
// asked, whitespace collapsed, cut to at most max runes (an ellipsis
// ending a cut one). It looks at the first few user messages only; ""
// when none of them holds such a text or the Result is not Understood.
func (r Result) FirstAsk(max int) string {
	v := r.view
	if v == nil || max <= 0 {
		return ""
	}
	req := v.req
	users := 0
	for i := v.lead; i < len(req.Messages) && users < firstAskMessages; i++ {
		m := &req.Messages[i]
		if m.Role != wire.RoleUser || v.omitted(i) {
			continue
		}
		users++
		for it := m.Items.Start; it < m.Items.End; it++ {
			if req.Items[it].Kind != wire.KindUser || !req.Items[it].Content.Exists() {
				continue
			}
			for _, p := range req.f.Parts(req.Conversation, it, nil) {
				if ask := untagged(p.Text); p.IsText && ask != "" {
					return clip(ask, max)
				}
			}
		}
	}
	return ""
}

// firstAskMessages is how many user messages FirstAsk reads: codex sends
// its instructions and environment as two user messages before the ask.
const firstAskMessages = 4

// untagged is text without the blocks a client wraps its own context in
// (<tag …>…</tag>) at its start, trimmed; "" when nothing else is left.
func untagged(text string) string {
	text = strings.TrimSpace(text)
	for strings.HasPrefix(text, "<") {
		end := strings.IndexAny(text, " >")
		if end < 2 {
			break
		}
		closing := "</" + text[1:end] + ">"
		j := strings.Index(text, closing)
		if j < 0 {
			break
		}
		text = strings.TrimSpace(text[j+len(closing):])
	}
	return text
}

// clip collapses s's whitespace and cuts it to at most max runes, an
// ellipsis ending a cut text. The result is a copy: s may be a view of
// a request body.
func clip(s string, max int) string {
	cut := false
	if limit := 8 * max; len(s) > limit { // a pasted log is not collapsed whole
		for limit > 0 && !utf8.RuneStart(s[limit]) {
			limit--
		}
		s, cut = s[:limit], true
	}
	s = strings.Join(strings.Fields(s), " ")
	if cut || utf8.RuneCountInString(s) > max {
		n := 0
		for i := range s {
			if n == max-1 {
				return s[:i] + "…"
			}
			n++
		}
		return s + "…" // cut before collapsing, and short once collapsed
	}
	return strings.Clone(s)
}
