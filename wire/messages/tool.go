package messages

import (
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/sse"
)

var _ wire.Tools = Format{}

// OfferTool adds t to body's tools as Anthropic defines a client tool:
// {name, description, input_schema}.
func (Format) OfferTool(body []byte, t wire.Tool) ([]byte, bool) {
	def := wire.AppendJSONString([]byte(`{"name":`), t.Name)
	def = wire.AppendJSONString(append(def, `,"description":`...), t.Description)
	def = append(append(append(def, `,"input_schema":`...), t.Parameters...), '}')
	return wire.OfferTool(body, t.Name, def, func(tool []byte) string {
		return gjson.GetBytes(tool, "name").String()
	})
}

// ReadAnswer reads a message, or its stream, for its content blocks. A
// stream's blocks are rebuilt from their events: each block as
// content_block_start gave it, its text, thinking, signature and input
// (the partial JSON joined) from its deltas; it is whole once it reached
// message_stop.
func (Format) ReadAnswer(answer []byte) (wire.Answer, bool) {
	if !wire.AnswerIsStream(answer) {
		if !jsonvalid.Valid(answer) || !gjson.GetBytes(answer, "content").IsArray() {
			return nil, false
		}
		a := &toolAnswer{usage: UsageFromJSON(answer)}
		gjson.GetBytes(answer, "content").ForEach(func(_, b gjson.Result) bool {
			a.blocks = append(a.blocks, []byte(b.Raw))
			return true
		})
		return a.read(), true
	}
	var (
		events  sse.JSONEvents
		watch   StreamWatch
		blocks  []*streamBlock
		byIndex = map[int64]*streamBlock{}
		bad     bool
	)
	watch.Observe(answer)
	watch.Observe([]byte("\n"))
	event := func(data []byte) {
		ev := gjson.ParseBytes(data)
		switch ev.Get("type").String() {
		case "content_block_start":
			b := &streamBlock{start: ev.Get("content_block").Raw}
			blocks = append(blocks, b)
			byIndex[ev.Get("index").Int()] = b
		case "content_block_delta":
			b := byIndex[ev.Get("index").Int()]
			if b == nil {
				bad = true
				return
			}
			d := ev.Get("delta")
			switch d.Get("type").String() {
			case "text_delta":
				b.text.WriteString(d.Get("text").String())
			case "thinking_delta":
				b.thinking.WriteString(d.Get("thinking").String())
			case "signature_delta":
				b.signature.WriteString(d.Get("signature").String())
			case "input_json_delta":
				b.input.WriteString(d.Get("partial_json").String())
			}
		}
	}
	events.Feed(answer, []byte(`"type"`), event)
	events.Feed([]byte("\n"), []byte(`"type"`), event)
	if bad || !watch.Completed() {
		return nil, false
	}
	a := &toolAnswer{usage: watch.Usage()}
	for _, b := range blocks {
		raw, err := b.render()
		if err != nil {
			return nil, false
		}
		a.blocks = append(a.blocks, raw)
	}
	return a.read(), true
}

// streamBlock is a content block being streamed.
type streamBlock struct {
	start                            string // the block as content_block_start gave it
	text, thinking, signature, input strings.Builder
}

// render is the whole block: its start with what its deltas added.
func (b *streamBlock) render() ([]byte, error) {
	raw := []byte(b.start)
	var err error
	set := func(key, add string) {
		if err == nil && add != "" {
			raw, err = sjson.SetBytes(raw, key, gjson.GetBytes(raw, key).String()+add)
		}
	}
	set("text", b.text.String())
	set("thinking", b.thinking.String())
	set("signature", b.signature.String())
	if in := b.input.String(); in != "" && err == nil {
		if !jsonvalid.Valid([]byte(in)) {
			in = "{}" // cut short: the block must hold an object
		}
		raw, err = sjson.SetRawBytes(raw, "input", []byte(in))
	}
	return raw, err
}

// toolAnswer is a message as ReadAnswer reads it: its content blocks,
// whole.
type toolAnswer struct {
	blocks [][]byte
	calls  []wire.Call
	usage  Usage
}

// read finds the tool_use blocks' calls.
func (a *toolAnswer) read() *toolAnswer {
	for _, b := range a.blocks {
		if c, ok := callOf(b); ok {
			a.calls = append(a.calls, c)
		}
	}
	return a
}

// callOf is the call of a tool_use block.
func callOf(block []byte) (wire.Call, bool) {
	b := gjson.ParseBytes(block)
	if b.Get("type").String() != "tool_use" {
		return wire.Call{}, false
	}
	return wire.Call{ID: b.Get("id").String(), Name: b.Get("name").String(), Arguments: b.Get("input").Raw}, true
}

func (a *toolAnswer) Calls() []wire.Call { return a.calls }

func (a *toolAnswer) Usage() Usage { return a.usage }

// Continue appends the assistant message (every block as it came, its
// thinking with its signature, but the tool_use blocks not kept) and a
// user message of one tool_result per result. The request must end with
// the user's turn (a user message, or a system message after one): one
// that ends with the assistant's own words has no room for another
// assistant message.
func (a *toolAnswer) Continue(body []byte, keep func(wire.Call) bool, results []wire.CallResult) ([]byte, error) {
	msgs := gjson.GetBytes(body, "messages").Array()
	if len(msgs) == 0 {
		return nil, wire.ErrNoTurn
	}
	if r := msgs[len(msgs)-1].Get("role").String(); r != "user" && r != "system" {
		return nil, wire.ErrNoTurn
	}
	m := []byte(`{"role":"assistant","content":[`)
	n := 0
	for _, b := range a.blocks {
		if c, ok := callOf(b); ok && !keep(c) {
			continue
		}
		if n > 0 {
			m = append(m, ',')
		}
		m = append(m, b...)
		n++
	}
	m = append(m, `]}`...)
	u := []byte(`{"role":"user","content":[`)
	for i, r := range results {
		if i > 0 {
			u = append(u, ',')
		}
		u = wire.AppendJSONString(append(u, `{"type":"tool_result","tool_use_id":`...), r.Call.ID)
		u = wire.AppendJSONString(append(u, `,"content":`...), r.Text)
		if r.IsError {
			u = append(u, `,"is_error":true`...)
		}
		u = append(u, '}')
	}
	u = append(u, `]}`...)
	out, ok := wire.AppendToList(body, "messages", m, u)
	if !ok {
		return nil, wire.ErrNoTurn
	}
	return out, nil
}
