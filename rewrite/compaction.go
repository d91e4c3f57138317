package rewrite

import (
	"crypto/sha256"
	"strings"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// Compaction describes what a compaction of this request would summarise.
// Indexes are into the client's messages as sent.
type Compaction struct {
	// [From, Cut) are summarised now; From is Lead plus the Covered of the
	// applied branch (its messages are in PrevSummary already).
	From, Cut int
	// Messages are the client's messages [0, len) as the compactor sees
	// them: tool results as forwarded (squashed, or DedupPlaceholder).
	// compactor.Transcript(Messages[From:Cut], …) is the transcript.
	Messages []compactor.Message
	// PrevSummary and Parent are the applied branch's Summary and Hash
	// ("" and zero when none): the summary to update, the branch extended;
	// PrevKept its block's line on the messages kept.
	PrevSummary, PrevKept string
	Parent                [sha256.Size]byte
	// Covered (Cut - Lead) and Hash are the new branch's.
	Covered int
	Hash    [sha256.Size]byte
	// Since is how many client messages the request has (the /compact
	// command left out): the new branch's Since.
	Since int
	// LatestUserAsk is the text of the latest user message (not the
	// /compact command), for compactor.SeedActiveTask.
	LatestUserAsk string
	// SummarisedTokens are the tokens of [From, Cut) as forwarded.
	SummarisedTokens int
	// KeptTokens estimates the request after the compaction without the
	// summary itself: the leading system messages (with ConciseInstruction
	// if asked), the raw tail, the re-sent latest user message when the
	// cut covers it, and the tools. Add SummaryTokens(summary, kept) for
	// the whole.
	KeptTokens int

	v *view // the request's view, for SummaryTokens
}

// Compaction proposes a compaction of this request: compactor.Cut from the
// end of the applied summary's coverage, keeping at least keepRecent
// messages and keepRecentTokens tokens (as forwarded) raw. With a /compact
// command, the command message is not part of the plan (the cut is within
// messages[:len-1]). ok is false when nothing can be summarised, or when
// the Result is not Understood. It neither re-parses nor re-tokenises:
// RewriteWith's analysis and caches serve it.
func (r Result) Compaction(keepRecent, keepRecentTokens int) (Compaction, bool) {
	v := r.view
	if v == nil {
		return Compaction{}, false
	}
	n := v.planned()
	from := v.lead
	if v.branch != nil {
		from += v.branch.Covered
	}
	cut, ok := compactor.Cut(v.skeleton()[:n], from, keepRecent, keepRecentTokens, func(i int) int { return v.fwd[i] })
	if !ok {
		return Compaction{From: from, Cut: from}, false
	}
	cut = min(v.pastStanding(cut), n)
	c := Compaction{From: from, Cut: cut, Covered: cut - v.lead, Since: n, Messages: v.fullMessages(), v: v}
	c.Hash = v.extendChain(v.chain, c.Covered)[c.Covered]
	if v.branch != nil {
		c.PrevSummary, c.PrevKept, c.Parent = v.branch.Summary, v.branch.Kept.Note, v.branch.Hash
	}
	for i := n - 1; i >= 0; i-- {
		if v.isUser(i) {
			c.LatestUserAsk = c.Messages[i].Text
			break
		}
	}
	for i := from; i < cut; i++ {
		c.SummarisedTokens += v.fwd[i]
	}
	c.KeptTokens = v.fixed + v.additionTokens("", false, cut, n)
	for i := range v.lead {
		c.KeptTokens += v.fwd[i]
	}
	for i := cut; i < n; i++ {
		c.KeptTokens += v.fwd[i]
	}
	if u := v.resendAfter(cut, n); u >= 0 {
		c.KeptTokens += v.fwd[u]
	}
	return c, true
}

// SummaryTokens returns the tokens the block for summary (with kept, its
// line on the messages kept: compactor.Block) adds to this request, where
// the Options place it with the applied branch's coverage (or none):
// SummaryTokens(PrevSummary, PrevKept) is what the applied block costs.
// For a proposed compaction use Compaction.SummaryTokens, which is exact
// for its cut; this differs from it by a few tokens at most, when the
// block goes into a user message. It counts with the request's encoding,
// through the pipeline's cache; 0 when the Result is not Understood.
func (r Result) SummaryTokens(summary, kept string) int {
	v := r.view
	if v == nil {
		return 0
	}
	return v.summaryTokens(summary, kept, v.dropTo)
}

// SummaryTokens returns the tokens the block for summary (and kept)
// adds to the request after this compaction: KeptTokens + SummaryTokens
// is the compacted request. 0 for a Compaction Result.Compaction did not
// return.
func (c Compaction) SummaryTokens(summary, kept string) int {
	if c.v == nil {
		return 0
	}
	return c.v.summaryTokens(summary, kept, c.Cut)
}

// summaryTokens is the tokens the block for summary and kept adds with
// client messages [lead, cut) left out.
func (v *view) summaryTokens(summary, kept string, cut int) int {
	n := v.planned()
	return v.additionTokens(compactor.Block(summary, kept), true, cut, n) - v.additionTokens("", false, cut, n)
}

// planned returns how many client messages a compaction plans over: all
// of them but the /compact command.
func (v *view) planned() int {
	if v.command {
		return len(v.req.Messages) - 1
	}
	return len(v.req.Messages)
}

// Replaced returns the client's messages the compaction's summary block
// replaces, [Cut-Covered, Cut), as the client sent them (tool results
// whole: neither squashed nor deduplicated), for the transcript kept of
// them (compactor.KeptTranscript); first is the index of the first in the
// client's messages. It decodes them again, which only a compaction pays
// for. Nil for a Compaction Result.Compaction did not return.
func (c Compaction) Replaced() (first int, msgs []compactor.Message) {
	if c.v == nil {
		return 0, nil
	}
	first = c.Cut - c.Covered
	return first, c.v.messages(first, c.Cut, false)
}

// fullMessages returns the client's messages as the compactor sees them:
// the skeleton with texts, tool-call names and arguments filled in, tool
// results as forwarded. It decodes every content, which only a compaction
// (rare, and followed by a model call) pays for.
func (v *view) fullMessages() []compactor.Message {
	return v.messages(0, len(v.req.Messages), true)
}

// messages returns the client's messages [from, to) as fullMessages
// does: their tool results as forwarded, or as sent when forwarded is
// false.
func (v *view) messages(from, to int, forwarded bool) []compactor.Message {
	req := v.req
	out := make([]compactor.Message, to-from)
	for i := from; i < to; i++ {
		m, f := &req.Messages[i], v.a.facts[i]
		cm := &out[i-from]
		cm.Role, cm.Name, cm.Omit = m.Role, m.Name, v.omitted(i)
		if r := req.Result(i); r >= 0 {
			cm.ToolCallID = req.Items[r].CallID
		}
		if !m.Object {
			cm.Text = string(req.Bytes(i))
			continue
		}
		// A standing instruction message is kept verbatim, never
		// summarised (standingTexts).
		cm.Omit = cm.Omit || v.standing(i)
		if forwarded {
			cm.Text = v.forwardedText(i, f)
		} else {
			cm.Text = v.sentText(i)
		}
		cm.ToolCalls = toolCallsFull(req, i)
	}
	return out
}

// sentText is the text of message i as the client sent it: its text and
// result items joined by newlines.
func (v *view) sentText(i int) string {
	req := v.req
	var texts []string
	r := req.Messages[i].Items
	for it := r.Start; it < r.End; it++ {
		if item := &req.Items[it]; item.Kind != wire.KindOpaque && item.Kind != wire.KindToolCall && item.Content.Exists() {
			texts = append(texts, req.f.Text(req.Conversation, it))
		}
	}
	return strings.Join(texts, "\n")
}

// forwardedText is the text of message i (whose facts are f) as
// forwarded: its text and result items, each result as dedup replaced it
// or as squashed, joined by newlines.
func (v *view) forwardedText(i int, f *facts) string {
	req := v.req
	var texts []string
	r := req.Messages[i].Items
	for it := r.Start; it < r.End; it++ {
		item := &req.Items[it]
		switch {
		case item.Kind == wire.KindOpaque || item.Kind == wire.KindToolCall || !item.Content.Exists():
		case item.Kind == wire.KindToolResult && v.dedup.items[it] > 0:
			texts = append(texts, v.dedup.text(it))
		case item.Kind == wire.KindToolResult && len(f.edits) > 0:
			texts = append(texts, squashedText(req, it, f.edits))
		default:
			texts = append(texts, req.f.Text(req.Conversation, it))
		}
	}
	return strings.Join(texts, "\n")
}

// squashedText is the text of result item r as forwarded: its text parts,
// each squashed one as its edit (relative to the message start) has it,
// joined by newlines as the format's Text joins them.
func squashedText(req *request, r int, edits []wire.Edit) string {
	at := req.Messages[req.Items[r].Message].Start
	var b []byte
	for _, part := range req.f.Parts(req.Conversation, r, nil) {
		if !part.IsText {
			continue
		}
		text := part.Text
		for _, e := range edits {
			if part.Span.Exists() && e.Start == part.Span.Start-at {
				text = gjson.ParseBytes(e.Repl).Str
				break
			}
		}
		if len(b) > 0 {
			b = append(b, '\n')
		}
		b = append(b, text...)
	}
	return string(b)
}

// toolCallsFull returns the calls message i makes with their names and
// arguments as the model wrote them.
func toolCallsFull(req *request, i int) []compactor.ToolCall {
	var out []compactor.ToolCall
	r := req.Messages[i].Items
	for it := r.Start; it < r.End; it++ {
		if c := &req.Items[it]; c.Kind == wire.KindToolCall {
			out = append(out, compactor.ToolCall{ID: c.CallID, Name: c.Tool, Arguments: req.f.Arguments(req.Conversation, it)})
		}
	}
	return out
}

// HistoryChain returns the chain hashes h_0 … h_n of the request's client
// messages after the leading system messages (h_0 is zero; h_i = sha256(h_(i-1) || canonical digest)):
// h_k names the first k of them, so a request extends an earlier one of k
// messages exactly when its h_k equals that request's h_k. nil when the
// Result is not Understood. Each message's canonical digest is cached, so a
// warm turn hashes 64 bytes per message.
func (r Result) HistoryChain() [][sha256.Size]byte {
	v := r.view
	if v == nil {
		return nil
	}
	return v.extendChain(v.chain, len(v.req.Messages)-v.lead)
}

// AppliedHash returns the Hash of the stored summary applied to this
// request, false when none was.
func (r Result) AppliedHash() ([sha256.Size]byte, bool) {
	if r.view == nil || r.view.branch == nil {
		return [sha256.Size]byte{}, false
	}
	return r.view.branch.Hash, true
}
