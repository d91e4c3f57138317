package gemini

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// SummaryPath is the path, under the API's base (…/v1beta), of a summary
// call to model: its generateContent method, not streamed.
func SummaryPath(model string) string {
	return "/models/" + url.PathEscape(strings.TrimPrefix(model, "models/")) + ":generateContent"
}

// summaryRequest is a summary call's body in Gemini form; field order is
// the wire order.
type summaryRequest struct {
	Contents         []summaryContent `json:"contents"`
	GenerationConfig summaryConfig    `json:"generationConfig"`
}

type summaryContent struct {
	Role  string      `json:"role"`
	Parts []replyPart `json:"parts"`
}

type summaryConfig struct {
	MaxOutputTokens int      `json:"maxOutputTokens"`
	Temperature     *float64 `json:"temperature,omitempty"`
}

// SummaryBody encodes c as a generateContent request (POST SummaryPath):
// the prompt as the one user content, maxOutputTokens the summary's cap
// with wire.ReasoningHeadroom on top (Gemini 2.5 and 3 think by default,
// and their thoughts count against maxOutputTokens; unused tokens are not
// billed), temperature as rules say (temperature under 1 is discouraged
// for Gemini 3 by Google, so none for those). With c.History it is the
// history form (historySummaryBody).
func SummaryBody(c wire.SummaryCall, rules wire.ParamRules) ([]byte, error) {
	if c.History != nil {
		return historySummaryBody(c)
	}
	temp := rules.Temperature()
	if gemini3(c.Model) {
		temp = nil
	}
	return wire.EncodeSummaryRequest(summaryRequest{
		Contents:         []summaryContent{{Role: "user", Parts: []replyPart{{Text: c.Prompt}}}},
		GenerationConfig: summaryConfig{MaxOutputTokens: c.MaxTokens + wire.ReasoningHeadroom, Temperature: temp},
	})
}

// gemini3 reports whether model is of the Gemini 3 family (or later
// 3.x), behind any "models/" or provider prefix.
func gemini3(model string) bool {
	name := strings.ToLower(model)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return strings.HasPrefix(name, "gemini-3")
}

// historySummaryBody is the summary call that continues the conversation
// c.History (the request as forwarded) with c.Prompt as the next user
// text, so that the cached prefix holds: every member as sent
// (systemInstruction, tools, toolConfig, cachedContent, safetySettings),
// the prompt at the end (appendUserText), and generationConfig's
// maxOutputTokens the summary's cap with wire.ReasoningHeadroom, within
// the request's own when it set one.
func historySummaryBody(c wire.SummaryCall) ([]byte, error) {
	body, ok := appendUserText(c.History, c.Prompt)
	if !ok {
		return nil, wire.ErrNoHistoryForm
	}
	gcKey := "generationConfig"
	if !gjson.GetBytes(body, gcKey).Exists() && gjson.GetBytes(body, "generation_config").Exists() {
		gcKey = "generation_config"
	}
	gc := gjson.GetBytes(body, gcKey)
	capKey := "maxOutputTokens"
	if !gc.Get(capKey).Exists() && gc.Get("max_output_tokens").Exists() {
		capKey = "max_output_tokens"
	}
	limit := c.MaxTokens + wire.ReasoningHeadroom
	if sent := int(gc.Get(capKey).Int()); sent > 0 {
		limit = min(limit, sent)
	}
	if gc.Exists() && !gc.IsObject() {
		return wire.EditTop(body, wire.TopEdit{Key: gcKey, Raw: fmt.Appendf(nil, `{"maxOutputTokens":%d}`, limit)})
	}
	return wire.EditTop(body, wire.TopEdit{Key: gcKey + "." + capKey, Raw: fmt.Appendf(nil, "%d", limit)})
}

// appendUserText returns body with text at the end of its contents: one
// more text part of the last content when it is the user's (its own
// words, or its functionResponses: text there opens the user's next turn,
// as Gemini CLI sends it), else a user content of its own after the
// model's. Every byte before the insertion is the body's. false when
// there are no contents to append to.
func appendUserText(body []byte, text string) ([]byte, bool) {
	arr, ok := wire.TopArray(body, "contents", member)
	if !ok {
		return nil, false
	}
	var last Span
	wire.WalkArray(body, arr.Start, func(vs int) int {
		last = Span{Start: vs, End: wire.ValueEnd(body, vs)}
		return last.End
	})
	if !last.Exists() || body[last.Start] != '{' {
		return nil, false
	}
	c := readContent(body, last.Start)
	if (c.Role == "user" || c.Role == "") && c.Parts.Exists() {
		end := c.Parts.End - 1
		p := appendTextPart(nil, text)
		if wire.SkipSpace(body, c.Parts.Start+1) < end {
			p = append([]byte{','}, p...)
		}
		return wire.Splice(body, []wire.Edit{{Start: end, End: end, Repl: p}}), true
	}
	msg, _ := Format{}.NewMessage(wire.RoleUser, text, func(string) int { return 0 })
	return wire.Splice(body, []wire.Edit{{Start: last.End, End: last.End, Repl: append([]byte{','}, msg...)}}), true
}

// ReadSummary reads a summary call's answer (status and body), a
// GenerateContentResponse: the text of candidates[0]'s parts, thought
// parts skipped, the others joined as one text. auth is the credential the call was sent with: it never
// appears in an error. Errors are every format's: wire.ErrUpstream (and
// wire.ErrContextOverflow, wire.ErrRefused), wire.ErrBadResponse,
// wire.ErrEmptySummary (a blocked prompt, only thoughts), and
// wire.ErrToolCallReply for a functionCall. finishReason MAX_TOKENS is
// Truncated.
func ReadSummary(status int, body []byte, auth string) (wire.Summary, error) {
	var res wire.Summary
	if err := wire.CheckSummaryAnswer(status, body, auth); err != nil {
		return res, err
	}
	root := gjson.ParseBytes(body)
	if root.IsArray() { // a stream's array, whole: its chunks in order
		return readSummaryChunks(root.Array())
	}
	return readSummaryChunks([]gjson.Result{root})
}

// readSummaryChunks reads the chunks of one answer (one, unless streamed).
func readSummaryChunks(chunks []gjson.Result) (wire.Summary, error) {
	var res wire.Summary
	var text strings.Builder // parts join as the SDKs' Text joins them: as one text
	thought, called, candidates := false, false, false
	finish, block := "", ""
	for _, ch := range chunks {
		if u := ReadUsage(usageOf(ch)); u.Found {
			res.Usage = u
		}
		if b := field(ch, "promptFeedback", "prompt_feedback").Get("blockReason").String(); b != "" {
			block = b
		}
		cand := ch.Get("candidates.0")
		if !cand.Exists() {
			continue
		}
		candidates = true
		if f := field(cand, "finishReason", "finish_reason").String(); f != "" {
			finish = f
		}
		cand.Get("content.parts").ForEach(func(_, p gjson.Result) bool {
			switch {
			case p.Get("thought").Bool():
				thought = true
			case field(p, "functionCall", "function_call").Exists():
				called = true
			case p.Get("text").Type == gjson.String:
				text.WriteString(p.Get("text").Str)
			}
			return true
		})
	}
	res.PromptTokens, res.CompletionTokens = res.Usage.InputTokens, res.Usage.OutputTokens
	res.Truncated = finish == "MAX_TOKENS"
	if !candidates {
		if block != "" {
			return res, fmt.Errorf("%w: the prompt was blocked (blockReason %s)", wire.ErrEmptySummary, block)
		}
		return res, fmt.Errorf("%w: no candidates", wire.ErrBadResponse)
	}
	if called {
		return res, wire.ErrToolCallReply
	}
	why := ""
	switch {
	case thought:
		why = fmt.Sprintf("only thoughts came back (finishReason %q)", finish)
	case finish != "" && finish != "STOP" && finish != "MAX_TOKENS":
		why = fmt.Sprintf("finishReason %s", finish)
	}
	return res, wire.SummaryText(&res, []string{text.String()}, why)
}
