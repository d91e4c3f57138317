// Package messagestest checks an Anthropic Messages request the way the real
// API enforces it, for tests: a fake upstream built on it refuses what
// api.anthropic.com refuses, with the same status, error type and message.
//
// Rules (each with the API's own wording where it is known; see rules.go):
//   - top level: model and max_tokens required, unknown keys refused
//     ("KEY: Extra inputs are not permitted");
//   - roles user, assistant and system; a role:"system" message (the
//     "mid-conversation system messages" of Opus 4.8 and later, which Claude
//     Code 2.1.332 sends as messages[1]) only after a user message, never
//     two in a row, followed by an assistant message or last;
//   - every tool_use answered by a tool_result in the very next message,
//     every tool_result answering a tool_use of the message before it;
//   - at most 4 cache_control markers in tools, system and messages, none on
//     a thinking block or an empty text block;
//   - a compaction block only in an assistant message, its content a
//     non-empty string or null (a failed compaction, a no-op); the model
//     reads from the latest compaction block with content on: the blocks
//     before it are neither counted in the Prompt nor verified;
//   - with a Ledger: every thinking / redacted_thinking block exactly as the
//     upstream issued it (signature, text and the prefix it was produced
//     after), and none of the latest assistant message's dropped; every
//     compaction block read with the encrypted_content and content the
//     upstream issued together;
//   - thinking.block_binding only with its beta in anthropic-beta, when
//     Options.Header is given;
//   - a ctxpress summary call (its last user text compactor.IsSummaryPrompt)
//     carrying context_management is refused: the API would compact or
//     clear it instead of answering (a compaction block, no summary), which
//     a test would otherwise not see.
package messagestest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/ctxpress/ctxpress/compactor"
)

// Error is a request the API refuses: the HTTP status and the error object.
type Error struct {
	Status  int
	Type    string // invalid_request_error, authentication_error, ...
	Message string
}

func (e *Error) Error() string { return e.Type + ": " + e.Message }

// Body is the error as the API answers it:
// {"type":"error","error":{"type":…,"message":…}}.
func (e *Error) Body() []byte {
	type inner struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "tokens > 200000 maximum", as sent
	_ = enc.Encode(struct {
		Type  string `json:"type"`
		Error inner  `json:"error"`
	}{"error", inner{e.Type, e.Message}})
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// Write answers w with the error.
func (e *Error) Write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_, _ = w.Write(e.Body())
}

// invalid is a 400 invalid_request_error.
func invalid(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: fmt.Sprintf(format, args...)}
}

// Options say how strict Check is beyond the rules every request obeys.
type Options struct {
	// Ledger holds the thinking blocks the upstream issued; nil skips the
	// signature and binding checks.
	Ledger *Ledger
	// NoSystemMessages refuses role:"system" messages, as models before
	// Opus 4.8 and the Bedrock and Vertex gateways do.
	NoSystemMessages bool
	// CountTokens checks a /v1/messages/count_tokens body: no max_tokens,
	// stream or metadata, no signature checks.
	CountTokens bool
	// Header is the request's headers, for the fields a beta opens
	// (thinking.block_binding needs BetaThinkingBinding in
	// anthropic-beta); nil checks the body alone and skips those rules.
	Header http.Header
}

// BetaThinkingBinding is the anthropic-beta that opens
// thinking.block_binding (drop_block).
const BetaThinkingBinding = "thinking-binding-controls-2026-08-01"

// hasBeta reports whether h's anthropic-beta headers (each a
// comma-separated list) name beta.
func hasBeta(h http.Header, beta string) bool {
	for _, v := range h.Values("Anthropic-Beta") {
		for b := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(b) == beta {
				return true
			}
		}
	}
	return false
}

// Request is what Check read from a valid request.
type Request struct {
	Model     string
	Stream    bool
	MaxTokens int
	Tools     []Tool
	Messages  int
	// LastUser is the text of the last user message that has text (tool
	// results left out).
	LastUser string
	Markers  int // cache_control markers in all
	// Thinking is thinking.type ("" when absent); ThinkingDisplay is
	// thinking.display ("omitted": thinking text is sent back empty).
	Thinking, ThinkingDisplay string
	// DropBlock is thinking.block_binding.prefix_mismatch_behavior ==
	// "drop_block": a thinking block whose prefix changed is dropped
	// instead of refused.
	DropBlock bool
	// Dropped are the paths of thinking blocks dropped under DropBlock.
	Dropped []string
	Prompt  Prompt
}

// Tool is one tool the request offers.
type Tool struct {
	Name   string
	Schema map[string]any
}

// topKeys are the request fields the API knows (with Claude Code's betas);
// anything else is refused.
var topKeys = map[string]bool{
	"model": true, "messages": true, "max_tokens": true, "system": true, "tools": true, "tool_choice": true,
	"metadata": true, "stop_sequences": true, "stream": true, "temperature": true, "top_p": true, "top_k": true,
	"thinking": true, "context_management": true, "output_config": true, "service_tier": true, "container": true,
	"mcp_servers": true, "inference_geo": true,
}

// countKeys are the fields count_tokens takes.
var countKeys = map[string]bool{
	"model": true, "messages": true, "system": true, "tools": true, "tool_choice": true,
	"thinking": true, "context_management": true, "output_config": true, "mcp_servers": true,
}

// Check reads body as a Messages request and returns what it holds, or the
// error the API would answer it with.
func Check(body []byte, o Options) (*Request, *Error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, invalid("There was an error parsing the body of your request. (%v)", err)
	}
	known := topKeys
	if o.CountTokens {
		known = countKeys
	}
	for _, k := range sortedKeys(top) {
		if !known[k] {
			return nil, invalid("%s: Extra inputs are not permitted", k)
		}
	}
	r := &Request{}
	if json.Unmarshal(top["model"], &r.Model) != nil || r.Model == "" {
		return nil, invalid("model: Field required")
	}
	if !o.CountTokens && (json.Unmarshal(top["max_tokens"], &r.MaxTokens) != nil || r.MaxTokens < 1) {
		return nil, invalid("max_tokens: Field required")
	}
	if raw, ok := top["stream"]; ok && json.Unmarshal(raw, &r.Stream) != nil {
		return nil, invalid("stream: Input should be a valid boolean")
	}
	if err := readThinking(top["thinking"], r); err != nil {
		return nil, err
	}
	if r.DropBlock && o.Header != nil && !hasBeta(o.Header, BetaThinkingBinding) {
		return nil, invalid("thinking.block_binding: this field requires the %s beta (anthropic-beta header)", BetaThinkingBinding)
	}
	tools, err := readTools(top["tools"], r)
	if err != nil {
		return nil, err
	}
	system, err := readSystem(top["system"])
	if err != nil {
		return nil, err
	}
	var msgs []json.RawMessage
	if _, ok := top["messages"]; !ok {
		return nil, invalid("messages: Field required")
	}
	if json.Unmarshal(top["messages"], &msgs) != nil {
		return nil, invalid("messages: Input should be a valid list")
	}
	if len(msgs) == 0 {
		return nil, invalid("messages: List should have at least 1 item after validation, not 0")
	}
	m, err := readMessages(msgs, o)
	if err != nil {
		return nil, err
	}
	r.Messages, r.LastUser = len(m), lastUserText(m)
	if _, ok := top["context_management"]; ok && compactor.IsSummaryPrompt(r.LastUser) {
		return nil, invalid("context_management: a ctxpress summary call must not ask the API to manage its context (it would be compacted instead of answered)")
	}
	r.Prompt = buildPrompt(tools, system, m)
	r.Markers = r.Prompt.markers()
	if r.Markers > 4 {
		return nil, invalid("A maximum of 4 blocks with cache_control may be provided. Found %d.", r.Markers)
	}
	if o.Ledger != nil && !o.CountTokens {
		if err := o.Ledger.verify(m, r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func readThinking(raw json.RawMessage, r *Request) *Error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var t struct {
		Type         string `json:"type"`
		Display      string `json:"display"`
		BlockBinding *struct {
			PrefixMismatchBehavior string `json:"prefix_mismatch_behavior"`
		} `json:"block_binding"`
	}
	if json.Unmarshal(raw, &t) != nil {
		return invalid("thinking: Input should be an object")
	}
	switch t.Type {
	case "enabled", "disabled", "adaptive":
	default:
		return invalid("thinking.type: Input should be 'enabled', 'disabled' or 'adaptive'")
	}
	r.Thinking, r.ThinkingDisplay = t.Type, t.Display
	if b := t.BlockBinding; b != nil {
		switch b.PrefixMismatchBehavior {
		case "drop_block":
			r.DropBlock = true
		case "", "error":
		default:
			return invalid("thinking.block_binding.prefix_mismatch_behavior: Input should be 'error' or 'drop_block'")
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}
