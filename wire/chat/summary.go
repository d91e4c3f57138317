package chat

import (
	"fmt"
	"strings"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

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
func SummaryBody(c wire.SummaryCall, rules wire.ParamRules) ([]byte, error) {
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
	return wire.EncodeSummaryRequest(cr)
}

// ReadSummary reads a summary call's answer (status and body). auth is the
// Authorization the call was sent with: it never appears in an error.
//
// Errors wrap wire.ErrUpstream (non-2xx; the upstream's own error message
// included, secrets redacted; also wire.ErrContextOverflow when
// wire.IsContextOverflow), wire.ErrBadResponse (not a chat completion) or
// wire.ErrEmptySummary (no text, e.g. a reasoning model that spent its cap on
// reasoning_content; or wire.ErrToolCallReply).
func ReadSummary(status int, body []byte, auth string) (wire.Summary, error) {
	var res wire.Summary
	if err := wire.CheckSummaryAnswer(status, body, auth); err != nil {
		return res, err
	}
	root := gjson.ParseBytes(body)
	choice := root.Get("choices.0")
	if !choice.Exists() {
		return res, fmt.Errorf("%w: no choices", wire.ErrBadResponse)
	}
	res.PromptTokens = int(firstOf(root, "usage.prompt_tokens", "usage.input_tokens").Int())
	res.CompletionTokens = int(firstOf(root, "usage.completion_tokens", "usage.output_tokens").Int())
	res.Usage = ReadUsage(root.Get("usage"))
	res.Truncated = choice.Get("finish_reason").String() == "length"
	if calls := choice.Get("message.tool_calls"); calls.IsArray() && len(calls.Array()) > 0 || choice.Get("message.function_call").IsObject() {
		return res, wire.ErrToolCallReply
	}
	why := ""
	if choice.Get("message.reasoning_content").String() != "" || choice.Get("message.reasoning").String() != "" {
		why = fmt.Sprintf("only reasoning came back (finish_reason %q)", choice.Get("finish_reason").String())
	}
	return res, wire.SummaryText(&res, []string{answerText(choice.Get("message.content"))}, why)
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
