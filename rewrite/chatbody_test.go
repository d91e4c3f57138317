package rewrite

import (
	"github.com/ctxpress/ctxpress/wire"
	chatwire "github.com/ctxpress/ctxpress/wire/chat"
	"github.com/tidwall/gjson"
)

// chatFormat is the adapter the tests' bodies are in.
var chatFormat wire.Format = chatwire.Format{}

// span is a byte range of a test body.
type span struct{ start, end int }

func (s span) exists() bool { return s.end > 0 }

// testRequest is a chat body as the tests read it: the adapter's spans,
// with the fields the assertions look at.
type testRequest struct {
	body     []byte
	array    span
	messages []testMessage
}

// testMessage is one element of `messages`.
type testMessage struct {
	body         []byte
	span         // its bytes in body
	role         string
	toolCallID   string // of a tool result
	content      span
	toolCalls    span
	functionCall span
}

func (m *testMessage) raw(s span) []byte { return m.body[s.start:s.end] }

func (m *testMessage) isResult() bool { return m.role == "tool" || m.role == "function" }

func (m *testMessage) bytes() []byte { return m.body[m.start:m.end] }

// result decodes the value at s, Index its offset in the body.
func (m *testMessage) result(s span) gjson.Result {
	if !s.exists() {
		return gjson.Result{}
	}
	r := gjson.ParseBytes(m.body[s.start:s.end])
	r.Index = s.start
	return r
}

// parseRequest reads body with the chat adapter.
func parseRequest(body []byte) (testRequest, bool) {
	if !gjson.ValidBytes(body) {
		return testRequest{body: body}, false
	}
	c, ok := chatFormat.Parse(body)
	req := testRequest{body: body}
	if !ok {
		return req, false
	}
	if a := gjson.GetBytes(body, "messages"); a.IsArray() {
		req.array = span{a.Index, a.Index + len(a.Raw)}
	}
	for i, m := range c.Messages {
		tm := testMessage{body: body, span: span{m.Start, m.End}, role: m.WireRole}
		if m.Items.End > m.Items.Start {
			ct := c.Items[m.Items.Start].Content
			tm.content = span{ct.Start, ct.End}
		}
		if r := c.Result(i); r >= 0 {
			tm.toolCallID = c.Items[r].CallID
		}
		if tc := gjson.GetBytes(body[m.Start:m.End], "tool_calls"); tc.IsArray() && tc.Index > 0 {
			tm.toolCalls = span{m.Start + tc.Index, m.Start + tc.Index + len(tc.Raw)}
		}
		if fc := gjson.GetBytes(body[m.Start:m.End], "function_call"); fc.IsObject() && fc.Index > 0 {
			tm.functionCall = span{m.Start + fc.Index, m.Start + fc.Index + len(fc.Raw)}
		}
		req.messages = append(req.messages, tm)
	}
	return req, true
}

// squashablePart returns the text value of a text part of an array content.
func squashablePart(part gjson.Result) (gjson.Result, bool) {
	if !part.IsObject() {
		return gjson.Result{}, false
	}
	switch part.Get("type").String() {
	case "text", "input_text", "output_text":
		if t := part.Get("text"); t.Type == gjson.String {
			return t, true
		}
	}
	return gjson.Result{}, false
}

// contentText returns the text of a content: the string, or its text parts
// joined by newlines (as the adapter's Text).
func contentText(content gjson.Result) string {
	if content.Type == gjson.String {
		return content.Str
	}
	var b []byte
	content.ForEach(func(_, part gjson.Result) bool {
		if t, ok := squashablePart(part); ok {
			if len(b) > 0 {
				b = append(b, '\n')
			}
			b = append(b, t.Str...)
		}
		return true
	})
	return string(b)
}

// parseMessage reads one message on its own, its spans relative to raw.
func parseMessage(raw []byte, _ int) testMessage {
	const open = `{"messages":[`
	req, _ := parseRequest([]byte(open + string(raw) + `]}`))
	if len(req.messages) == 0 {
		return testMessage{body: raw}
	}
	m := req.messages[0]
	shift := func(s span) span {
		if !s.exists() {
			return s
		}
		return span{s.start - len(open), s.end - len(open)}
	}
	m.body, m.span = raw, shift(m.span)
	m.content, m.toolCalls, m.functionCall = shift(m.content), shift(m.toolCalls), shift(m.functionCall)
	return m
}

// textMessage is a chat message with a role and a string content.
func textMessage(role, text string) []byte {
	b := append([]byte(`{"role":"`), role...)
	b = append(b, `","content":`...)
	b = wire.AppendJSONString(b, text)
	return append(b, '}')
}

// canonicalDigest is the chat adapter's digest of one message.
func canonicalDigest(raw []byte) [32]byte {
	return chatFormat.Digest(&wire.Conversation{Body: raw, Messages: []wire.Message{{Span: wire.Span{End: len(raw)}}}}, 0)
}

// Token accounting constants of the chat format, as the tests spell out
// expected counts.
const (
	tokensPerMessage = 3
	replyPriming     = 3
	imagePartTokens  = 85
)
