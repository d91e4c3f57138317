package rewrite

import (
	"bytes"
	"crypto/sha256"
	"fmt"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/wire"
)

// DedupPlaceholder replaces the content of a superseded tool result.
const DedupPlaceholder = "[duplicate result: superseded by a later call with the same arguments; see the later result]"

// RepeatStub replaces, in a bound history (wire.Conversation.Bound:
// Anthropic's thinking), the content of a tool result that repeats an
// earlier one word for word; %s is the earlier result's call id.
const RepeatStub = "[duplicate result: the same output as the result of call %s above (same tool and arguments); see that result]"

// supersedeShare: later read-only results all under 1/supersedeShare of an
// earlier one's tokens do not supersede it. It is a stub that points
// back to the earlier content (qwen-code's read_file answers a second
// read with "[File b.py unchanged since last read ...]"), or a slice of
// it; replacing the earlier one would leave the model neither copy.
const supersedeShare = 4

// dedupPlan is the set of tool results dedup replaces.
type dedupPlan struct {
	replace     map[int]bool // message index -> some result of it replaced
	items       map[int]int  // result item index -> content tokens its replacement saves
	saved       int          // content tokens saved in total
	placeholder int          // tokens of DedupPlaceholder
	// stubs are the replacements that are not DedupPlaceholder (a bound
	// history's RepeatStub), by result item, with their tokens.
	stubs      map[int]string
	stubTokens map[int]int
	// origins are the originals of the replaced results whose replacement
	// points to one (Config.Expand), without their text.
	origins map[int]expand.Original
}

// text is what result item it says when replaced.
func (plan dedupPlan) text(it int) string {
	if s, ok := plan.stubs[it]; ok {
		return s
	}
	return DedupPlaceholder
}

// tokens is the tokens of what result item it says when replaced.
func (plan dedupPlan) tokens(it int) int {
	if n, ok := plan.stubTokens[it]; ok {
		return n
	}
	return plan.placeholder
}

// planDedup decides which tool results to replace by DedupPlaceholder,
// result by result (a message may carry several). A result is superseded
// when a later result answers a call with the same key (tool name +
// canonical arguments) and says the same, or, for a call that only reads,
// anything but a stub (supersedes). Results whose call is unknown are
// never touched. The messages [dropFrom, dropTo) are not forwarded (a
// summary or the history limit replaces them): their results neither
// supersede nor are superseded, so dedup plans over the messages that
// remain.
//
// Replacing rewrites messages the provider has cached, so what the previous
// forwarded request replaced (prev: result item indexes) stays replaced,
// and the others are replaced only when together they save at least the
// configured minimum. prev only ever holds superseded results (a later
// turn keeps the result that superseded them), and one that is not
// superseded any more (the config changed) is not replaced.
func (p *Pipeline) planDedup(enc Encoding, req *request, a *analysis, dropFrom, dropTo int, prev map[int]bool, econ *Economics) dedupPlan {
	var plan dedupPlan
	if !p.cfg.Dedup.Enabled {
		return plan
	}
	if req.Bound {
		return p.planRepeats(enc, req, a, dropFrom, dropTo)
	}
	if len(a.results) == 0 {
		return plan // nothing to dedup; not even the placeholder to count
	}
	placeholder := p.counter.Count(enc, DedupPlaceholder)
	// By key: the a.results index of the nearest later result and the
	// tokens of the largest later one (one map: the two have the same keys).
	later := make(map[callKey]laterResults, len(a.results))
	fresh := 0      // tokens the replacements outside prev save
	firstFresh := 0 // the earliest message they are in
	for k := len(a.results) - 1; k >= 0; k-- {
		r := &a.results[k]
		if !r.keyed || (r.msg >= dropFrom && r.msg < dropTo) || !req.ProviderReads(r.msg) {
			continue
		}
		tokens := a.resultFacts(k).contentAfter
		l, ok := later[r.key]
		j, big := l.nearest, l.largest // big: the largest result of key after this one
		later[r.key] = laterResults{nearest: k, largest: max(big, tokens)}
		if !ok || !req.Items[r.item].Content.Exists() || !p.supersedes(req, a, k, j, big) {
			continue
		}
		save := tokens - placeholder
		var back dedupStub
		if p.cfg.Expand != nil {
			back = p.dedupStub(enc, req, a, k)
			save = tokens - back.tokens
		}
		if save <= 0 {
			continue
		}
		if plan.items == nil {
			plan.items = make(map[int]int)
		}
		if back.text != "" {
			if plan.stubs == nil {
				plan.stubs, plan.stubTokens = map[int]string{}, map[int]int{}
			}
			plan.stubs[r.item], plan.stubTokens[r.item] = back.text, back.tokens
			plan.origin(r.item, back.origin)
		}
		plan.items[r.item] = save
		plan.saved += save
		if !prev[r.item] {
			fresh += save
			firstFresh = r.msg
		}
	}
	if fresh > 0 && (fresh < p.cfg.Dedup.minTokens() || !freshDedupsPay(econ, req, a, fresh, firstFresh)) {
		for it, save := range plan.items {
			if !prev[it] {
				delete(plan.items, it)
				delete(plan.stubs, it)
				delete(plan.stubTokens, it)
				delete(plan.origins, it)
				plan.saved -= save
			}
		}
	}
	if len(plan.items) == 0 {
		return dedupPlan{}
	}
	plan.replace = make(map[int]bool, len(plan.items))
	for it := range plan.items {
		plan.replace[req.Items[it].Message] = true
	}
	plan.placeholder = placeholder
	return plan
}

// laterResults is what planDedup knows of the results of a key after the
// one it looks at: the nearest (an a.results index) and the tokens of the
// largest.
type laterResults struct{ nearest, largest int }

// freshDedupsPay asks the cost model whether the dedups a request adds,
// saving fresh tokens from message first on, pay for the cache they
// break: from first to the end of what the previous request sent (its
// last assistant message; what follows is new, uncached either way). No
// model (econ nil): they pay.
func freshDedupsPay(econ *Economics, req *request, a *analysis, fresh, first int) bool {
	if econ == nil {
		return true
	}
	sent := len(req.Messages) - 1
	for sent >= 0 && req.Messages[sent].Role != wire.RoleAssistant {
		sent--
	}
	rebuilt := 0
	for i := first; i <= sent; i++ {
		rebuilt += a.facts[i].after
	}
	return econ.Pays(PrefixChange{Removed: fresh, Rebuilt: max(rebuilt-fresh, 0)})
}

// supersedes reports whether result k (an a.results index) is superseded
// by j, the nearest later result of its key, when the largest later one
// holds big tokens: when the two say the same (their contents
// byte-identical, or both run details around the same printed output),
// or when k's call only reads (a read-only tool, or a shell command that
// only looks, its output in run details) and some later result is not a
// stub pointing back to it.
//
// A shell command's later run supersedes an earlier, different one only
// in run details (codex's exec tools). Chat agents' shell outputs come
// without them, and their dedup stays what it was: identical repeats.
func (p *Pipeline) supersedes(req *request, a *analysis, k, j, big int) bool {
	r, rf, lf := &a.results[k], a.resultFacts(k), a.resultFacts(j)
	if rf.framed && lf.framed && rf.printed == lf.printed ||
		bytes.Equal(req.Items[r.item].Content.Of(req.Body), req.Items[a.results[j].item].Content.Of(req.Body)) {
		return true
	}
	readOnly := p.readOnly[r.key.tool] || r.shellRead && rf.framed
	return readOnly && big*supersedeShare >= rf.contentAfter
}

// resultFacts returns the facts of result k (an a.results index).
func (a *analysis) resultFacts(k int) *resultFacts {
	r := &a.results[k]
	return &a.facts[r.msg].results[r.ord]
}

// forwardedTokens returns the tokens of message i (whose facts are f) as
// forwarded under plan: squashed, its replaced results as the placeholder.
func (plan dedupPlan) forwardedTokens(req *request, i int, f *facts) int {
	n, k := f.after, 0
	r := req.Messages[i].Items
	for it := r.Start; it < r.End; it++ {
		if req.Items[it].Kind != wire.KindToolResult {
			continue
		}
		if _, ok := plan.items[it]; ok {
			n += plan.tokens(it) - f.results[k].contentAfter
		}
		k++
	}
	return n
}

// appendEdits appends to edits those of message i (whose facts are f)
// under plan, which replaces some of its results: the placeholder for
// those, their squash edits for the others; and counts them in res (a
// replaced result's squash is not counted).
func (plan dedupPlan) appendEdits(edits []wire.Edit, req *request, i int, f *facts, res *Result) []wire.Edit {
	at := req.Messages[i].Start
	from, k := resultFacts{}, 0 // where the current result's edits and stats start
	r := req.Messages[i].Items
	for it := r.Start; it < r.End; it++ {
		if req.Items[it].Kind != wire.KindToolResult {
			continue
		}
		rf := f.results[k]
		k++
		if _, ok := plan.items[it]; ok {
			edits = append(edits, req.f.ReplaceContent(req.Conversation, it, plan.text(it)))
			res.Deduped++
			plan.keepOriginal(res, it)
		} else {
			res.Squashed += rf.stats - from.stats
			res.SquashStats = append(res.SquashStats, f.stats[from.stats:rf.stats]...)
			for _, o := range f.originals[from.originals:rf.originals] {
				o.Item = it
				res.Originals = append(res.Originals, o)
			}
			for _, e := range f.edits[from.edits:rf.edits] {
				edits = append(edits, wire.Edit{Start: at + e.Start, End: at + e.End, Repl: e.Repl})
			}
		}
		from = rf
	}
	return edits
}

// prevDedups returns the result items marks name in req as it is now: a
// mark counts when its message is still there, unchanged, with that many
// results.
func (p *Pipeline) prevDedups(req *request, a *analysis, marks []history.DedupMark) map[int]bool {
	var out map[int]bool
	for _, mk := range marks {
		i := mk.Index
		if i < 0 || i >= len(req.Messages) || mk.Result < 0 || p.messageDigest(req, i, a.hashes[i]) != mk.Digest {
			continue
		}
		it := nthResult(req, i, mk.Result)
		if it < 0 {
			continue
		}
		if out == nil {
			out = make(map[int]bool, len(marks))
		}
		out[it] = true
	}
	return out
}

// nthResult returns the item index of message i's result n (0: the
// first), -1 when it has no such result.
func nthResult(req *request, i, n int) int {
	r := req.Messages[i].Items
	for it := r.Start; it < r.End; it++ {
		if req.Items[it].Kind != wire.KindToolResult {
			continue
		}
		if n == 0 {
			return it
		}
		n--
	}
	return -1
}

// dedupMarks returns the marks of the results plan replaces, in body order.
func (p *Pipeline) dedupMarks(req *request, a *analysis, plan dedupPlan) []history.DedupMark {
	if len(plan.items) == 0 {
		return nil
	}
	marks := make([]history.DedupMark, 0, len(plan.items))
	for _, r := range a.results {
		if _, ok := plan.items[r.item]; ok {
			marks = append(marks, history.DedupMark{Index: r.msg, Result: r.ord, Digest: p.messageDigest(req, r.msg, a.hashes[r.msg])})
		}
	}
	return marks
}

// resultKey finds the call result item it answers: the call whose id is
// its CallID; for a result paired by name (chat's legacy role function),
// the last call without an id, when it names the same tool. tool is the
// call's tool name, or the result's own when the call is unknown (keyed
// false).
func resultKey(it *wire.Item, calls map[string]*call, legacy *call) (tool string, c call, keyed bool) {
	if it.ByName {
		if legacy != nil && legacy.key.tool == it.Tool {
			return it.Tool, *legacy, true
		}
		return it.Tool, call{}, false
	}
	if c, ok := calls[it.CallID]; ok && it.CallID != "" {
		return c.key.tool, *c, true
	}
	return it.Tool, call{}, false
}

// callsOf returns the calls message i makes, in order, with their dedup
// keys, and which are shell commands that only look (shell's
// ReadOnlyCall). The calls are cached with the message's facts, so their
// id and tool are copied into one string of their own: the parse keeps
// every call's id and name of the request in one block, which a slice of
// it would pin (a whole conversation's, for one message's facts).
func callsOf(shell *squash.Squasher, req *request, i int) []call {
	var calls []call
	r := req.Messages[i].Items
	for it := r.Start; it < r.End; it++ {
		c := &req.Items[it]
		if c.Kind != wire.KindToolCall {
			continue
		}
		own := c.CallID + c.Tool
		id, tool := own[:len(c.CallID)], own[len(c.CallID):]
		calls = append(calls, call{id: id, key: newCallKey(tool, req.f.CanonicalArguments(req.Conversation, it)),
			shellRead: shell.ReadOnlyCall(squash.Call{Tool: c.Tool, Args: req.f.Arguments(req.Conversation, it)})})
	}
	return calls
}

// call is one tool call of an assistant message.
type call struct {
	id        string // "" for a legacy function_call
	key       callKey
	shellRead bool // a shell command that only looks (cat, rg, git diff, …)
}

// printedOutput is what dedup compares of a tool result's content: when
// it is one text that wraps a command's output in run details (codex's
// exec tools: a chunk id and wall time that change on every run), the
// sha256 of what the command printed (squash.CommandOutput) and framed
// true; else framed false, and the content's bytes are compared as sent.
func printedOutput(req *request, it int) (printed [sha256.Size]byte, framed bool) {
	if raw := req.Items[it].Content.Of(req.Body); len(raw) > 0 && raw[0] == '"' && !runDetailsAhead(raw[1:]) {
		return printed, false // a string that does not open with run details: not decoded
	}
	parts := req.f.Parts(req.Conversation, it, nil)
	if len(parts) != 1 || !parts[0].IsText {
		return printed, false
	}
	text := parts[0].Text
	out := squash.CommandOutput(text)
	if len(out) == len(text) {
		return printed, false // CommandOutput strips the run details or returns the text itself
	}
	return sha256.Sum256([]byte(out)), true
}

// runDetailsAhead reports whether the JSON string body s (after its
// opening quote) may open with run details squash.CommandOutput strips.
func runDetailsAhead(s []byte) bool {
	for _, p := range [...]string{"Chunk ID: ", "Exit code: ", `{\"output\":`} {
		if bytes.HasPrefix(s, []byte(p)) {
			return true
		}
	}
	return false
}

// planRepeats is planDedup for a bound history, where a result once sent
// must be sent alike on every later turn (the thinking after it is bound
// to it): a result that says word for word what an earlier forwarded
// result of the same call key said (same tool, same canonical arguments)
// is replaced by RepeatStub pointing back to that one, when the stub is
// shorter. Only results that repeat an earlier one change, each at its
// first sight and by the history before it alone, so no earlier result is
// ever rewritten and every later turn re-derives the same stubs (no
// minimum, no PrevDedups: a stub costs no cached prefix). Results in
// [dropFrom, dropTo) are not forwarded and are no earlier result.
func (p *Pipeline) planRepeats(enc Encoding, req *request, a *analysis, dropFrom, dropTo int) dedupPlan {
	var plan dedupPlan
	earlier := make(map[callKey][]int) // key -> the a.results indexes of its kept, unreplaced results
	for k := range a.results {
		r := &a.results[k]
		if !r.keyed || (r.msg >= dropFrom && r.msg < dropTo) || !req.ProviderReads(r.msg) || !req.Items[r.item].Content.Exists() {
			continue
		}
		j := repeatOf(req, a, k, earlier[r.key])
		if j < 0 {
			earlier[r.key] = append(earlier[r.key], k)
			continue
		}
		stub := fmt.Sprintf(RepeatStub, req.Items[a.results[j].item].CallID)
		tokens := p.counter.Count(enc, stub)
		save := a.resultFacts(k).contentAfter - tokens
		if save <= 0 {
			continue
		}
		if plan.items == nil {
			plan.items, plan.replace = map[int]int{}, map[int]bool{}
			plan.stubs, plan.stubTokens = map[int]string{}, map[int]int{}
		}
		plan.items[r.item], plan.stubs[r.item], plan.stubTokens[r.item] = save, stub, tokens
		plan.replace[r.msg] = true
		plan.saved += save
	}
	return plan
}

// repeatOf returns the first of the results js (a.results indexes) that
// result k repeats: the same content bytes, or the same printed output in
// run details; -1 when none.
func repeatOf(req *request, a *analysis, k int, js []int) int {
	rf, content := a.resultFacts(k), req.Items[a.results[k].item].Content.Of(req.Body)
	for _, j := range js {
		lf := a.resultFacts(j)
		if rf.framed && lf.framed && rf.printed == lf.printed || bytes.Equal(content, req.Items[a.results[j].item].Content.Of(req.Body)) {
			return j
		}
	}
	return -1
}
