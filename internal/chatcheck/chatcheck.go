// Package chatcheck holds the checks tests run on a rewritten chat-completions
// request: is it still one a strict server accepts? It is test support, not
// part of a request's path.
package chatcheck

import (
	"errors"
	"fmt"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/tidwall/gjson"
)

// ErrInvalidChat means a chat request would be refused by a strict server (see ValidateChat).
var ErrInvalidChat = errors.New("compactor: invalid chat request")

// ValidateChat reports whether a chat-completions request body (JSON) is
// one a strict server (OpenAI, vLLM and llama.cpp chat templates) accepts,
// as far as the message sequence goes; it is how tests prove a compaction
// kept requests valid. It checks that:
//
//   - messages is an array of objects with a known role;
//   - every tool result answers a tool_call id of the latest assistant
//     message, with no user or assistant message in between, once;
//   - every assistant tool_call is answered before the next user or
//     assistant message (or the end of the request);
//   - the first message after the system/developer ones is not a tool
//     result;
//   - there is at least one user message.
//
// The error wraps ErrInvalidChat and names the index of the first problem.
func ValidateChat(body []byte) error {
	if !jsonvalid.Valid(body) {
		return fmt.Errorf("%w: body is not valid JSON", ErrInvalidChat)
	}
	msgs := gjson.GetBytes(body, "messages")
	if !msgs.IsArray() {
		return fmt.Errorf("%w: no messages array", ErrInvalidChat)
	}
	var (
		v   turnChecker
		err error
		i   = -1
	)
	msgs.ForEach(func(_, m gjson.Result) bool {
		i++
		if err = v.unansweredAt(i, m); err == nil {
			err = v.message(i, m)
			if err != nil {
				err = fmt.Errorf("messages[%d]: %w", i, err)
			}
		}
		return err == nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidChat, err)
	}
	if err := v.unanswered("the end of the request"); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidChat, err)
	}
	if v.users == 0 {
		return fmt.Errorf("%w: no user message", ErrInvalidChat)
	}
	return nil
}

// turnChecker walks the messages, tracking the calls of the latest
// assistant message that still wait for their result.
type turnChecker struct {
	users      int
	seenTurn   bool            // a non-system message was seen
	callsAt    int             // index of the assistant message whose calls are open
	calls      []string        // its call ids, in order
	answered   map[string]bool // id -> answered, for the ids in calls
	funcCall   bool            // it made a legacy function_call, not yet answered
	openedTurn bool            // calls/funcCall belong to a live assistant turn
}

// message checks message i.
func (v *turnChecker) message(i int, m gjson.Result) error {
	if !m.IsObject() {
		return fmt.Errorf("not an object")
	}
	role := m.Get("role")
	if role.Type != gjson.String {
		return fmt.Errorf("no role")
	}
	switch role.Str {
	case "system", "developer":
		return nil // allowed between turns, as several agents send them
	case "user", "assistant":
		v.openedTurn, v.funcCall, v.calls = false, false, v.calls[:0]
		clear(v.answered)
		v.seenTurn = true
		if role.Str == "user" {
			v.users++
			return nil
		}
		return v.assistant(i, m)
	case "tool":
		if !v.seenTurn {
			return fmt.Errorf("tool result is the first message after the system messages (an orphan)")
		}
		id := m.Get("tool_call_id")
		if id.Type != gjson.String || id.Str == "" {
			return fmt.Errorf("tool result without tool_call_id")
		}
		done, ok := v.answered[id.Str]
		switch {
		case !v.openedTurn || !ok:
			return fmt.Errorf("tool result %q answers no tool_call of the preceding assistant message", id.Str)
		case done:
			return fmt.Errorf("second tool result for tool_call %q", id.Str)
		}
		v.answered[id.Str] = true
		return nil
	case "function":
		if !v.seenTurn {
			return fmt.Errorf("function result is the first message after the system messages (an orphan)")
		}
		if !v.openedTurn || !v.funcCall {
			return fmt.Errorf("function result without a preceding assistant function_call")
		}
		v.funcCall = false
		return nil
	default:
		return fmt.Errorf("unknown role %q", role.Str)
	}
}

// assistant opens the calls of assistant message i.
func (v *turnChecker) assistant(i int, m gjson.Result) error {
	v.callsAt, v.openedTurn = i, true
	v.funcCall = m.Get("function_call").IsObject()
	tcs := m.Get("tool_calls")
	if !tcs.Exists() || tcs.Type == gjson.Null {
		return nil
	}
	if !tcs.IsArray() {
		return fmt.Errorf("tool_calls is not an array")
	}
	if v.answered == nil {
		v.answered = make(map[string]bool)
	}
	var err error
	k := -1
	tcs.ForEach(func(_, tc gjson.Result) bool {
		k++
		id := tc.Get("id")
		switch {
		case id.Type != gjson.String || id.Str == "":
			err = fmt.Errorf("tool_calls[%d] has no id", k)
		case v.hasCall(id.Str):
			err = fmt.Errorf("tool_calls[%d] repeats id %q", k, id.Str)
		default:
			v.calls = append(v.calls, id.Str)
			v.answered[id.Str] = false
		}
		return err == nil
	})
	return err
}

func (v *turnChecker) hasCall(id string) bool {
	_, ok := v.answered[id]
	return ok
}

// unansweredAt checks, before message i opens a new user or assistant
// turn, that the previous turn's calls were all answered.
func (v *turnChecker) unansweredAt(i int, m gjson.Result) error {
	switch r := m.Get("role").String(); r {
	case "user", "assistant":
		return v.unanswered(fmt.Sprintf("the next %s message (messages[%d])", r, i))
	}
	return nil
}

// unanswered returns an error naming the first open call of the latest
// assistant message that got no result before `before`.
func (v *turnChecker) unanswered(before string) error {
	if !v.openedTurn {
		return nil
	}
	for _, id := range v.calls {
		if !v.answered[id] {
			return fmt.Errorf("messages[%d]: tool_call %q has no tool result before %s", v.callsAt, id, before)
		}
	}
	if v.funcCall {
		return fmt.Errorf("messages[%d]: function_call has no function result before %s", v.callsAt, before)
	}
	return nil
}

// ValidateAlternation reports whether a chat-completions request body
// passes the role rule of strict chat templates (Mistral-style templates
// and the llama.cpp Jinja templates that raise "Conversation roles must
// alternate user/assistant/user/assistant/..."): after the leading
// system/developer messages there is no other system message, and the user
// and assistant messages, leaving out tool results and the assistant
// messages that make tool calls (as those templates do), alternate,
// starting with a user message. Many clients send histories that break it,
// so it is not part of ValidateChat: tests assert that a rewrite keeps it
// where the client's own request kept it. The error wraps ErrInvalidChat
// and names the index of the first problem.
func ValidateAlternation(body []byte) error {
	if !jsonvalid.Valid(body) {
		return fmt.Errorf("%w: body is not valid JSON", ErrInvalidChat)
	}
	msgs := gjson.GetBytes(body, "messages")
	if !msgs.IsArray() {
		return fmt.Errorf("%w: no messages array", ErrInvalidChat)
	}
	var err error
	i, lead, want := -1, true, "user"
	msgs.ForEach(func(_, m gjson.Result) bool {
		i++
		role := m.Get("role").String()
		switch {
		case role == "system" || role == "developer":
			if !lead {
				err = fmt.Errorf("%w: messages[%d]: role %s after the conversation started", ErrInvalidChat, i, role)
			}
		case role == "tool" || role == "function":
			lead = false
		case role == "assistant" && (m.Get("tool_calls").IsArray() && len(m.Get("tool_calls").Array()) > 0 || m.Get("function_call").IsObject()):
			lead = false
		case role != want:
			err = fmt.Errorf("%w: messages[%d]: role %s where roles must alternate (%s expected)", ErrInvalidChat, i, role, want)
		default:
			lead = false
			want = map[string]string{"user": "assistant", "assistant": "user"}[role]
		}
		return err == nil
	})
	return err
}
