package responses

import (
	"fmt"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// userText is how a Responses body holds a user's text: a message item of
// role user (typeless, as clients may send it, or "type":"message").
var userText = wire.UserText{
	IsUser: func(it []byte) bool {
		typ := gjson.GetBytes(it, "type")
		return (!typ.Exists() || typ.Str == KindMessage) && gjson.GetBytes(it, "role").String() == "user"
	},
	CanFollow: func([]byte) bool { return true },
	Part:      func(text string) []byte { return textPart("user", text) },
	Message:   func(text string) []byte { msg, _ := Format{}.NewMessage(wire.RoleUser, text, noCount); return msg },
}

func noCount(string) int { return 0 }

// leftOutOfSummary are the top-level members a history summary call leaves
// out: context_management would have the provider compact the call (a
// compaction item, no summary), and previous_response_id and conversation
// continue a history the provider keeps and may compact.
var leftOutOfSummary = []wire.TopEdit{{Key: "context_management"}, {Key: "previous_response_id"}, {Key: "conversation"}}

// asksProviderCompaction reports whether an input item asks the provider
// to compact: a summary call leaves it out.
func asksProviderCompaction(item gjson.Result) bool {
	return item.Get("type").String() == KindCompactionTrigger
}

// historySummaryBody is the summary call that continues the conversation
// c.History (the request as forwarded) with c.Prompt as the next user
// text (wire.AppendUserText), so the provider's cached prefix holds:
// every member as sent, tools included, but tool_choice "none" when tools
// are offered, not streamed (stream and stream_options left out), and
// max_output_tokens the summary's cap (with wire.ReasoningHeadroom for a
// reasoning model). store stays as sent, unlike the transcript form's
// false: under store:false an input item that names a stored one (a
// reasoning item without its encrypted content) is refused. A string input
// (one user message, never compacted) cannot take the instruction. What
// would have the provider compact the call instead of answering it is left
// out (asksProviderCompaction, leftOutOfSummary).
func historySummaryBody(c wire.SummaryCall, rules wire.ParamRules) ([]byte, error) {
	history, err := wire.DropArrayElements(c.History, "input", asksProviderCompaction)
	if err != nil {
		return nil, err
	}
	body, ok := wire.AppendUserText(history, "input", c.Prompt, userText)
	if !ok {
		return nil, wire.ErrNoHistoryForm
	}
	edits := append([]wire.TopEdit{{Key: "stream"}, {Key: "stream_options"}}, leftOutOfSummary...)
	if wire.HasList(body, "tools") {
		edits = append(edits, wire.TopEdit{Key: "tool_choice", Raw: []byte(`"none"`)})
	}
	limit := c.MaxTokens
	if rules.MaxCompletionTokens {
		limit += wire.ReasoningHeadroom
	}
	edits = append(edits, wire.TopEdit{Key: "max_output_tokens", Raw: fmt.Appendf(nil, "%d", limit)})
	return wire.EditTop(body, edits...)
}
