package responses

import (
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/sse"
)

var _ wire.Tools = Format{}

// OfferTool adds t to body's tools as the Responses API defines a
// function tool: {"type":"function", name, description, parameters,
// "strict":false} (strict is the API's default, and a schema with an
// optional argument is refused under it). A request that continues a
// conversation object the provider keeps is not offered the tool: its
// hidden exchange would be kept in that conversation.
func (Format) OfferTool(body []byte, t wire.Tool) ([]byte, bool) {
	if gjson.GetBytes(body, "conversation").Exists() {
		return body, false
	}
	def := []byte(`{"type":"function","name":`)
	def = wire.AppendJSONString(def, t.Name)
	def = wire.AppendJSONString(append(def, `,"description":`...), t.Description)
	def = append(append(append(def, `,"parameters":`...), t.Parameters...), `,"strict":false}`...)
	return wire.OfferTool(body, t.Name, def, func(tool []byte) string {
		return gjson.GetBytes(tool, "name").String()
	})
}

// ReadAnswer reads a response object, or its stream, for its output
// items. A stream is whole once it ends with response.completed, whose
// response carries every output item (the items its output_item.done
// events gave, when a server leaves that list out). Only a completed
// response has calls to answer: an incomplete one's last call may be cut.
func (Format) ReadAnswer(answer []byte) (wire.Answer, bool) {
	if !wire.AnswerIsStream(answer) {
		if !jsonvalid.Valid(answer) || !gjson.GetBytes(answer, "output").IsArray() {
			return nil, false
		}
		r := gjson.ParseBytes(answer)
		return readResponse(r, nil, UsageFromJSON(answer)), true
	}
	var (
		events    sse.JSONEvents
		done      []gjson.Result // output_item.done's items, in order
		completed gjson.Result
		ended     bool
	)
	event := func(data []byte) {
		switch gjson.GetBytes(data, "type").String() {
		case "response.output_item.done":
			done = append(done, gjson.ParseBytes(data).Get("item"))
		case eventCompleted:
			completed, ended = gjson.ParseBytes(data).Get("response"), true
		case eventIncomplete, eventFailed, eventError:
			ended = false
		}
	}
	events.Feed(answer, []byte(`"type"`), event)
	events.Feed([]byte("\n"), []byte(`"type"`), event)
	if !ended {
		return nil, false
	}
	u := ReadUsage(completed.Get("usage"))
	u.ServerCompacted = compacted(completed.Get("output"))
	return readResponse(completed, done, u), true
}

// readResponse is the answer of response r; done stands for its output
// when that is empty.
func readResponse(r gjson.Result, done []gjson.Result, u Usage) *toolAnswer {
	a := &toolAnswer{usage: u, items: r.Get("output").Array()}
	if len(a.items) == 0 {
		a.items = done
	}
	if s := r.Get("status"); s.Exists() && s.String() != "completed" {
		return a
	}
	for _, it := range a.items {
		if it.Get("type").String() == kindFunctionCall {
			a.calls = append(a.calls, callOf(it))
		}
	}
	return a
}

// kindFunctionCall is the output item of a function call.
const kindFunctionCall = "function_call"

func callOf(it gjson.Result) wire.Call {
	return wire.Call{ID: it.Get("call_id").String(), Name: it.Get("name").String(), Arguments: it.Get("arguments").String()}
}

// toolAnswer is a response as ReadAnswer reads it.
type toolAnswer struct {
	items []gjson.Result
	calls []wire.Call // of a completed response
	usage Usage
}

func (a *toolAnswer) Calls() []wire.Call { return a.calls }

func (a *toolAnswer) Usage() Usage { return a.usage }

// Continue appends the response's output to input, as the API's own
// guides send it back, and a function_call_output per result. Only
// reasoning, messages and the calls kept go: every other call is the
// client's, and wants an output ctxpress cannot give; a reasoning item
// goes only with the item it came before. Under store:false nothing the
// provider stored can be named: the items go without their ids, and a
// reasoning item without its encrypted content is left out.
func (a *toolAnswer) Continue(body []byte, keep func(wire.Call) bool, results []wire.CallResult) ([]byte, error) {
	stored := gjson.GetBytes(body, "store").Type != gjson.False
	kept := make([]bool, len(a.items))
	for i := len(a.items) - 1; i >= 0; i-- { // backwards: a reasoning item goes with the item after it
		it := a.items[i]
		switch it.Get("type").String() {
		case "reasoning":
			kept[i] = i+1 < len(a.items) && kept[i+1] && a.items[i+1].Get("type").String() != "reasoning" &&
				(stored || it.Get("encrypted_content").String() != "")
		case "message":
			kept[i] = true
		case kindFunctionCall:
			kept[i] = keep(callOf(it))
		}
	}
	var items [][]byte
	for i, it := range a.items {
		if !kept[i] {
			continue
		}
		raw := []byte(it.Raw)
		if !stored {
			var err error
			if raw, err = sjson.DeleteBytes(raw, "id"); err != nil {
				return nil, err
			}
		}
		items = append(items, raw)
	}
	for _, r := range results {
		o := wire.AppendJSONString([]byte(`{"type":"function_call_output","call_id":`), r.Call.ID)
		items = append(items, append(wire.AppendJSONString(append(o, `,"output":`...), r.Text), '}'))
	}
	return appendInput(body, items)
}

// appendInput returns body with items at the end of its input: a string
// input becomes the user message it stands for, then the items; a body
// without input (one continuing a previous response) gets one.
func appendInput(body []byte, items [][]byte) ([]byte, error) {
	in := gjson.GetBytes(body, "input")
	switch {
	case in.IsArray():
		if out, ok := wire.AppendToList(body, "input", items...); ok {
			return out, nil
		}
	case in.Type == gjson.String || !in.Exists():
		list := []byte{'['}
		if in.Exists() {
			list = append(append(append(list, `{"type":"message","role":"user","content":`...), in.Raw...), "},"...)
		}
		for i, it := range items {
			if i > 0 {
				list = append(list, ',')
			}
			list = append(list, it...)
		}
		return sjson.SetRawBytes(append([]byte(nil), body...), "input", append(list, ']'))
	}
	return nil, wire.ErrNoTurn
}
