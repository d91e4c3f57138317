package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/redact"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// maxErrorText caps how much of an upstream error body goes into an error.
const maxErrorText = 300

// ErrEmptySummary means the summariser answered without any summary text.
var ErrEmptySummary = errors.New("compactor: empty summary")

// ErrToolCallReply means the summariser answered with a tool call: a
// summary call that continues the conversation keeps its tools offered (for
// the prompt cache), and whatever text came with the call is no summary.
// It wraps ErrEmptySummary.
var ErrToolCallReply = fmt.Errorf("%w: the model called a tool instead of writing the summary", ErrEmptySummary)

// ErrProviderCompacted means the summariser compacted the summary call's
// history itself (provider-native compaction: a compaction block or item)
// instead of answering it, and no summary text came back. A summary call
// that carries nothing asking for that (context_management,
// compaction_trigger) does not meet it.
var ErrProviderCompacted = errors.New("compactor: the provider compacted the summary call instead of answering it; no summary came back")

// ErrUpstream means the summary upstream answered with a non-2xx status.
var ErrUpstream = errors.New("compactor: summary upstream error")

// ErrRefused means the summary upstream refused the request itself (400,
// 413, 422: a field, a shape or a size it does not take), not that it
// failed (5xx), limits the caller (429) or refuses the credential; it
// wraps ErrUpstream.
var ErrRefused = errors.New("the request was refused")

// ErrBadResponse means the summary upstream's 2xx answer is not a chat completion ctxpress can read.
var ErrBadResponse = errors.New("compactor: unreadable summary response")

// ErrContextOverflow means the summary upstream refused the summary request
// as longer than its context window (it also wraps ErrUpstream).
var ErrContextOverflow = errors.New("compactor: summary request exceeds the summariser's context window")

// SummaryCall is one summary request, in any format: the prompt as the one
// user message, stream false; or, with History, the conversation itself
// followed by the prompt.
//
// The caller writes the prompt and sizes the cap (the summariser's logic
// is not the wire's), so an adapter needs nothing from the compactor.
type SummaryCall struct {
	Model string
	// Prompt is the one user message (the transcript form's whole prompt),
	// or with History the instruction that follows the conversation.
	Prompt    string
	MaxTokens int // the summary's length cap, as the caller sized it
	// History is the conversation's request as forwarded, in the call's
	// format, for a call that continues it (its prompt cache then holds);
	// nil for the transcript form.
	History []byte
}

// Summary is what a summary call's answer says.
type Summary struct {
	Text             string // the assistant text, trimmed, reasoning (<think>…</think>) removed
	PromptTokens     int    // usage.prompt_tokens (or input_tokens); 0 when not reported
	CompletionTokens int    // usage.completion_tokens (or output_tokens); 0 when not reported
	Truncated        bool   // finish_reason "length": the summary hit MaxTokens and may be cut short
	// Usage is all the upstream reported of the call (cache reads and
	// writes too), for its bill; Found is false when it reported none.
	Usage Usage
}

// summaryRequest is the summary call's body; field order is the wire order.
// wire.ParamRules decide which of temperature, max_tokens and
// max_completion_tokens are present.
type summaryRequest struct {
	Model               string           `json:"model"`
	Messages            []summaryMessage `json:"messages"`
	Temperature         *float64         `json:"temperature,omitempty"`
	MaxTokens           int              `json:"max_tokens,omitempty"`
	MaxCompletionTokens int              `json:"max_completion_tokens,omitempty"`
	Stream              bool             `json:"stream"`
}

type summaryMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// SummaryBody encodes c under rules: max_tokens and temperature 0.3, or for
// reasoning models max_completion_tokens (with room for the reasoning) and
// no temperature. With c.History it is the history form
// (historySummaryBody).
func SummaryBody(c SummaryCall, rules wire.ParamRules) ([]byte, error) {
	if c.History != nil {
		return historySummaryBody(c, rules)
	}
	maxTokens := c.MaxTokens
	cr := summaryRequest{Model: c.Model, Messages: []summaryMessage{{Role: "user", Content: c.Prompt}}}
	if rules.MaxCompletionTokens {
		cr.MaxCompletionTokens = maxTokens + wire.ReasoningHeadroom
	} else {
		cr.MaxTokens = maxTokens
	}
	cr.Temperature = rules.Temperature()
	return EncodeSummaryRequest(cr)
}

// EncodeSummaryRequest encodes a summary call's body, in any format,
// without escaping <, > and & (the prompt is full of them; it stays
// readable on the wire).
func EncodeSummaryRequest(v any) ([]byte, error) {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("compactor: encoding summary request: %w", err)
	}
	return body.Bytes(), nil
}

// SummaryText sets res.Text from the answer's texts (joined, reasoning
// stripped) and returns ErrEmptySummary when there is none: with why
// (e.g. "only reasoning came back (finish_reason \"length\")") when the
// model spent its cap on reasoning instead.
func SummaryText(res *Summary, texts []string, why string) error {
	res.Text = StripReasoning(strings.Join(texts, "\n"))
	switch {
	case res.Text != "":
		return nil
	case why != "":
		return fmt.Errorf("%w: %s; raise the summary's token cap or use a non-reasoning model", ErrEmptySummary, why)
	}
	return ErrEmptySummary
}

// ReadSummary reads a summary call's answer (status and body). auth is the
// Authorization the call was sent with: it never appears in an error.
//
// Errors wrap ErrUpstream (non-2xx; the upstream's own error message
// included, secrets redacted; also ErrContextOverflow when
// wire.IsContextOverflow), ErrBadResponse (not a chat completion) or
// ErrEmptySummary (no text, e.g. a reasoning model that spent its cap on
// reasoning_content; or ErrToolCallReply).
func ReadSummary(status int, body []byte, auth string) (Summary, error) {
	var res Summary
	if err := CheckSummaryAnswer(status, body, auth); err != nil {
		return res, err
	}
	root := gjson.ParseBytes(body)
	choice := root.Get("choices.0")
	if !choice.Exists() {
		return res, fmt.Errorf("%w: no choices", ErrBadResponse)
	}
	res.PromptTokens = int(firstOf(root, "usage.prompt_tokens", "usage.input_tokens").Int())
	res.CompletionTokens = int(firstOf(root, "usage.completion_tokens", "usage.output_tokens").Int())
	res.Usage = ReadUsage(root.Get("usage"))
	res.Truncated = choice.Get("finish_reason").String() == "length"
	if calls := choice.Get("message.tool_calls"); calls.IsArray() && len(calls.Array()) > 0 || choice.Get("message.function_call").IsObject() {
		return res, ErrToolCallReply
	}
	why := ""
	if choice.Get("message.reasoning_content").String() != "" || choice.Get("message.reasoning").String() != "" {
		why = fmt.Sprintf("only reasoning came back (finish_reason %q)", choice.Get("finish_reason").String())
	}
	return res, SummaryText(&res, []string{answerText(choice.Get("message.content"))}, why)
}

// CheckSummaryAnswer returns the error a summary call's answer is, in any
// format: a non-2xx status (ErrUpstream, and ErrContextOverflow when
// wire.IsContextOverflow, else ErrRefused for 400, 413, 422), a body that is not JSON (ErrBadResponse), or an
// "error" member in a 2xx answer (some local servers answer errors with
// 200). auth never appears in the error.
func CheckSummaryAnswer(status int, body []byte, auth string) error {
	if status < 200 || status > 299 {
		if wire.IsContextOverflow(status, body) {
			return fmt.Errorf("%w: %w: status %d: %s", ErrContextOverflow, ErrUpstream, status, upstreamMessage(body, auth))
		}
		if status == 400 || status == 413 || status == 422 {
			return fmt.Errorf("%w: status %d, %w: %s", ErrUpstream, status, ErrRefused, upstreamMessage(body, auth))
		}
		return fmt.Errorf("%w: status %d: %s", ErrUpstream, status, upstreamMessage(body, auth))
	}
	if !jsonvalid.Valid(body) {
		return fmt.Errorf("%w: body is not JSON: %s", ErrBadResponse, upstreamMessage(body, auth))
	}
	if e := gjson.GetBytes(body, "error"); e.Exists() && e.Type != gjson.Null {
		return fmt.Errorf("%w: %s", ErrUpstream, upstreamMessage(body, auth))
	}
	return nil
}

// firstOf returns the first of paths present in r.
func firstOf(r gjson.Result, paths ...string) gjson.Result {
	for _, p := range paths {
		if v := r.Get(p); v.Exists() {
			return v
		}
	}
	return gjson.Result{}
}

// answerText flattens an answer's message content: a string, or the text of a list of
// parts (some providers answer with parts).
func answerText(c gjson.Result) string {
	if c.IsArray() {
		var parts []string
		for _, p := range c.Array() {
			if t := p.Get("text"); t.Type == gjson.String {
				parts = append(parts, t.Str)
			}
		}
		return strings.Join(parts, "\n")
	}
	if c.Type == gjson.String {
		return c.Str
	}
	return ""
}

// StripReasoning removes a leading <think>…</think> block, which local
// reasoning models (Qwen, DeepSeek-R1 via llama.cpp or Ollama) put in the
// content itself, and trims the rest. An unclosed block is all reasoning.
func StripReasoning(s string) string {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "<think>"); ok {
		_, after, closed := strings.Cut(rest, "</think>")
		if !closed {
			return ""
		}
		s = strings.TrimSpace(after)
	}
	return s
}

// upstreamMessage extracts the upstream's error message from body (OpenAI
// shape {"error":{"message"}}, {"error":"…"} or {"message"}), else its
// first bytes, with secrets and the caller's own credential redacted.
func upstreamMessage(body []byte, auth string) string {
	msg := ""
	if jsonvalid.Valid(body) {
		msg = firstOf(gjson.ParseBytes(body), "error.message", "error", "message", "detail").String()
	}
	if msg == "" {
		msg = string(body)
	}
	// Redact before cutting, so a cut cannot leave a key too short to spot.
	if key := strings.TrimSpace(strings.TrimPrefix(auth, "Bearer ")); len(key) >= 8 {
		msg = strings.ReplaceAll(msg, key, redact.Marker)
	}
	msg = strings.TrimSpace(redact.Secrets(msg))
	if len(msg) > maxErrorText {
		msg = msg[:runeFloor(msg, maxErrorText)] + "…"
	}
	if msg == "" {
		msg = "(empty body)"
	}
	return msg
}

// runeFloor returns the largest rune boundary of s at or before i.
func runeFloor(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}
