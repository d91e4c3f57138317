package replay

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// A codex rollout ($CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl) is one
// {timestamp, type, payload} a line: session_meta (the session id, and
// since 0.1xx the base instructions), turn_context (the model and effort
// of the turns after it), response_item (an item of the conversation, as
// the Responses API has it: message, reasoning, function_call and
// function_call_output, custom_tool_call, local_shell_call, ...),
// compacted (codex's own compaction: the history after it), event_msg
// (what the UI showed; thread_rolled_back undoes user turns). Newer codex
// adds each item's place in the history (metadata.history_sequence) and
// how much of it the model had read when it wrote the item
// (sampled_through_sequence).
//
// Each model call is a run of the model's items (reasoning, calls, an
// assistant message); its request is the base instructions (a developer
// item, as codex 0.171 sends them) and the history before the run. The
// tools are codex's (codexProfile): a rollout does not record them.

// codexItem is one item of a rollout's history.
type codexItem struct {
	raw    string
	typ    string
	role   string
	callID string
	// sampled is the history_sequence the model had read when it wrote
	// the item (-1: not recorded).
	sampled int64
}

// codexAPITypes are the item types codex sends back to the model (its
// ghost snapshots, compaction triggers and items it does not know stay
// out).
var codexAPITypes = map[string]bool{"message": true, "reasoning": true, "function_call": true,
	"function_call_output": true, "custom_tool_call": true, "custom_tool_call_output": true,
	"local_shell_call": true, "web_search_call": true, "image_generation_call": true,
	"tool_search_call": true, "tool_search_output": true, "compaction": true, "context_compaction": true,
	"additional_tools": true, "agent_message": true}

// isModelOutput reports whether the model wrote it: an assistant message,
// reasoning or a call.
func (it codexItem) isModelOutput() bool {
	switch it.typ {
	case "message":
		return it.role == "assistant"
	case "reasoning", "agent_message":
		return true
	}
	return strings.HasSuffix(it.typ, "_call")
}

// codexRollout is what reading a rollout gives.
type codexRollout struct {
	session, instructions string
	requests              [][]byte
	compactions           int // codex's own compaction calls
}

// codexConversation reads a codex rollout: its requests, one per model
// call, codex's own compaction calls included.
func codexConversation(data []byte) (conversation, error) {
	lines, bad := jsonLines(data)
	r := codexRollout{}
	var history []codexItem
	model, effort := codexProfile.model, ""
	lastRun := -1            // the request of the run being read, -1 when none is
	prevSampled := int64(-2) // the sampled sequence of the run's last item
	for _, l := range lines {
		p := l.Get("payload")
		switch l.Get("type").String() {
		case "session_meta":
			r.session = p.Get("id").String()
			r.instructions = p.Get("base_instructions.text").String()
			if r.instructions == "" && p.Get("base_instructions").Type == gjson.String {
				r.instructions = p.Get("base_instructions").Str
			}
		case "turn_context":
			if m := p.Get("model").String(); m != "" {
				model = m
			}
			effort = p.Get("effort").String()
		case "response_item":
			it, ok := codexItemOf(p, l.Get("metadata.sampled_through_sequence"))
			if !ok {
				continue
			}
			if it.isModelOutput() {
				if lastRun < 0 || (it.sampled >= 0 && prevSampled >= 0 && it.sampled != prevSampled) {
					lastRun = len(r.requests)
					r.requests = append(r.requests, r.body(model, effort, history, false))
				}
				prevSampled = it.sampled
			} else {
				lastRun, prevSampled = -1, -2
			}
			history = append(history, it)
		case "compacted":
			// The run just before is codex's compaction call when nothing
			// came between; older codex does not record its answer.
			if lastRun >= 0 {
				r.requests[lastRun] = r.body(model, effort, history[:len(history)-runLength(history)], true)
			} else {
				r.requests = append(r.requests, r.body(model, effort, history, true))
			}
			r.compactions++
			history = compactedHistory(p, history)
			lastRun, prevSampled = -1, -2
		case "event_msg":
			if p.Get("type").String() == "thread_rolled_back" {
				history = dropUserTurns(history, int(p.Get("num_turns").Int()))
				lastRun, prevSampled = -1, -2
			}
		}
	}
	if len(r.requests) == 0 {
		return conversation{}, errNoModelCalls
	}
	approx := "tools"
	if r.instructions == "" {
		approx = "base instructions, " + approx
	}
	if r.compactions > 0 {
		approx += " and the prompt of codex's own compaction calls"
	}
	note := approx + " are codex " + codexProfile.version + "'s (the rollout does not record them)"
	if bad > 0 {
		note += fmt.Sprintf("; %d lines that are not JSON skipped", bad)
	}
	return conversation{requests: r.requests, model: mostCommonModel(r.requests), approximated: note}, nil
}

// errNoModelCalls: the file is a session in which the model was never
// called (one that was opened and left, say).
var errNoModelCalls = errors.New("no model calls")

// codexItemOf is a response_item's payload as the history holds it, and
// whether codex sends it to the model at all. What codex keeps for itself
// beside the item (internal_chat_message_metadata_passthrough) goes.
func codexItemOf(p, sampled gjson.Result) (codexItem, bool) {
	it := codexItem{typ: p.Get("type").String(), role: p.Get("role").String(), callID: p.Get("call_id").String(), sampled: -1}
	if !codexAPITypes[it.typ] || (it.typ == "message" && it.role == "system") {
		return it, false
	}
	if sampled.Exists() {
		it.sampled = sampled.Int()
	}
	it.raw = p.Raw
	if p.Get("internal_chat_message_metadata_passthrough").Exists() {
		it.raw, _ = sjson.Delete(it.raw, "internal_chat_message_metadata_passthrough")
	}
	return it, true
}

// runLength is how many of history's last items are the model's.
func runLength(history []codexItem) int {
	n := 0
	for n < len(history) && history[len(history)-1-n].isModelOutput() {
		n++
	}
	return n
}

// compactedHistory is the history after a compacted line: its
// replacement_history, or (older codex) the user's messages and the
// summary as codex builds them.
func compactedHistory(p gjson.Result, before []codexItem) []codexItem {
	var out []codexItem
	if rh := p.Get("replacement_history"); rh.IsArray() {
		rh.ForEach(func(_, item gjson.Result) bool {
			if it, ok := codexItemOf(item, gjson.Result{}); ok {
				out = append(out, it)
			}
			return true
		})
		return out
	}
	for _, it := range before {
		if it.typ == "message" && it.role == "user" {
			out = append(out, it)
		}
	}
	summary, _ := sjson.Set(`{"type":"message","role":"user","content":[{"type":"input_text"}]}`, "content.0.text", p.Get("message").String())
	return append(out, codexItem{raw: summary, typ: "message", role: "user", sampled: -1})
}

// dropUserTurns is history without its last n user turns (a user message
// and all after it), as codex's rollback leaves it.
func dropUserTurns(history []codexItem, n int) []codexItem {
	for i := len(history) - 1; i >= 0 && n > 0; i-- {
		if it := history[i]; it.typ == "message" && it.role == "user" && !isCodexContext(it.raw) {
			history, n = history[:i], n-1
		}
	}
	return history
}

// isCodexContext reports whether a user message is context codex adds
// (the environment, AGENTS.md), not something the user said.
func isCodexContext(raw string) bool {
	text := strings.TrimSpace(gjson.Get(raw, "content.0.text").String())
	return strings.HasPrefix(text, "<environment_context>") || strings.HasPrefix(text, "<user_instructions>") ||
		strings.HasPrefix(text, "# AGENTS.md")
}

// body is the request of a model call over history, as codex 0.171 sends
// it; a compaction call offers no tools and ends with codex's compaction
// prompt.
func (r codexRollout) body(model, effort string, history []codexItem, compaction bool) []byte {
	instructions := r.instructions
	if instructions == "" {
		instructions = codexProfile.instructions
	}
	dev, _ := sjson.Set(`{"type":"message","role":"developer","content":[{"type":"input_text"}]}`, "content.0.text", instructions)
	items := []string{dev}
	for _, it := range pairCodexCalls(history) {
		items = append(items, it.raw)
	}
	tools := codexProfile.tools
	if compaction {
		prompt, _ := sjson.Set(`{"type":"message","role":"user","content":[{"type":"input_text"}]}`, "content.0.text", codexProfile.compactionPrompt)
		items, tools = append(items, prompt), "[]"
	}
	body := []byte(`{}`)
	body, _ = sjson.SetBytes(body, "model", model)
	body, _ = sjson.SetBytes(body, "stream", true)
	body, _ = sjson.SetRawBytes(body, "input", []byte("["+strings.Join(items, ",")+"]"))
	body, _ = sjson.SetRawBytes(body, "tools", []byte(tools))
	body, _ = sjson.SetBytes(body, "tool_choice", "auto")
	body, _ = sjson.SetBytes(body, "parallel_tool_calls", true)
	if effort != "" {
		body, _ = sjson.SetBytes(body, "reasoning.effort", effort)
	}
	body, _ = sjson.SetBytes(body, "store", false)
	body, _ = sjson.SetRawBytes(body, "include", []byte(`["reasoning.encrypted_content"]`))
	if r.session != "" {
		body, _ = sjson.SetBytes(body, "prompt_cache_key", r.session)
	}
	return body
}

// codexOutputType is the output item type that answers a call type.
var codexOutputType = map[string]string{"function_call": "function_call_output", "local_shell_call": "function_call_output",
	"custom_tool_call": "custom_tool_call_output", "tool_search_call": "tool_search_output"}

// pairCodexCalls is history as codex sends it: each call answered before
// the next user or developer message (an interrupted one with "aborted",
// as codex answers it), an output that answers no call left out.
func pairCodexCalls(history []codexItem) []codexItem {
	calls := map[string]bool{}
	answered := map[string]bool{}
	for _, it := range history {
		if _, ok := codexOutputType[it.typ]; ok && it.callID != "" {
			calls[it.callID] = true
		}
		if strings.HasSuffix(it.typ, "_output") {
			answered[it.callID] = true
		}
	}
	var out, pending []codexItem // pending: calls not yet answered
	flush := func() {
		for _, c := range pending {
			if !answered[c.callID] {
				o, _ := sjson.Set(`{"type":""}`, "type", codexOutputType[c.typ])
				o, _ = sjson.Set(o, "call_id", c.callID)
				o, _ = sjson.Set(o, "output", "aborted")
				out = append(out, codexItem{raw: o, typ: codexOutputType[c.typ], callID: c.callID, sampled: -1})
			}
		}
		pending = nil
	}
	for _, it := range history {
		switch {
		case strings.HasSuffix(it.typ, "_output"):
			if !calls[it.callID] {
				continue
			}
		case codexOutputType[it.typ] != "" && it.callID != "":
			pending = append(pending, it)
		case it.typ == "message" && it.role != "assistant":
			flush()
		}
		out = append(out, it)
	}
	flush()
	return out
}
