package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// messagesAgent is Claude Code 2.1.332 on the Messages API, as its
// captures (internal/messagestest/testdata) show it: the capture's system
// blocks, 12 tools, metadata, thinking, context_management and headers;
// messages[1] a role:"system" message (a block list on turn 1, a string
// later); every answer's content sent back as it came (thinking blocks
// with their signatures), a tool_result for each tool_use; one
// cache_control marker on the newest block, moving each turn.
type messagesAgent struct {
	t       *testing.T
	url     string // ctxpress, without /v1
	session string
	top     []topField // the capture's other fields, in order
	msgs    []agentMessage
	// header are Claude Code's headers, sent in this order; key its
	// x-api-key.
	header [][2]string
	calls  int
	// output is the result of the n-th tool call (from 1); nil: toolOutput.
	output func(n int) string
	resp   http.Header // of the last answer
}

type topField struct{ key, raw string }

// agentMessage is a message as the agent sends it: a string content, or
// its blocks raw (the marker added on the way when newest).
type agentMessage struct {
	role   string
	str    *string
	blocks []string
}

// claudeCodeCapture reads a request Claude Code 2.1.332 sent, byte for byte.
func claudeCodeCapture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "messagestest", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// claudeCodeHeaders are the headers of the capture, in order, but for the
// request line, host, length, encoding and connection.
func claudeCodeHeaders(t *testing.T) [][2]string {
	t.Helper()
	var h [][2]string
	sc := bufio.NewScanner(bytes.NewReader(claudeCodeCapture(t, "claude-code-2.1.332-headers.txt")))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		switch strings.ToLower(k) {
		case "host", "content-length", "accept-encoding", "connection":
			continue
		}
		if ok {
			h = append(h, [2]string{k, v})
		}
	}
	return h
}

func newMessagesAgent(t *testing.T, url, session string) *messagesAgent {
	turn1 := claudeCodeCapture(t, "claude-code-2.1.332-turn1.json")
	a := &messagesAgent{t: t, url: url, session: session}
	gjson.ParseBytes(turn1).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "messages":
			for _, m := range v.Array() {
				am := agentMessage{role: m.Get("role").Str}
				for _, b := range m.Get("content").Array() {
					am.blocks = append(am.blocks, withoutMarker(b.Raw))
				}
				a.msgs = append(a.msgs, am)
			}
		case "metadata":
			a.top = append(a.top, topField{k.Str, fmt.Sprintf(`{"user_id":%q}`,
				`{"device_id":"52e240fd","account_uuid":"","session_id":"`+session+`"}`)})
		default:
			a.top = append(a.top, topField{k.Str, v.Raw})
		}
		return true
	})
	for _, h := range claudeCodeHeaders(t) {
		switch {
		case strings.EqualFold(h[0], "X-Claude-Code-Session-Id"):
			h[1] = session
		case strings.EqualFold(h[0], "x-api-key"):
			h[1] = testAnthropicKey
		}
		a.header = append(a.header, h)
	}
	return a
}

// withoutMarker is a raw block without its cache_control.
func withoutMarker(raw string) string {
	return strings.Replace(raw, `,"cache_control":{"type":"ephemeral"}`, "", 1)
}

// body is the next request: the newest block carries the marker, and
// after turn 1 the system message is a string, as Claude Code sends them.
func (a *messagesAgent) body(stream bool) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range a.top {
		if i > 0 {
			b.WriteByte(',')
		}
		if f.key == "stream" {
			f.raw = fmt.Sprint(stream)
		}
		fmt.Fprintf(&b, "%q:%s", f.key, f.raw)
		if f.key == "model" {
			b.WriteString(`,"messages":[`)
			for j, m := range a.msgs {
				if j > 0 {
					b.WriteByte(',')
				}
				b.WriteString(a.message(j, m))
			}
			b.WriteByte(']')
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

func (a *messagesAgent) message(j int, m agentMessage) string {
	last := j == len(a.msgs)-1
	if m.role == "system" && !last {
		text := gjson.Get(m.blocks[0], "text").Str
		s, _ := json.Marshal(text)
		return fmt.Sprintf(`{"role":"system","content":%s}`, s)
	}
	if m.str != nil {
		s, _ := json.Marshal(*m.str)
		return fmt.Sprintf(`{"role":%q,"content":%s}`, m.role, s)
	}
	blocks := append([]string(nil), m.blocks...)
	if last {
		n := len(blocks) - 1
		blocks[n] = blocks[n][:len(blocks[n])-1] + `,"cache_control":{"type":"ephemeral"}}`
	}
	return fmt.Sprintf(`{"role":%q,"content":[%s]}`, m.role, strings.Join(blocks, ","))
}

// messagesAnswer is an answer as the agent read it.
type messagesAnswer struct {
	status int
	raw    []byte // the whole body
	// blocks is the content, each block as JSON; stop its stop_reason.
	blocks []string
	stop   string
	// input, cacheRead, cacheWrite, output are its usage (a stream's
	// from message_start and message_delta); stopped: message_stop came.
	input, cacheRead, cacheWrite, output int
	stopped                              bool
}

func (r messagesAnswer) text() string {
	var out []string
	for _, b := range r.blocks {
		if gjson.Get(b, "type").Str == "text" {
			out = append(out, gjson.Get(b, "text").Str)
		}
	}
	return strings.Join(out, "")
}

// send posts the next request with Claude Code's headers (and extra) to
// /v1/messages?beta=true and reads the answer.
func (a *messagesAgent) send(stream bool, extra ...[2]string) messagesAnswer {
	a.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, a.url+"/v1/messages?beta=true", bytes.NewReader(a.body(stream)))
	for _, h := range append(append([][2]string(nil), a.header...), extra...) {
		req.Header.Add(h[0], h[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	a.resp = resp.Header
	raw, _ := io.ReadAll(resp.Body)
	return readMessagesAnswer(resp.StatusCode, resp.Header.Get("Content-Type"), raw)
}

// readMessagesAnswer reads an answer, whole or as events.
func readMessagesAnswer(status int, contentType string, raw []byte) messagesAnswer {
	r := messagesAnswer{status: status, raw: raw}
	if status != http.StatusOK {
		return r
	}
	usage := func(u gjson.Result) {
		for name, v := range map[string]*int{"input_tokens": &r.input, "cache_read_input_tokens": &r.cacheRead,
			"cache_creation_input_tokens": &r.cacheWrite, "output_tokens": &r.output} {
			if f := u.Get(name); f.Exists() {
				*v = int(f.Int())
			}
		}
	}
	if !strings.HasPrefix(contentType, "text/event-stream") {
		for _, b := range gjson.GetBytes(raw, "content").Array() {
			r.blocks = append(r.blocks, b.Raw)
		}
		r.stop, r.stopped = gjson.GetBytes(raw, "stop_reason").Str, true
		usage(gjson.GetBytes(raw, "usage"))
		return r
	}
	type building struct {
		typ, text, sig, id, name string
		input                    strings.Builder
		encrypted                *string // a compaction's encrypted_content
	}
	var cur []*building
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		ev := gjson.Parse(data)
		switch ev.Get("type").Str {
		case "message_start":
			usage(ev.Get("message.usage"))
		case "content_block_start":
			cb := ev.Get("content_block")
			cur = append(cur, &building{typ: cb.Get("type").Str, id: cb.Get("id").Str, name: cb.Get("name").Str})
		case "content_block_delta":
			b, d := cur[len(cur)-1], ev.Get("delta")
			b.text += d.Get("text").Str + d.Get("thinking").Str
			b.sig += d.Get("signature").Str
			b.input.WriteString(d.Get("partial_json").Str)
			if d.Get("type").Str == "compaction_delta" {
				b.text += d.Get("content").Str
				if e := d.Get("encrypted_content"); e.Type == gjson.String {
					b.encrypted = &e.Str
				}
			}
		case "message_delta":
			r.stop = ev.Get("delta.stop_reason").Str
			usage(ev.Get("usage"))
		case "message_stop":
			r.stopped = true
		}
	}
	for _, b := range cur {
		var s []byte
		switch b.typ {
		case "thinking":
			s, _ = json.Marshal(map[string]string{"type": "thinking", "thinking": b.text, "signature": b.sig})
		case "tool_use":
			s = []byte(fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"input":%s}`, b.id, b.name, b.input.String()))
		case "compaction":
			s, _ = json.Marshal(map[string]any{"type": "compaction", "content": b.text, "encrypted_content": b.encrypted})
		default:
			s, _ = json.Marshal(map[string]string{"type": "text", "text": b.text})
		}
		r.blocks = append(r.blocks, string(s))
	}
	return r
}

// turn sends the next request, fails the test unless it is answered, and
// appends the answer and a tool_result for each tool_use.
func (a *messagesAgent) turn(stream bool, extra ...[2]string) messagesAnswer {
	a.t.Helper()
	r := a.send(stream, extra...)
	if r.status != http.StatusOK || !r.stopped {
		a.t.Fatalf("turn refused: %d %.600s", r.status, r.raw)
	}
	a.take(r)
	return r
}

// take appends r's content, and the result of each of its tool calls.
func (a *messagesAgent) take(r messagesAnswer) {
	a.msgs = append(a.msgs, agentMessage{role: "assistant", blocks: r.blocks})
	var results []string
	for _, b := range r.blocks {
		if gjson.Get(b, "type").Str != "tool_use" {
			continue
		}
		a.calls++
		out := toolOutput(a.calls)
		if a.output != nil {
			out = a.output(a.calls)
		}
		s, _ := json.Marshal(out)
		results = append(results, fmt.Sprintf(`{"tool_use_id":%q,"type":"tool_result","content":%s,"is_error":false}`, gjson.Get(b, "id").Str, s))
	}
	if len(results) > 0 {
		a.msgs = append(a.msgs, agentMessage{role: "user", blocks: results})
	}
}

// ask appends a user message, as Claude Code sends a typed one.
func (a *messagesAgent) ask(text string) {
	s, _ := json.Marshal(text)
	a.msgs = append(a.msgs, agentMessage{role: "user", blocks: []string{fmt.Sprintf(`{"type":"text","text":%s}`, s)}})
}
