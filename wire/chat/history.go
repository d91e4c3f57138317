package chat

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// ErrNoHistoryForm means a conversation cannot take the summary
// instruction as its next user text (no messages, or a last message no
// user message may follow): the summary call is then a transcript.
var ErrNoHistoryForm = errors.New("compactor: the conversation cannot take the summary instruction")

// TopEdit is one change to a top-level member of a summary call's body:
// Raw becomes its value (added last when absent), or with Raw nil the
// member is left out.
type TopEdit struct {
	Key string
	Raw []byte
}

// EditTop applies edits to body's top-level members in order; every other
// byte stays as it is. body must be a valid JSON object; it is not
// modified.
func EditTop(body []byte, edits ...TopEdit) ([]byte, error) {
	out := append([]byte(nil), body...)
	var err error
	for _, e := range edits {
		if e.Raw == nil {
			out, err = sjson.DeleteBytes(out, e.Key)
		} else {
			out, err = sjson.SetRawBytes(out, e.Key, e.Raw)
		}
		if err != nil {
			return nil, fmt.Errorf("compactor: summary call body, %s: %w", e.Key, err)
		}
	}
	return out, nil
}

// DropElements returns body without the elements of its top-level array
// member key that drop reports true for (their commas with them); every
// other byte stays as it is. body must be valid JSON; it is not modified.
func DropElements(body []byte, key string, drop func(gjson.Result) bool) ([]byte, error) {
	var at []int
	arr := gjson.GetBytes(body, key)
	if !arr.IsArray() {
		return body, nil
	}
	arr.ForEach(func(i, v gjson.Result) bool {
		if drop(v) {
			at = append(at, int(i.Int()))
		}
		return true
	})
	out := append([]byte(nil), body...)
	var err error
	for _, i := range slices.Backward(at) { // the last first: earlier indices stay
		if out, err = sjson.DeleteBytes(out, fmt.Sprintf("%s.%d", key, i)); err != nil {
			return nil, fmt.Errorf("compactor: summary call body, %s: %w", key, err)
		}
	}
	return out, nil
}

// HasList reports whether body's top-level member key is a non-empty
// array (tools offered: a tool_choice is only allowed then).
func HasList(body []byte, key string) bool {
	v := gjson.GetBytes(body, key)
	return v.IsArray() && len(v.Array()) > 0
}

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
func historySummaryBody(c SummaryCall, rules wire.ParamRules) ([]byte, error) {
	body, ok := wire.AppendUserText(c.History, "messages", c.Prompt, userText)
	if !ok {
		return nil, ErrNoHistoryForm
	}
	edits := []TopEdit{{Key: "stream"}, {Key: "stream_options"}}
	if HasList(body, "tools") {
		edits = append(edits, TopEdit{Key: "tool_choice", Raw: []byte(`"none"`)})
	}
	if HasList(body, "functions") {
		edits = append(edits, TopEdit{Key: "function_call", Raw: []byte(`"none"`)})
	}
	if rules.MaxCompletionTokens {
		edits = append(edits, TopEdit{Key: "max_tokens"}, TopEdit{Key: "max_completion_tokens", Raw: itoa(c.MaxTokens + wire.ReasoningHeadroom)})
	} else {
		edits = append(edits, TopEdit{Key: "max_completion_tokens"}, TopEdit{Key: "max_tokens", Raw: itoa(c.MaxTokens)})
	}
	return EditTop(body, edits...)
}

func itoa(n int) []byte { return fmt.Appendf(nil, "%d", n) }
