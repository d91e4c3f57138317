package rewrite

import (
	"bytes"
	"crypto/sha256"
	"strings"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// blocksFormat is a test-only wire format shaped like Anthropic's
// Messages API, the one that sends several tool results in one message:
//
//	{"model":"m","messages":[
//	  {"role":"user","content":"read a.go and b.go"},
//	  {"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"read_file","input":{"path":"a.go"}}, …]},
//	  {"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"…"}, …, {"type":"text","text":"…"}]}]}
//
// A content is a string (one text item) or an array of blocks: text,
// tool_use (a call), tool_result (a result with a string content). A user
// message that carries results is a RoleTool message. It is only as
// complete as dedup's tests need: no instructions are ever added.
type blocksFormat struct{}

var _ wire.Format = blocksFormat{}

func (blocksFormat) Name() string { return "blocks-test" }

func (blocksFormat) Parse(body []byte) (*wire.Conversation, bool) {
	root := gjson.ParseBytes(body)
	msgs := root.Get("messages")
	if !msgs.IsArray() {
		return &wire.Conversation{Body: body}, false
	}
	c := &wire.Conversation{Body: body, Model: root.Get("model").String()}
	msgs.ForEach(func(_, m gjson.Result) bool {
		wm := wire.Message{Span: spanOfValue(m), Object: m.IsObject(), WireRole: m.Get("role").String()}
		wm.Items.Start = len(c.Items)
		item := func(kind wire.Kind, s gjson.Result, content gjson.Result) *wire.Item {
			c.Items = append(c.Items, wire.Item{Kind: kind, Message: len(c.Messages), Span: spanOfValue(s), Content: spanOfValue(content)})
			return &c.Items[len(c.Items)-1]
		}
		text := map[string]wire.Kind{"system": wire.KindInstruction, "user": wire.KindUser, "assistant": wire.KindAssistant}[wm.WireRole]
		wm.Role = map[string]wire.Role{"system": wire.RoleInstruction, "user": wire.RoleUser, "assistant": wire.RoleAssistant}[wm.WireRole]
		content := m.Get("content")
		if content.Type == gjson.String {
			item(text, content, content)
		}
		content.ForEach(func(_, b gjson.Result) bool {
			switch b.Get("type").String() {
			case "text":
				item(text, b, b.Get("text"))
			case "tool_use":
				it := item(wire.KindToolCall, b, gjson.Result{})
				it.CallID, it.Tool, it.Args = b.Get("id").String(), b.Get("name").String(), spanOfValue(b.Get("input"))
			case "tool_result":
				it := item(wire.KindToolResult, b, b.Get("content"))
				it.CallID = b.Get("tool_use_id").String()
				wm.Role, wm.WireRole = wire.RoleTool, "tool"
			default:
				item(wire.KindOpaque, b, gjson.Result{})
			}
			return true
		})
		wm.Items.End = len(c.Items)
		c.Messages = append(c.Messages, wm)
		return true
	})
	for c.Lead < len(c.Messages) && c.Messages[c.Lead].Role == wire.RoleInstruction {
		c.Lead++
	}
	return c, true
}

func spanOfValue(v gjson.Result) wire.Span {
	if !v.Exists() {
		return wire.Span{}
	}
	return wire.Span{Start: v.Index, End: v.Index + len(v.Raw)}
}

func (blocksFormat) Overhead(c *wire.Conversation, m int, count wire.Count) int {
	msg := c.Messages[m]
	n := 3 + count(msg.WireRole)
	for _, it := range c.ItemsOf(m) {
		if it.Kind == wire.KindToolCall {
			n += count(it.Tool) + count(string(it.Args.Of(c.Body)))
		}
	}
	return n
}

func (blocksFormat) Parts(c *wire.Conversation, it int, _ wire.Count) []wire.Part {
	s := c.Items[it].Content
	if !s.Exists() {
		return nil
	}
	v := gjson.ParseBytes(s.Of(c.Body))
	return []wire.Part{{IsText: true, Text: v.String(), Span: s}}
}

func (f blocksFormat) Text(c *wire.Conversation, it int) string {
	var texts []string
	for _, p := range f.Parts(c, it, nil) {
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n")
}

func (blocksFormat) Arguments(c *wire.Conversation, it int) string {
	return string(c.Items[it].Args.Of(c.Body))
}

func (blocksFormat) CanonicalArguments(c *wire.Conversation, it int) []byte {
	return wire.AppendCanonical(nil, gjson.ParseBytes(c.Items[it].Args.Of(c.Body)))
}

func (blocksFormat) Digest(c *wire.Conversation, m int) [sha256.Size]byte {
	return sha256.Sum256(wire.AppendCanonical(nil, gjson.ParseBytes(c.Bytes(m))))
}

func (blocksFormat) ReplaceContent(c *wire.Conversation, it int, text string) wire.Edit {
	s := c.Items[it].Content
	return wire.Edit{Start: s.Start, End: s.End, Repl: wire.AppendJSONString(nil, text)}
}

func (f blocksFormat) AddInstructions(_ *wire.Conversation, texts []string, count wire.Count, _ wire.ItemCount, build bool) (*wire.Edit, []byte, int) {
	if len(texts) == 0 {
		return nil, nil, 0
	}
	msg, tokens := f.NewMessage(wire.RoleInstruction, strings.Join(texts, "\n\n"), count)
	if !build {
		msg = nil
	}
	return nil, msg, tokens
}

func (blocksFormat) PrependText(*wire.Conversation, int, string, wire.Count) (wire.Edit, int, bool) {
	return wire.Edit{}, 0, false
}

func (blocksFormat) NewMessage(role wire.Role, text string, count wire.Count) ([]byte, int) {
	r := "user"
	if role == wire.RoleInstruction {
		r = "system"
	}
	return append([]byte(`{"role":"`+r+`","content":`), append(wire.AppendJSONString(nil, text), '}')...), 3 + count(r) + count(text)
}

func (blocksFormat) ReplaceMessages(c *wire.Conversation, from, to int, msgs [][]byte) (wire.Edit, bool) {
	ms, n := c.Messages, len(c.Messages)
	if from == to && len(msgs) == 0 {
		return wire.Edit{}, false
	}
	join := bytes.Join(msgs, []byte{','})
	switch {
	case to < n:
		if len(msgs) > 0 {
			join = append(join, ',')
		}
		return wire.Edit{Start: ms[from].Start, End: ms[to].Start, Repl: join}, true
	case from > 0:
		if len(msgs) > 0 {
			join = append([]byte{','}, join...)
		}
		return wire.Edit{Start: ms[from-1].End, End: ms[n-1].End, Repl: join}, true
	case n > 0:
		return wire.Edit{Start: ms[0].Start, End: ms[n-1].End, Repl: join}, true
	}
	return wire.Edit{}, false
}

func (blocksFormat) DropMessages(c *wire.Conversation, from, to int) wire.Edit {
	return wire.Edit{Start: c.Messages[from-1].End, End: c.Messages[to-1].End}
}

// blocksBody builds a blocksFormat body of raw JSON messages.
func blocksBody(msgs ...string) []byte {
	return []byte(`{"model":"gpt-4o","messages":[` + strings.Join(msgs, ",") + `]}`)
}

// useBlock is a tool_use block calling tool with input (raw JSON).
func useBlock(id, tool, input string) string {
	return `{"type":"tool_use","id":"` + id + `","name":"` + tool + `","input":` + input + `}`
}

// resultBlock is a tool_result block answering call id with content.
func resultBlock(id, content string) string {
	return `{"type":"tool_result","tool_use_id":"` + id + `","content":` + jsonString(content) + `}`
}

// blocksMsg is a message of role whose content is blocks.
func blocksMsg(role string, blocks ...string) string {
	return `{"role":"` + role + `","content":[` + strings.Join(blocks, ",") + `]}`
}
