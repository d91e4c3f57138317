package messages

import (
	"fmt"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// userText is how a Messages body holds a user's text: it joins a user
// message of the user's own text, and after tool results it is a message
// of its own, which Anthropic merges into the same user turn. (Joined to
// the results, llama-server's Messages endpoint renders the text before
// them: measured, the call's cached prefix then ends before the last
// exchange, 1034 of 1235 tokens, against 1228 as a message of its own.) A
// role:"system" message may only be followed by an assistant message, so
// no user message goes after one.
var userText = wire.UserText{
	IsUser: func(m []byte) bool {
		return gjson.GetBytes(m, "role").String() == "user" && !gjson.GetBytes(m, `content.#(type=="tool_result")`).Exists()
	},
	CanFollow: func(m []byte) bool { return gjson.GetBytes(m, "role").String() != "system" },
	Part:      func(text string) []byte { return appendTextBlock(nil, text, nil) },
	Message:   func(text string) []byte { msg, _ := Format{}.NewMessage(wire.RoleUser, text, noCount); return msg },
}

func noCount(string) int { return 0 }

// historySummaryBody is the summary call that continues the conversation
// c.History (the request as forwarded) with c.Prompt as the next user
// text (wire.AppendUserText), so the cached prefix holds: every member as
// sent, system, tools and tool_choice included, not streamed, and
// max_tokens the summary's cap (thinkingCap with thinking on). Anthropic
// keys its cache of the messages on tool_choice and thinking: setting
// tool_choice to none, or turning thinking off, would bill the whole
// history uncached again, so both stay as sent and the instruction alone
// asks for no tool call (a reply that makes one is no summary:
// ReadSummary). context_management is left out: its edits would have the
// provider compact or clear the call's history instead of answering it
// (a compaction block, no summary).
func historySummaryBody(c wire.SummaryCall, _ wire.ParamRules) ([]byte, error) {
	body, ok := wire.AppendUserText(c.History, "messages", c.Prompt, userText)
	if !ok {
		return nil, wire.ErrNoHistoryForm
	}
	limit := thinkingCap(gjson.GetBytes(body, "thinking"), int(gjson.GetBytes(body, "max_tokens").Int()), c.MaxTokens)
	return wire.EditTop(body, wire.TopEdit{Key: "stream"}, wire.TopEdit{Key: "context_management"},
		wire.TopEdit{Key: "max_tokens", Raw: fmt.Appendf(nil, "%d", limit)})
}

// thinkingCap is a summary call's max_tokens with thinking as the request
// has it, sent was the request's max_tokens and summary the summary's cap.
// Without thinking it is summary. With a thinking budget, max_tokens must
// stay above it and holds the thinking and the summary: budget + summary,
// but never more than the request's own (which the upstream took for
// this model: its output limit may be lower), so a budget close to sent
// leaves the summary less room, and a summary cut short is reported as
// truncated. Adaptive thinking (no budget) gets wire.ReasoningHeadroom
// for its thinking, within the request's max_tokens too.
func thinkingCap(thinking gjson.Result, sent, summary int) int {
	switch thinking.Get("type").String() {
	case "enabled":
		budget := int(thinking.Get("budget_tokens").Int())
		if sent > budget {
			return min(budget+summary, sent)
		}
		return budget + summary
	case "adaptive":
		if sent > 0 {
			return min(summary+wire.ReasoningHeadroom, sent)
		}
		return summary + wire.ReasoningHeadroom
	}
	return summary
}
