package chat

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/sse"
)

var _ wire.Tools = Format{}

// OfferTool adds t to body's tools as chat defines a function tool:
// {"type":"function","function":{name, description, parameters}}.
func (Format) OfferTool(body []byte, t wire.Tool) ([]byte, bool) {
	def := []byte(`{"type":"function","function":{"name":`)
	def = wire.AppendJSONString(def, t.Name)
	def = append(def, `,"description":`...)
	def = wire.AppendJSONString(def, t.Description)
	def = append(append(append(def, `,"parameters":`...), t.Parameters...), "}}"...)
	return wire.OfferTool(body, t.Name, def, func(tool []byte) string {
		return gjson.GetBytes(tool, "function.name").String()
	})
}

// ReadAnswer reads a chat completion, or the chunks of its stream, for
// the first choice's message: its text, its reasoning (reasoning_content,
// as llama.cpp and DeepSeek send it back) and its tool calls. An answer
// with more than one choice has no calls to answer: the client reads
// each. A stream is whole once the choice has its finish_reason.
func (Format) ReadAnswer(answer []byte) (wire.Answer, bool) {
	if wire.AnswerIsStream(answer) {
		return readStream(answer)
	}
	if !jsonvalid.Valid(answer) {
		return nil, false
	}
	choices := gjson.GetBytes(answer, "choices")
	a := &toolAnswer{usage: UsageFromJSON(answer)}
	if !choices.IsArray() || len(choices.Array()) != 1 {
		return a, choices.IsArray()
	}
	m := choices.Get("0.message")
	a.text, a.reasoning = m.Get("content").String(), m.Get("reasoning_content").String()
	m.Get("tool_calls").ForEach(func(_, c gjson.Result) bool {
		a.calls = append(a.calls, wire.Call{ID: c.Get("id").String(), Name: c.Get("function.name").String(),
			Arguments: c.Get("function.arguments").String()})
		return true
	})
	return a, true
}

// readStream is ReadAnswer of a stream: the first choice's deltas joined,
// each tool call's from the deltas of its index.
func readStream(answer []byte) (wire.Answer, bool) {
	a := &toolAnswer{}
	var text, reasoning strings.Builder
	byIndex := map[int64]int{}
	finished, failed := false, false
	var events sse.JSONEvents
	event := func(data []byte) {
		if gjson.GetBytes(data, "error").Exists() {
			failed = true
		}
		if u := ReadUsage(gjson.GetBytes(data, "usage")); u.Found {
			a.usage = u
		}
		gjson.GetBytes(data, "choices").ForEach(func(_, ch gjson.Result) bool {
			if ch.Get("index").Int() != 0 {
				a.several = true
				return true
			}
			d := ch.Get("delta")
			text.WriteString(d.Get("content").String())
			reasoning.WriteString(d.Get("reasoning_content").String())
			d.Get("tool_calls").ForEach(func(_, c gjson.Result) bool {
				i, ok := byIndex[c.Get("index").Int()]
				if !ok {
					i = len(a.calls)
					byIndex[c.Get("index").Int()] = i
					a.calls = append(a.calls, wire.Call{})
				}
				call := &a.calls[i]
				if id := c.Get("id").String(); call.ID == "" {
					call.ID = id
				}
				if name := c.Get("function.name").String(); call.Name == "" {
					call.Name = name
				}
				call.Arguments += c.Get("function.arguments").String()
				return true
			})
			if f := ch.Get("finish_reason"); f.Exists() && f.Type != gjson.Null {
				finished = true
			}
			return true
		})
	}
	events.Feed(answer, nil, event)
	events.Feed([]byte("\n"), nil, event) // a last line without its end
	if failed || !finished {
		return nil, false
	}
	a.text, a.reasoning = text.String(), reasoning.String()
	return a, true
}

// toolAnswer is a chat answer as ReadAnswer reads it.
type toolAnswer struct {
	text, reasoning string
	calls           []wire.Call
	usage           Usage
	several         bool // more than one choice: none is the model's turn
}

func (a *toolAnswer) Calls() []wire.Call {
	if a.several {
		return nil
	}
	return a.calls
}

func (a *toolAnswer) Usage() Usage { return a.usage }

// Continue appends the assistant message (content null when it said
// nothing, its reasoning_content when it had one, the calls kept) and a
// tool message per result, as a chat client sends them back.
func (a *toolAnswer) Continue(body []byte, keep func(wire.Call) bool, results []wire.CallResult) ([]byte, error) {
	m := []byte(`{"role":"assistant","content":`)
	if a.text == "" {
		m = append(m, "null"...)
	} else {
		m = wire.AppendJSONString(m, a.text)
	}
	if a.reasoning != "" {
		m = wire.AppendJSONString(append(m, `,"reasoning_content":`...), a.reasoning)
	}
	kept := 0
	for _, c := range a.calls {
		if !keep(c) {
			continue
		}
		if kept == 0 {
			m = append(m, `,"tool_calls":[`...)
		} else {
			m = append(m, ',')
		}
		kept++
		m = wire.AppendJSONString(append(m, `{"id":`...), c.ID)
		m = wire.AppendJSONString(append(m, `,"type":"function","function":{"name":`...), c.Name)
		m = append(wire.AppendJSONString(append(m, `,"arguments":`...), c.Arguments), "}}"...)
	}
	if kept > 0 {
		m = append(m, ']')
	}
	msgs := [][]byte{append(m, '}')}
	for _, r := range results {
		t := wire.AppendJSONString([]byte(`{"role":"tool","tool_call_id":`), r.Call.ID)
		t = append(wire.AppendJSONString(append(t, `,"content":`...), r.Text), '}')
		msgs = append(msgs, t)
	}
	out, ok := wire.AppendToList(body, "messages", msgs...)
	if !ok {
		return nil, wire.ErrNoTurn
	}
	return out, nil
}
