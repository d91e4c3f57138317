package chat

import (
	"fmt"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// pauseReply closes the assistant's turn after tool results before the
// summary instruction: strict chat templates (Mistral's, and the llama.cpp
// ones that raise "Conversation roles must alternate") skip tool results
// and tool-calling assistant messages, and refuse the user speaking twice
// in a row; OpenAI takes it as the assistant's last word.
const pauseReply = `{"role":"assistant","content":"Pausing the task here for a context checkpoint."}`

// userText is how a chat body holds a user's text.
var userText = wire.UserText{
	IsUser:    func(m []byte) bool { return gjson.GetBytes(m, "role").String() == "user" },
	CanFollow: func([]byte) bool { return true },
	Part: func(text string) []byte {
		return append(append([]byte(`{"type":"text","text":`), wire.AppendJSONString(nil, text)...), '}')
	},
	Message: func(text string) []byte { msg, _ := Format{}.NewMessage(wire.RoleUser, text, noCount); return msg },
	Bridge: func(m []byte) []byte {
		if r := gjson.GetBytes(m, "role").String(); r == "tool" || r == "function" {
			return []byte(pauseReply)
		}
		return nil
	},
}

func noCount(string) int { return 0 }

// historySummaryBody is the summary call that continues the conversation
// c.History (the request as forwarded) with c.Prompt as the next user
// text (wire.AppendUserText; after tool results, pauseReply first), so
// the provider's cached prefix of the
// conversation holds: every member as sent, tools included, but tools
// disabled (tool_choice "none" when tools are offered, function_call
// "none" for legacy functions), not streamed (stream and stream_options
// left out), and the length cap by rules (max_tokens, or
// max_completion_tokens with wire.ReasoningHeadroom). The temperature stays
// the client's: the upstream took it for this model.
func historySummaryBody(c wire.SummaryCall, rules wire.ParamRules) ([]byte, error) {
	body, ok := wire.AppendUserText(c.History, "messages", c.Prompt, userText)
	if !ok {
		return nil, wire.ErrNoHistoryForm
	}
	edits := []wire.TopEdit{{Key: "stream"}, {Key: "stream_options"}}
	if wire.HasList(body, "tools") {
		edits = append(edits, wire.TopEdit{Key: "tool_choice", Raw: []byte(`"none"`)})
	}
	if wire.HasList(body, "functions") {
		edits = append(edits, wire.TopEdit{Key: "function_call", Raw: []byte(`"none"`)})
	}
	if rules.MaxCompletionTokens {
		edits = append(edits, wire.TopEdit{Key: "max_tokens"}, wire.TopEdit{Key: "max_completion_tokens", Raw: itoa(c.MaxTokens + wire.ReasoningHeadroom)})
	} else {
		edits = append(edits, wire.TopEdit{Key: "max_completion_tokens"}, wire.TopEdit{Key: "max_tokens", Raw: itoa(c.MaxTokens)})
	}
	return wire.EditTop(body, edits...)
}

func itoa(n int) []byte { return fmt.Appendf(nil, "%d", n) }
