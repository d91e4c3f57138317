package rewrite

import (
	"bytes"
	"crypto/sha256"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
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
	for i := len(req.messages) - 1; i >= 0; i-- {
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
		m := &req.messages[i]
		if !m.content.exists() {
			continue
		}
		same := bytes.Equal(m.raw(m.content), req.messages[j].raw(req.messages[j].content))
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
		if i < 0 || i >= len(req.messages) || p.messageDigest(&req.messages[i], a.hashes[i]) != mk.Digest {
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
		marks = append(marks, DedupMark{Index: i, Digest: p.messageDigest(&req.messages[i], a.hashes[i])})
	}
	slices.SortFunc(marks, func(x, y DedupMark) int { return x.Index - y.Index })
	return marks
}

// placeholderEdit returns the edit that replaces the content of m by
// DedupPlaceholder: a JSON string for a string content, a one-part text
// array for an array content (so the content keeps its shape).
func placeholderEdit(m *message) edit {
	var repl []byte
	if m.body[m.content.start] == '[' {
		repl = append(repl, `[{"type":"text","text":`...)
		repl = appendJSONString(repl, DedupPlaceholder)
		repl = append(repl, "}]"...)
	} else {
		repl = appendJSONString(nil, DedupPlaceholder)
	}
	return edit{start: m.content.start, end: m.content.end, repl: repl}
}

// resultKey finds the dedup key and tool name of result message m: for
// role tool, the call whose id is m's tool_call_id; for the legacy role
// function, the assistant's last function_call, when it names the same
// function. keyed is false when the call is unknown.
func resultKey(m *message, calls map[string]callKey, legacy *callKey) (tool string, key callKey, keyed bool) {
	switch m.role {
	case "tool":
		if k, ok := calls[m.toolCallID]; ok && m.toolCallID != "" {
			return k.tool, k, true
		}
		return m.name, callKey{}, false
	case "function":
		if legacy != nil && legacy.tool == m.name {
			return m.name, *legacy, true
		}
		return m.name, callKey{}, false
	}
	return "", callKey{}, false
}

// toolCallsOf returns the calls an assistant message makes: each
// tool_calls entry (id, function name, arguments) and a legacy
// function_call (id ""). Strings are copied, so they do not pin the body.
func toolCallsOf(m *message) []call {
	var calls []call
	m.result(m.toolCalls).ForEach(func(_, tc gjson.Result) bool {
		fn := tc.Get("function")
		name := fn.Get("name").String()
		calls = append(calls, call{
			id:  strings.Clone(tc.Get("id").String()),
			key: newCallKey(strings.Clone(name), fn.Get("arguments")),
		})
		return true
	})
	if fc := m.result(m.functionCall); fc.IsObject() {
		calls = append(calls, call{key: newCallKey(strings.Clone(fc.Get("name").String()), fc.Get("arguments"))})
	}
	return calls
}

// call is one tool call of an assistant message.
type call struct {
	id  string // "" for a legacy function_call
	key callKey
}
