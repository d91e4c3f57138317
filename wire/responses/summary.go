package responses

import (
	"fmt"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// summaryRequest is a summary call's body in Responses form; field order
// is the wire order. store is always false: a summary call leaves nothing
// on the provider.
type summaryRequest struct {
	Model           string         `json:"model"`
	Input           []summaryInput `json:"input"`
	Temperature     *float64       `json:"temperature,omitempty"`
	MaxOutputTokens int            `json:"max_output_tokens"`
	Store           bool           `json:"store"`
	Stream          bool           `json:"stream"`
}

type summaryInput struct {
	Role    string        `json:"role"`
	Content []summaryPart `json:"content"`
}

type summaryPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// SummaryBody encodes c as a Responses request: the prompt as one user
// message, max_output_tokens (with room for the reasoning of a reasoning
// model, which also gets no temperature), not stored, not streamed. With
// c.History it is the history form (historySummaryBody).
func SummaryBody(c wire.SummaryCall, rules wire.ParamRules) ([]byte, error) {
	if c.History != nil {
		return historySummaryBody(c, rules)
	}
	r := summaryRequest{Model: c.Model, MaxOutputTokens: c.MaxTokens, Temperature: rules.Temperature(),
		Input: []summaryInput{{Role: "user", Content: []summaryPart{{Type: "input_text", Text: c.Prompt}}}}}
	if rules.MaxCompletionTokens {
		r.MaxOutputTokens += wire.ReasoningHeadroom
	}
	return wire.EncodeSummaryRequest(r)
}

// ReadSummary reads a summary call's answer (status and body), a response
// object: the text of its output messages' output_text parts, reasoning
// items skipped. auth is the credential the call was sent with: it never
// appears in an error. Errors are every format's: wire.ErrUpstream (and
// wire.ErrContextOverflow), wire.ErrBadResponse, wire.ErrEmptySummary, and
// wire.ErrProviderCompacted when the provider compacted instead of
// answering (a compaction item and no message text).
func ReadSummary(status int, body []byte, auth string) (wire.Summary, error) {
	var res wire.Summary
	if err := wire.CheckSummaryAnswer(status, body, auth); err != nil {
		return res, err
	}
	root := gjson.ParseBytes(body)
	output := root.Get("output")
	if !output.IsArray() {
		return res, fmt.Errorf("%w: no output", wire.ErrBadResponse)
	}
	var texts []string
	reasoned, called, compacted := false, false, false
	for _, item := range output.Array() {
		switch item.Get("type").String() {
		case "message":
			for _, p := range item.Get("content").Array() {
				if p.Get("type").String() == "output_text" {
					texts = append(texts, p.Get("text").String())
				}
			}
		case "reasoning":
			reasoned = true
		case KindCall, KindCustomCall, KindShellCall:
			called = true
		case KindCompaction, KindCompactionSummary:
			compacted = true
		}
	}
	u := ReadUsage(root.Get("usage"))
	res.PromptTokens, res.CompletionTokens, res.Usage = u.InputTokens, u.OutputTokens, u
	res.Truncated = root.Get("status").String() == "incomplete" &&
		root.Get("incomplete_details.reason").String() == "max_output_tokens"
	if called {
		return res, wire.ErrToolCallReply
	}
	why := ""
	if reasoned {
		why = fmt.Sprintf("only reasoning came back (status %q)", root.Get("status").String())
	}
	err := wire.SummaryText(&res, texts, why)
	if err != nil && compacted {
		return res, wire.ErrProviderCompacted
	}
	return res, err
}
