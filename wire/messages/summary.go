package messages

import (
	"fmt"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// APIVersion is the anthropic-version a summary call is sent with when the
// client's request named none.
const APIVersion = "2023-06-01"

// summaryRequest is a summary call's body in Messages form; field order is
// the wire order.
type summaryRequest struct {
	Model       string           `json:"model"`
	MaxTokens   int              `json:"max_tokens"`
	Messages    []summaryMessage `json:"messages"`
	Temperature *float64         `json:"temperature,omitempty"`
	Stream      bool             `json:"stream"`
}

type summaryMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// SummaryBody encodes c as a Messages request: the prompt as the one user
// message, max_tokens (Anthropic requires it), temperature 0.3 unless the
// rules say the model takes none, not streamed. The shell sends it with
// the client's x-api-key and anthropic-version (APIVersion when absent).
// With c.History it is the history form (historySummaryBody).
func SummaryBody(c wire.SummaryCall, rules wire.ParamRules) ([]byte, error) {
	if c.History != nil {
		return historySummaryBody(c, rules)
	}
	return wire.EncodeSummaryRequest(summaryRequest{Model: c.Model, MaxTokens: c.MaxTokens,
		Messages: []summaryMessage{{Role: "user", Content: c.Prompt}}, Temperature: rules.Temperature()})
}

// ReadSummary reads a summary call's answer (status and body), a message:
// the text of its text blocks, thinking blocks skipped. auth is the
// credential the call was sent with: it never appears in an error. Errors
// are every format's: wire.ErrUpstream (and wire.ErrContextOverflow, e.g.
// "prompt is too long"), wire.ErrBadResponse, wire.ErrEmptySummary, and
// wire.ErrProviderCompacted when the provider compacted instead of
// answering (stop_reason "compaction" or a compaction block, no text).
func ReadSummary(status int, body []byte, auth string) (wire.Summary, error) {
	var res wire.Summary
	if err := wire.CheckSummaryAnswer(status, body, auth); err != nil {
		return res, err
	}
	root := gjson.ParseBytes(body)
	content := root.Get("content")
	if !content.IsArray() {
		return res, fmt.Errorf("%w: no content", wire.ErrBadResponse)
	}
	var texts []string
	thought, called := false, false
	compacted := root.Get("stop_reason").String() == "compaction"
	for _, b := range content.Array() {
		switch b.Get("type").String() {
		case "text":
			texts = append(texts, b.Get("text").String())
		case "thinking", "redacted_thinking":
			thought = true
		case "tool_use":
			called = true
		case "compaction":
			compacted = true
		}
	}
	u := ReadUsage(root.Get("usage"))
	res.PromptTokens, res.CompletionTokens, res.Usage = u.InputTokens, u.OutputTokens, u
	res.Truncated = root.Get("stop_reason").String() == "max_tokens"
	if called {
		return res, wire.ErrToolCallReply
	}
	why := ""
	if thought {
		why = fmt.Sprintf("only thinking came back (stop_reason %q)", root.Get("stop_reason").String())
	}
	err := wire.SummaryText(&res, texts, why)
	if err != nil && compacted {
		return res, wire.ErrProviderCompacted
	}
	return res, err
}
