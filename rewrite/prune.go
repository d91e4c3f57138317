package rewrite

import (
	"strconv"
	"strings"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/squash"
)

// DefaultPruneMinTokens is PruneConfig.MinTokens when it is 0: a pruned
// line is about 60 tokens, and below this the line saves too little to
// be worth what the model no longer sees (see docs/features.md's measurement).
const DefaultPruneMinTokens = 500

// PruneConfig configures the pruning of old tool results: a tool result
// from before the current user turn whose content (as squashed) counts
// more than MinTokens is sent as one line instead (squash.Squasher.
// PruneLine: the tool, its command or path, the exit status and size the
// output shows, its first error), with no model call. The tools squash
// keeps whole (its exempt tools, file reads through a shell) are never
// pruned.
type PruneConfig struct {
	// Enabled turns pruning on. The zero value is off.
	Enabled bool
	// MinTokens is the least a result's content must count to be pruned.
	// 0 means DefaultPruneMinTokens; negative means any result its line
	// is shorter than.
	MinTokens int
}

// minTokens returns the effective minimum.
func (c PruneConfig) minTokens() int {
	switch {
	case c.MinTokens == 0:
		return DefaultPruneMinTokens
	case c.MinTokens < 0:
		return 0
	}
	return c.MinTokens
}

// prunePlan is which tool results a request sends as their pruned line.
// Their replacements ride in the request's dedupPlan as stubs (so that
// tokens, fit, render and the summariser's transcript see them as sent);
// prunePlan tells them apart from dedup's.
type prunePlan struct {
	turns map[int]int // pruned result item -> its history.PruneMark.Turn
	saved int         // content tokens they save
	// spans are the batches of every valid mark, forwarded or not: Turn ->
	// the message of the batch's first result.
	spans map[int]int
	// declined is how many results a batch this request decided left as
	// they were, because the cost model said the rewrite does not pay.
	declined int
}

// leavesOut reports whether the thinking of message i was produced over
// a result a later batch pruned: it lies between a batch's first result
// and the ask that decided it.
func (pp prunePlan) leavesOut(i int) bool {
	for turn, first := range pp.spans {
		if first < i && i < turn {
			return true
		}
	}
	return false
}

// prunedLine is a memoised pruned line and its tokens.
type prunedLine struct {
	text   string
	tokens int
	origin expand.Original // the original its way back names (Config.Expand)
}

// planPrune adds the pruned results to plan: those prev names (sent
// pruned before, so sent pruned again: a dedup that now supersedes one
// gives way), and, on the request that opens a user turn (its last
// message is the ask), one batch of the results before that ask that are
// not pruned yet, deduped, exempt or under the minimum: all of them
// without econ, else the latest of them from the start econ says saves
// most, none when no start pays (batchStart). What a batch leaves stays
// as it was for the rest of the turn: the later requests of the turn open
// no batch, so the prefix is rewritten at most once per user turn. A
// request on a history the provider keeps is never pruned.
func (p *Pipeline) planPrune(v *view, plan *dedupPlan, prevDedups map[int]bool, prev map[int]int, econ *Economics) prunePlan {
	var pp prunePlan
	req, a := v.req, v.a
	if !p.cfg.Prune.Enabled || req.ServerHistory {
		return pp
	}
	for k := range a.results {
		r := &a.results[k]
		turn, ok := prev[r.item]
		if !ok || prevDedups[r.item] {
			continue
		}
		if first, seen := pp.spans[turn]; !seen || r.msg < first {
			pp.spanOf(turn, r.msg)
		}
		if !v.forwardedMessage(r.msg) || !req.Items[r.item].Content.Exists() {
			continue
		}
		plan.unstub(req, r.item)
		line := p.pruneLine(v, k)
		pp.add(plan, req, r.item, line, a.resultFacts(k).contentAfter-line.tokens, turn)
	}
	u := v.currentAsk()
	if u < 0 || u != len(req.Messages)-1 || v.command || req.ProviderCompacts {
		return pp // no new batch; the client's compaction prunes nothing new
	}
	var batch []int // a.results indexes
	for k := range a.results {
		if r := &a.results[k]; r.msg < u && p.prunable(v, plan, pp, k) {
			batch = append(batch, k)
		}
	}
	if len(batch) == 0 {
		return pp
	}
	saves := make([]int, len(batch))
	for j, k := range batch {
		line := p.pruneLine(v, k)
		saves[j] = a.resultFacts(k).contentAfter - line.tokens
		pp.add(plan, req, a.results[k].item, line, saves[j], u)
	}
	from := v.batchStart(*plan, batch, saves, u, econ)
	for j := range from {
		pp.remove(plan, req, a.results[batch[j]].item, saves[j])
	}
	pp.declined = from
	if from < len(batch) {
		pp.spanOf(u, a.results[batch[from]].msg)
	}
	return pp
}

// batchStart returns where the batch (a.results indexes, in body order,
// each saving saves[j], all of them stubbed in plan) starts: the results
// from it on are pruned together, those before it left as they were. A
// rewrite makes the provider read again everything from its first change
// to the ask u, so econ weighs each start — what the results from it on
// remove, against what they make uncached — and the start that saves
// most is taken; len(batch) when none pays. Without econ the whole batch
// is taken.
func (v *view) batchStart(plan dedupPlan, batch, saves []int, u int, econ *Economics) int {
	if econ == nil {
		return 0
	}
	a := v.a
	first := a.results[batch[0]].msg
	after := make([]int, u-first+1) // after[i-first]: tokens of messages [i, u) as plan forwards them
	for i := u - 1; i >= first; i-- {
		after[i-first] = after[i+1-first] + v.tokensUnder(plan, i, i+1)
	}
	best, bestSaving, removed := len(batch), 0.0, 0
	for j := len(batch) - 1; j >= 0; j-- {
		removed += saves[j]
		m := a.results[batch[j]].msg
		if s := econ.Saving(PrefixChange{Removed: removed, Rebuilt: after[m-first]}); s > bestSaving {
			best, bestSaving = j, s
		}
	}
	return best
}

// prunable reports whether result k (an a.results index) may join a
// batch: forwarded, of a known call, with content, not sent otherwise
// (pruned, deduped), not an output squash keeps whole, over the minimum,
// and longer than its line.
func (p *Pipeline) prunable(v *view, plan *dedupPlan, pp prunePlan, k int) bool {
	req, a := v.req, v.a
	r := &a.results[k]
	if !r.keyed || !v.forwardedMessage(r.msg) || !req.Items[r.item].Content.Exists() {
		return false
	}
	if _, sent := pp.turns[r.item]; sent {
		return false
	}
	if _, deduped := plan.items[r.item]; deduped {
		return false
	}
	tokens := a.resultFacts(k).contentAfter
	if tokens <= p.cfg.Prune.minTokens() || p.keepsWhole(req, r) {
		return false
	}
	return p.pruneLine(v, k).tokens < tokens
}

// keepsWhole is squash's KeepsWhole of the call result r answers,
// remembered by the call's key (its tool and canonical arguments, which
// give the same command): reading a shell command again for every old
// result on every turn was a tenth of a long conversation's turn.
func (p *Pipeline) keepsWhole(req *request, r *resultRef) bool {
	if !r.keyed || r.call < 0 {
		return p.shell.KeepsWhole(resultCall(req, r))
	}
	key := newKey(kindKeepsWhole, r.key.tool, string(r.key.args[:]))
	if v, ok := p.cache.get(key); ok {
		return v.(bool)
	}
	keep := p.shell.KeepsWhole(resultCall(req, r))
	p.cache.add(key, keep, 0)
	return keep
}

// resultCall is the call result r answers, as squash reads it.
func resultCall(req *request, r *resultRef) squash.Call {
	c := squash.Call{Tool: r.key.tool}
	if !r.keyed {
		c.Tool = req.Items[r.item].Tool
	}
	if r.call >= 0 {
		c.Args = req.f.Arguments(req.Conversation, r.call)
	}
	return c
}

// pruneLine returns the pruned line of result k (an a.results index) and
// its tokens, from the cache when its message was seen before with the
// same call.
func (p *Pipeline) pruneLine(v *view, k int) prunedLine {
	req, a := v.req, v.a
	r := &a.results[k]
	h := a.hashes[r.msg]
	key := newKey(kindPrune, req.f.Name(), string(v.enc), r.key.tool, string(r.key.args[:]), string(h[:]), strconv.Itoa(r.ord))
	if c, ok := p.cache.get(key); ok {
		return c.(prunedLine)
	}
	output := req.f.Text(req.Conversation, r.item)
	text := p.shell.PruneLine(resultCall(req, r), output)
	// A copy of the line's own size: PruneLine may return a slice of the
	// result's text or a builder's larger buffer.
	pl := prunedLine{text: strings.Clone(text), tokens: p.counter.Count(v.enc, text)}
	if p.cfg.Expand != nil {
		pl.origin = expand.Original{Ref: expand.Ref(output), Kind: expand.KindPrune, Tool: r.key.tool}
	}
	p.cache.add(key, pl, int64(len(text)+len(pl.origin.Ref)+len(pl.origin.Tool)+16))
	return pl
}

// add sends result item it as line, saving save content tokens, in
// plan, and notes it pruned by the batch of turn.
func (pp *prunePlan) add(plan *dedupPlan, req *request, it int, line prunedLine, save, turn int) {
	if pp.turns == nil {
		pp.turns = map[int]int{}
	}
	pp.turns[it] = turn
	pp.saved += save
	plan.stub(req, it, line.text, line.tokens, save)
	plan.origin(it, line.origin)
}

// remove undoes add.
func (pp *prunePlan) remove(plan *dedupPlan, req *request, it, save int) {
	delete(pp.turns, it)
	pp.saved -= save
	plan.unstub(req, it)
}

// spanOf notes that the batch of turn starts at message first.
func (pp *prunePlan) spanOf(turn, first int) {
	if pp.spans == nil {
		pp.spans = map[int]int{}
	}
	pp.spans[turn] = first
}

// stub makes plan send result item it as text (tokens), saving save.
func (plan *dedupPlan) stub(req *request, it int, text string, tokens, save int) {
	if plan.items == nil {
		plan.items, plan.replace = map[int]int{}, map[int]bool{}
	}
	if plan.stubs == nil {
		plan.stubs, plan.stubTokens = map[int]string{}, map[int]int{}
	}
	plan.items[it], plan.stubs[it], plan.stubTokens[it] = save, text, tokens
	plan.saved += save
	plan.replace[req.Items[it].Message] = true
}

// unstub makes plan send result item it as squash left it.
func (plan *dedupPlan) unstub(req *request, it int) {
	save, ok := plan.items[it]
	if !ok {
		return
	}
	delete(plan.items, it)
	delete(plan.stubs, it)
	delete(plan.stubTokens, it)
	delete(plan.origins, it)
	plan.saved -= save
	m := req.Items[it].Message
	plan.replace[m] = false
	for other := range plan.items {
		if req.Items[other].Message == m {
			plan.replace[m] = true
		}
	}
}

// tokensUnder returns the tokens of client messages [from, to) as plan
// forwards them: what a change starting at message from makes the
// provider read uncached again, up to the end of the previous request.
func (v *view) tokensUnder(plan dedupPlan, from, to int) int {
	n := 0
	for i := from; i < to; i++ {
		switch f := v.a.facts[i]; {
		case v.omitted(i):
		case plan.replace[i]:
			n += plan.forwardedTokens(v.req, i, f)
		default:
			n += f.after
		}
	}
	return n
}

// currentAsk returns the current user turn's ask: the last forwarded
// client message that is a user message (not one that carries tool
// results), -1 when none is forwarded.
func (v *view) currentAsk() int {
	for i := len(v.req.Messages) - 1; i >= v.dropTo; i-- {
		if v.isUser(i) {
			return i
		}
	}
	return -1
}

// forwardedMessage reports whether client message i is forwarded as
// itself: not left out by a summary or a cut, not part of a /compact
// exchange.
func (v *view) forwardedMessage(i int) bool {
	return (i < v.lead || i >= v.dropTo) && !v.omitted(i) && v.req.ProviderReads(i)
}

// prevPrunes returns, for the result items marks name in req as it is
// now, the turn of the batch that pruned each: a mark counts when its
// message is still there, unchanged, with that many results.
func (p *Pipeline) prevPrunes(req *request, a *analysis, marks []history.PruneMark) map[int]int {
	var out map[int]int
	for _, mk := range marks {
		i := mk.Index
		if i < 0 || i >= len(req.Messages) || mk.Result < 0 || mk.Turn <= i || p.messageDigest(req, i, a.hashes[i]) != mk.Digest {
			continue
		}
		it := nthResult(req, i, mk.Result)
		if it < 0 {
			continue
		}
		if out == nil {
			out = make(map[int]int, len(marks))
		}
		out[it] = mk.Turn
	}
	return out
}

// pruneMarks returns the marks of the results req sends pruned, and of
// those prev names that it does not forward (a summary covers them), so
// that a later request without that summary prunes them as before; in
// body order.
func (p *Pipeline) pruneMarks(req *request, a *analysis, pp prunePlan, prev map[int]int, prevDedups map[int]bool) []history.PruneMark {
	var marks []history.PruneMark
	for _, r := range a.results {
		turn, ok := pp.turns[r.item]
		if !ok {
			turn, ok = prev[r.item]
			ok = ok && !prevDedups[r.item] && p.cfg.Prune.Enabled && !req.ServerHistory
		}
		if ok {
			marks = append(marks, history.PruneMark{Index: r.msg, Result: r.ord, Digest: p.messageDigest(req, r.msg, a.hashes[r.msg]), Turn: turn})
		}
	}
	return marks
}

// account moves the pruned results out of res's dedup figures (the plan
// render counted carries them as stubs) into its prune figures, and takes
// their marks out of res.Dedups.
func (pp prunePlan) account(res *Result, a *analysis) {
	res.Pruned, res.PruneSavedTokens, res.PruneDeclined = len(pp.turns), pp.saved, pp.declined
	if len(pp.turns) == 0 {
		return
	}
	res.Deduped -= len(pp.turns)
	res.DedupSavedTokens -= pp.saved
	pruned := map[[2]int]bool{}
	for _, r := range a.results {
		if _, ok := pp.turns[r.item]; ok {
			pruned[[2]int{r.msg, r.ord}] = true
		}
	}
	kept := res.Dedups[:0]
	for _, d := range res.Dedups {
		if !pruned[[2]int{d.Index, d.Result}] {
			kept = append(kept, d)
		}
	}
	if len(kept) == 0 {
		kept = nil
	}
	res.Dedups = kept
}
