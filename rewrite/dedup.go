package rewrite

import (
	"bytes"
	"crypto/sha256"
	"slices"

	"github.com/ctxpress/ctxpress/wire"
)

// DedupPlaceholder replaces the content of a superseded tool result.
const DedupPlaceholder = "[duplicate result: superseded by a later call with the same arguments; see the later result]"

// DedupMark names a tool result a forwarded request sent as
// DedupPlaceholder (Result.Dedups, Options.PrevDedups).
type DedupMark struct {
	// Index is the message's index in the client's `messages` as sent.
	Index int
	// Digest is the sha256 of the message's canonical form, as the chain hash
	// hashes it: the same message sent again matches, an edited or a
	// different one does not. It is stable across restarts.
	Digest [sha256.Size]byte
}

// supersedeShare: later read-only results all under 1/supersedeShare of an
// earlier one's tokens do not supersede it. It is a stub that points
// back to the earlier content (qwen-code's read_file answers a second
// read with "[File b.py unchanged since last read ...]"), or a slice of
// it; replacing the earlier one would leave the model neither copy.
const supersedeShare = 4

// dedupPlan is the set of tool results dedup replaces.
type dedupPlan struct {
	replace     map[int]bool // message index -> replaced by the placeholder
	saved       int          // content tokens saved in total
	placeholder int          // tokens of DedupPlaceholder
}

// planDedup decides which tool results to replace by DedupPlaceholder.
// A result is superseded when a later result answers a call with the same
// key (tool name + canonical arguments). It is replaced when the tool is
// read-only, or, for any tool, when its content is byte-identical to the
// nearest later result of the same key; a read-only one only when some
// later result is not a stub (supersedeShare). Results whose call is unknown are
// never touched. The messages [dropFrom, dropTo) are not forwarded (a
// summary or the history limit replaces them): they neither supersede nor
// are superseded, so dedup plans over the messages that remain.
//
// Replacing rewrites messages the provider has cached, so what the previous
// forwarded request replaced (prev: message indexes) stays replaced, and
// the others are replaced only when together they save at least the
// configured minimum. prev only ever holds superseded results (a later
// turn keeps the result that superseded them), and one that is not
// superseded any more (the config changed) is not replaced.
func (p *Pipeline) planDedup(enc Encoding, req *request, a *analysis, dropFrom, dropTo int, prev map[int]bool) dedupPlan {
	var plan dedupPlan
	if !p.cfg.Dedup.Enabled {
		return plan
	}
	placeholder := p.counter.Count(enc, DedupPlaceholder)
	later := make(map[callKey]int)   // key -> index of the nearest later result
	largest := make(map[callKey]int) // key -> tokens of the largest later result
	fresh := 0                       // tokens the replacements outside prev save
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if !a.keyed[i] || (i >= dropFrom && i < dropTo) {
			continue
		}
		key := a.keys[i]
		j, ok := later[key]
		later[key] = i
		big := largest[key] // the largest result of key after i
		largest[key] = max(big, a.facts[i].contentAfter)
		if !ok {
			continue
		}
		ci := req.Items[req.Result(i)].Content
		if !ci.Exists() {
			continue
		}
		same := bytes.Equal(ci.Of(req.Body), req.Items[req.Result(j)].Content.Of(req.Body))
		if !same && (!p.readOnly[key.tool] || big*supersedeShare < a.facts[i].contentAfter) {
			continue
		}
		save := a.facts[i].contentAfter - placeholder
		if save <= 0 {
			continue
		}
		if plan.replace == nil {
			plan.replace = make(map[int]bool)
		}
		plan.replace[i] = true
		plan.saved += save
		if !prev[i] {
			fresh += save
		}
	}
	if fresh > 0 && fresh < p.cfg.Dedup.minTokens() {
		for i := range plan.replace {
			if !prev[i] {
				delete(plan.replace, i)
				plan.saved -= a.facts[i].contentAfter - placeholder
			}
		}
	}
	if len(plan.replace) == 0 {
		return dedupPlan{}
	}
	plan.placeholder = placeholder
	return plan
}

// prevDedups returns the indexes of marks that name a message of req as
// it is now.
func (p *Pipeline) prevDedups(req *request, a *analysis, marks []DedupMark) map[int]bool {
	var out map[int]bool
	for _, mk := range marks {
		i := mk.Index
		if i < 0 || i >= len(req.Messages) || p.messageDigest(req, i, a.hashes[i]) != mk.Digest {
			continue
		}
		if out == nil {
			out = make(map[int]bool, len(marks))
		}
		out[i] = true
	}
	return out
}

// dedupMarks returns the marks of the results plan replaces, by index.
func (p *Pipeline) dedupMarks(req *request, a *analysis, plan dedupPlan) []DedupMark {
	if len(plan.replace) == 0 {
		return nil
	}
	marks := make([]DedupMark, 0, len(plan.replace))
	for i := range plan.replace {
		marks = append(marks, DedupMark{Index: i, Digest: p.messageDigest(req, i, a.hashes[i])})
	}
	slices.SortFunc(marks, func(x, y DedupMark) int { return x.Index - y.Index })
	return marks
}

// resultKey finds the dedup key and tool name of result item it: the call
// whose id is its CallID; for a result paired by name (chat's legacy role
// function), the last call without an id, when it names the same tool.
// keyed is false when the call is unknown.
func resultKey(it *wire.Item, calls map[string]callKey, legacy *callKey) (tool string, key callKey, keyed bool) {
	if it.ByName {
		if legacy != nil && legacy.tool == it.Tool {
			return it.Tool, *legacy, true
		}
		return it.Tool, callKey{}, false
	}
	if k, ok := calls[it.CallID]; ok && it.CallID != "" {
		return k.tool, k, true
	}
	return it.Tool, callKey{}, false
}

// callsOf returns the calls message i makes, in order, with their dedup
// keys. Strings are the parse's own copies, so they do not pin the body.
func callsOf(req *request, i int) []call {
	var calls []call
	r := req.Messages[i].Items
	for it := r.Start; it < r.End; it++ {
		c := &req.Items[it]
		if c.Kind != wire.KindToolCall {
			continue
		}
		calls = append(calls, call{id: c.CallID, key: newCallKey(c.Tool, req.f.CanonicalArguments(req.Conversation, it))})
	}
	return calls
}

// call is one tool call of an assistant message.
type call struct {
	id  string // "" for a legacy function_call
	key callKey
}
