package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/redact"
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

// ErrBadResponse means the summary upstream's 2xx answer is not one
// ctxpress can read in the call's format.
var ErrBadResponse = errors.New("compactor: unreadable summary response")

// ErrContextOverflow means the summary upstream refused the summary request
// as longer than its context window (it also wraps ErrUpstream).
var ErrContextOverflow = errors.New("compactor: summary request exceeds the summariser's context window")

// ErrNoHistoryForm means a conversation cannot take the summary
// instruction as its next user text (no messages, or a last message no
// user message may follow): the summary call is then a transcript.
var ErrNoHistoryForm = errors.New("compactor: the conversation cannot take the summary instruction")

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

// CheckSummaryAnswer returns the error a summary call's answer is, in any
// format: a non-2xx status (ErrUpstream, and ErrContextOverflow when
// IsContextOverflow, else ErrRefused for 400, 413, 422), a body that is
// not JSON (ErrBadResponse), or an "error" member in a 2xx answer (some
// local servers answer errors with 200). auth never appears in the error.
func CheckSummaryAnswer(status int, body []byte, auth string) error {
	if status < 200 || status > 299 {
		if IsContextOverflow(status, body) {
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
