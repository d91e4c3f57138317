package system

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/internal/messagestest"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/tidwall/gjson"
)

// ---- Messages: a strict fake upstream ----

// msgFake is a Messages upstream as strict as api.anthropic.com
// (messagestest.Check with its ledger and the request's headers) that
// also compacts as it does: a request whose context_management asks
// compact_20260112 and whose input is over the edit's trigger gets a
// compaction block first in its content (a summary and encrypted content
// only this fake issued), and usage with iterations (the compaction's,
// then the message's). A compaction block sent back must be one it issued,
// byte for byte. It counts input as bytes/4 of system, tools and messages
// from the latest compaction block on. Every other turn is a text and a
// Bash tool_use; a ctxpress summary call gets a tagged summary.
type msgFake struct {
	*httptest.Server
	ledger *messagestest.Ledger

	fakeLog                   // its mu guards the fields below too
	window  int               // 0: none, else refuse a longer prompt as Anthropic does
	issued  map[string]string // encrypted_content → the block issued
	n       int
}

// serverCompactionOutput is what the fake's compaction reports it wrote;
// it reports the input it read.
const serverCompactionOutput = 812

func newMsgFake(t *testing.T) *msgFake {
	f := &msgFake{ledger: messagestest.NewLedger(), issued: map[string]string{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func isMsgSummary(body []byte) bool {
	m := gjson.GetBytes(body, "messages").Array()
	return len(m) > 0 && m[len(m)-1].Get("role").Str == "user" &&
		compactor.IsSummaryPrompt(openaitest.LastText(m[len(m)-1].Get("content")))
}

// msgInput is the fake's count of a Messages request, and whether it holds
// a compaction block it did not issue as issued.
func (f *msgFake) msgInput(body []byte) (int, string) {
	msgs := gjson.GetBytes(body, "messages")
	from := msgs.Index
	bad := ""
	msgs.ForEach(func(_, m gjson.Result) bool {
		m.Get("content").ForEach(func(_, b gjson.Result) bool {
			if b.Get("type").Str == "compaction" {
				from = bytes.LastIndex(body, []byte(b.Raw))
				if f.issued[b.Get("encrypted_content").Str] != b.Raw {
					bad = b.Raw
				}
			}
			return true
		})
		return true
	})
	n := len(gjson.GetBytes(body, "system").Raw) + len(gjson.GetBytes(body, "tools").Raw) + msgs.Index + len(msgs.Raw) - from
	return (n + 3) / 4, bad
}

func (f *msgFake) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	g := fakeTurn{body: body, summary: isMsgSummary(body)}
	defer func() { f.got = append(f.got, g) }()
	refuse := func(e *messagestest.Error) {
		g.status, g.refusal = e.Status, e.Message
		e.Write(w)
	}
	switch {
	case r.URL.Path != "/v1/messages":
		refuse(&messagestest.Error{Status: http.StatusNotFound, Type: "not_found_error", Message: "Not Found: " + r.URL.Path})
		return
	case r.Header.Get("X-Api-Key") != "sk-ant-test" || r.Header.Get("Anthropic-Version") == "":
		refuse(&messagestest.Error{Status: http.StatusUnauthorized, Type: "authentication_error", Message: "invalid x-api-key or no anthropic-version"})
		return
	}
	req, rerr := messagestest.Check(body, messagestest.Options{Ledger: f.ledger, Header: r.Header})
	if rerr != nil {
		refuse(rerr)
		return
	}
	input, bad := f.msgInput(body)
	if bad != "" {
		refuse(&messagestest.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: "compaction block could not be verified: " + bad})
		return
	}
	if f.window > 0 && input > f.window {
		refuse(&messagestest.Error{Status: http.StatusBadRequest, Type: "invalid_request_error",
			Message: fmt.Sprintf("prompt is too long: %d tokens > %d maximum", input, f.window)})
		return
	}
	g.status, g.input = http.StatusOK, input
	f.n++
	id := fmt.Sprintf("msg_up_%d", f.n)
	var blocks []map[string]any
	usage := map[string]any{"input_tokens": input, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 20}
	if limit, ok := compactEdit(body); ok && input > limit && !g.summary {
		summary := fmt.Sprintf("The user is fixing the leap-year bug (server-summary-%d).", f.n)
		enc, _ := f.ledger.Compact(req, id, summary)
		block := map[string]any{"type": "compaction", "content": summary, "encrypted_content": enc}
		raw, _ := json.Marshal(block)
		f.issued[block["encrypted_content"].(string)] = string(raw)
		blocks = append(blocks, block)
		after := 150
		usage = map[string]any{"input_tokens": after, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 20,
			"iterations": []map[string]any{
				{"type": "compaction", "input_tokens": input, "output_tokens": serverCompactionOutput, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
				{"type": "message", "input_tokens": after, "output_tokens": 20, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}}}
		g.input = after
	}
	stop := "end_turn"
	switch {
	case g.summary:
		blocks = append(blocks, map[string]any{"type": "text", "text": fmt.Sprintf("## Goal\nFix the leap-year bug.\n\n## Active Task\nsummary-%d", f.n)})
	case len(req.Tools) > 0:
		call := fmt.Sprintf("toolu_up%03d", f.n)
		f.ledger.ToolUse(id, call)
		blocks = append(blocks, map[string]any{"type": "text", "text": "Running the next step."},
			map[string]any{"type": "tool_use", "id": call, "name": "Bash", "input": map[string]any{"command": fmt.Sprintf("grep -n leap dateparse/*.go # %d", f.n)}})
		stop = "tool_use"
	default:
		blocks = append(blocks, map[string]any{"type": "text", "text": "Done."})
	}
	msg := map[string]any{"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": blocks,
		"stop_reason": stop, "stop_sequence": nil, "usage": usage}
	if !req.Stream {
		b, _ := json.Marshal(msg)
		writeJSON(w, http.StatusOK, b)
		return
	}
	s := newSSE(w)
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	start["usage"] = map[string]any{"input_tokens": usage["input_tokens"], "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}
	s.send("message_start", map[string]any{"message": start})
	for i, b := range blocks {
		switch b["type"] {
		case "compaction":
			s.send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "compaction", "content": ""}})
			s.send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "compaction_delta", "content": b["content"], "encrypted_content": b["encrypted_content"]}})
		case "tool_use":
			s.send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			in, _ := json.Marshal(b["input"])
			s.send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		default:
			s.send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			s.send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		}
		s.send("content_block_stop", map[string]any{"index": i})
	}
	s.send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": usage})
	s.send("message_stop", map[string]any{})
}

// compactEdit is the trigger of a compact_20260112 edit in body's
// context_management (150,000 when it names none), and whether there is one.
func compactEdit(body []byte) (int, bool) {
	for _, e := range gjson.GetBytes(body, "context_management.edits").Array() {
		if e.Get("type").Str == "compact_20260112" {
			if v := e.Get("trigger.value"); v.Exists() {
				return int(v.Int()), true
			}
			return 150000, true
		}
	}
	return 0, false
}

// ---- Messages: a Claude-style agent over plain HTTP ----

// msgAgent is a Claude-style tool loop: a system prompt, a Bash tool, every
// answer's content sent back as it came (blocks raw), a tool_result for
// each tool_use and, every third turn, a user text beside them.
type msgAgent struct {
	t       *testing.T
	url     string
	session string
	msgs    []string // raw messages
	manage  string   // context_management, raw; "" for none
	phase   string
	calls   int
	sent    int
	header  http.Header // of the last answer
	body    []byte      // the last request, as sent
	// lastCompactRequest is the request the server compacted.
	lastCompactRequest []byte
	// blockCalls is how many tool results were written before the
	// answer that held a compaction block: those are before it.
	blockCalls int
}

func newMsgAgent(t *testing.T, url, session string) *msgAgent {
	return &msgAgent{t: t, url: url, session: session, phase: "p1",
		msgs: []string{`{"role":"user","content":"The test TestParseDate fails on leap years; find and fix the bug in dateparse/parse.go."}`}}
}

// turn sends the history, fails the test unless it is answered, and
// appends the answer and the tool results; it returns the answer's blocks.
func (a *msgAgent) turn(stream bool) []string {
	a.t.Helper()
	body := `{"model":"claude-sonnet-4-5","max_tokens":4096,"system":"You are a coding agent. Use Bash to inspect the repository.",` +
		`"tools":[{"name":"Bash","description":"Runs a shell command.","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}],`
	if a.manage != "" {
		body += `"context_management":` + a.manage + `,`
	}
	body += fmt.Sprintf(`"stream":%v,"messages":[%s]}`, stream, strings.Join(a.msgs, ","))
	a.body = []byte(body)
	a.sent++
	req, _ := http.NewRequest(http.MethodPost, a.url+"/v1/messages", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "sk-ant-test")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("X-Session-ID", a.session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		a.t.Fatalf("turn %d refused: %d %s", a.sent, resp.StatusCode, raw)
	}
	a.header = resp.Header
	blocks := answerBlocks(raw, stream)
	var results []string
	for _, b := range blocks {
		switch gjson.Get(b, "type").Str {
		case "compaction":
			a.blockCalls = a.calls
		case "tool_use":
			a.calls++
			results = append(results, `{"type":"tool_result","tool_use_id":`+jsonString(gjson.Get(b, "id").Str)+`,"content":`+jsonString(toolText(a.phase, a.calls))+`}`)
		}
	}
	if len(blocks) == 0 {
		a.t.Fatalf("turn %d: an answer without content: %s", a.sent, raw)
	}
	a.msgs = append(a.msgs, `{"role":"assistant","content":[`+strings.Join(blocks, ",")+`]}`)
	if a.sent%3 == 0 {
		results = append(results, fmt.Sprintf(`{"type":"text","text":"Keep going (turn %d)."}`, a.sent))
	}
	if len(results) > 0 {
		a.msgs = append(a.msgs, `{"role":"user","content":[`+strings.Join(results, ",")+`]}`)
	}
	return blocks
}

func (a *msgAgent) compacted() bool { return a.header.Get("X-Ctxpress-Compacted") == "true" }

// answerBlocks is an answer's content blocks, raw: a message's as sent,
// a stream's put together from its events as the SDKs do.
func answerBlocks(raw []byte, stream bool) []string {
	var out []string
	if !stream {
		gjson.GetBytes(raw, "content").ForEach(func(_, b gjson.Result) bool {
			out = append(out, b.Raw)
			return true
		})
		return out
	}
	var blocks []map[string]any
	partial := map[int]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		ev := gjson.Parse(data)
		i := int(ev.Get("index").Int())
		switch ev.Get("type").Str {
		case "content_block_start":
			var b map[string]any
			_ = json.Unmarshal([]byte(ev.Get("content_block").Raw), &b)
			blocks = append(blocks, b)
		case "content_block_delta":
			d := ev.Get("delta")
			switch d.Get("type").Str {
			case "text_delta":
				blocks[i]["text"] = blocks[i]["text"].(string) + d.Get("text").Str
			case "input_json_delta":
				partial[i] += d.Get("partial_json").Str
			case "compaction_delta":
				blocks[i]["content"], blocks[i]["encrypted_content"] = d.Get("content").Str, d.Get("encrypted_content").Str
			}
		case "content_block_stop":
			if p, ok := partial[i]; ok {
				blocks[i]["input"] = json.RawMessage(p)
			}
		}
	}
	for _, b := range blocks {
		r, _ := json.Marshal(b)
		out = append(out, string(r))
	}
	return out
}

// A Claude-style tool loop through the real binary: ctxpress compacts;
// then requests ask the server to compact (a compact_20260112 edit) and
// ctxpress does not, though they are over its trigger, until the server
// does (they go as the turns before went, ctxpress's summary kept); the client keeps the compaction block and goes on without the
// edit until ctxpress compacts again, then more turns. Nothing is
// refused, every later request carries the block's message byte for byte,
// the summary call after it holds nothing from before it, the summary is
// in system, and the admin API shows the server's compaction apart from
// the turn's input.
func TestBinaryClaudeServerCompaction(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := ctxpressBinary(t)
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			up := newMsgFake(t)
			p := runBinary(t, bin, up.URL+"/v1", binaryCompaction)
			session := fmt.Sprintf("claude-server-compaction-%v", stream)
			a := newMsgAgent(t, p.url, session)
			for turn := 1; turn <= 40 && !a.compacted(); turn++ {
				a.turn(stream)
			}
			if !a.compacted() {
				t.Fatal("ctxpress never compacted before the server")
			}
			a.turn(stream)

			// The client asks the server to compact past 5,000 tokens.
			a.manage = `{"edits":[{"type":"compact_20260112","trigger":{"type":"input_tokens","value":5000}}]}`
			a.phase = "p2"
			before := len(up.turns())
			var block string
			for turn := 1; turn <= 40 && block == ""; turn++ {
				a.lastCompactRequest = nil
				blocks := a.turn(stream)
				a.lastCompactRequest = a.body
				for _, b := range blocks {
					if gjson.Get(b, "type").Str == "compaction" {
						block = b
					}
				}
				if a.compacted() {
					t.Fatal("ctxpress compacted a request that asks the server to compact")
				}
			}
			if block == "" {
				t.Fatal("the server never compacted")
			}
			got := up.turns()
			overTrigger := 0
			for _, g := range got[before:] {
				if g.summary {
					t.Fatal("ctxpress made a summary call while the client asked the server to compact")
				}
				if n, _ := up.msgInput(g.body); n > 4000 {
					overTrigger++
				}
			}
			if overTrigger == 0 {
				t.Error("no request with the compact edit was over ctxpress's trigger: the test proves little")
			}
			serverTurn := len(got) - 1
			// It went as the turns before it went: ctxpress's summary kept.
			sent, client := gjson.GetBytes(got[serverTurn].body, "messages").Array(), gjson.GetBytes(a.lastCompactRequest, "messages").Array()
			if len(sent) >= len(client) || !strings.Contains(gjson.GetBytes(got[serverTurn].body, "system").Raw, "<conversation_summary>") {
				t.Errorf("the request the server compacted went with %d messages of the client's %d, without ctxpress's summary", len(sent), len(client))
			}
			blockMessage := a.msgs[len(a.msgs)-2] // the answer that holds it; the tool results after it
			a.manage = ""
			a.phase = "p3"
			compactedAfter := false
			for turn := 1; turn <= 40 && !compactedAfter; turn++ {
				a.turn(stream)
				compactedAfter = a.compacted()
			}
			if !compactedAfter {
				t.Fatal("ctxpress never compacted after the server")
			}
			for range 3 {
				a.turn(stream)
			}

			summaries := 0
			got = up.turns()
			for i, g := range got {
				if g.status != http.StatusOK {
					t.Errorf("request %d refused: %d %s", i, g.status, g.refusal)
				}
				if i <= serverTurn {
					continue
				}
				if g.summary {
					summaries++
					// What the summariser reads: from the block on, when
					// the call carries it (the provider reads no further
					// back), else all of it.
					read := string(g.body)
					if at := strings.LastIndex(read, block); at >= 0 {
						read = read[at:]
					}
					for n := 1; n <= a.blockCalls; n++ {
						for _, ph := range []string{"p1", "p2"} {
							if m := fmt.Sprintf("%s/out%03d", ph, n); strings.Contains(read, m) {
								t.Errorf("the summary call after the server's compaction reads %s, from before it", m)
							}
						}
					}
					continue
				}
				if !strings.Contains(string(g.body), blockMessage) {
					t.Errorf("request %d does not carry the compaction block's message byte for byte", i)
				}
			}
			last := got[len(got)-1].body
			if summaries == 0 || !strings.Contains(gjson.GetBytes(last, "system").Raw, "<conversation_summary>") {
				t.Fatalf("%d summary calls after the server's compaction; the last request's system: %.300s", summaries, gjson.GetBytes(last, "system").Raw)
			}

			// The admin API shows the server's compaction apart.
			var show struct {
				Data []struct {
					ServerCompactionUsage struct {
						Calls        int64 `json:"calls"`
						InputTokens  int64 `json:"input_tokens"`
						OutputTokens int64 `json:"output_tokens"`
					} `json:"server_compaction_usage"`
					Turns []struct {
						InputTokens                  int `json:"input_tokens"`
						ServerCompactionInputTokens  int `json:"server_compaction_input_tokens"`
						ServerCompactionOutputTokens int `json:"server_compaction_output_tokens"`
					} `json:"turns"`
				} `json:"data"`
			}
			waitForJSON(t, p.url+"/ctxpress/conversations/"+session, &show, func() bool {
				return len(show.Data) == 1 && show.Data[0].ServerCompactionUsage.Calls == 1
			})
			compaction, _ := up.msgInput(got[serverTurn].body)
			sc := show.Data[0].ServerCompactionUsage
			if sc.InputTokens != int64(compaction) || sc.OutputTokens != serverCompactionOutput {
				t.Errorf("server_compaction_usage %+v, want %d in, %d out", sc, compaction, serverCompactionOutput)
			}
			found := 0
			for _, tu := range show.Data[0].Turns {
				if tu.ServerCompactionInputTokens != 0 {
					found++
					if tu.ServerCompactionInputTokens != compaction || tu.ServerCompactionOutputTokens != serverCompactionOutput || tu.InputTokens != 150 {
						t.Errorf("the server-compacted turn shows %+v; want input 150, server compaction %d in, %d out", tu, compaction, serverCompactionOutput)
					}
				}
			}
			if found != 1 {
				t.Errorf("%d turns show a server compaction, want 1", found)
			}
			p.checkLog(t, a.sent, nil)
		})
	}
}

// A Claude-style tool loop whose history holds the server's compaction,
// through the real binary, refused as too long by an upstream whose window
// ctxpress was not told (Anthropic's "prompt is too long"): ctxpress
// rescues the turn (compacts or cuts what follows the compaction block),
// the client gets the answer, the block's message goes byte for byte, and
// the turns after are answered too.
func TestBinaryRescuesAfterServerCompaction(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := ctxpressBinary(t)
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			up := newMsgFake(t)
			p := runBinary(t, bin, up.URL+"/v1", "compaction:\n  enabled: true\n  threshold_tokens: 1000000\n  precompact: false\n")
			a := newMsgAgent(t, p.url, fmt.Sprintf("claude-rescue-%v", stream))
			a.manage = `{"edits":[{"type":"compact_20260112","trigger":{"type":"input_tokens","value":3000}}]}`
			var block string
			for turn := 1; turn <= 40 && block == ""; turn++ {
				for _, b := range a.turn(stream) {
					if gjson.Get(b, "type").Str == "compaction" {
						block = b
					}
				}
			}
			if block == "" {
				t.Fatal("the server never compacted")
			}
			blockMessage := a.msgs[len(a.msgs)-2]
			a.manage = ""
			for range 8 {
				a.turn(stream)
			}
			got := up.turns()
			up.mu.Lock()
			up.window = got[len(got)-1].input
			up.mu.Unlock()
			a.turn(stream) // refused once, rescued
			for range 3 {
				a.turn(stream)
			}
			refused, summaries := 0, 0
			for _, g := range up.turns()[len(got):] {
				switch {
				case g.status != http.StatusOK:
					refused++
				case g.summary:
					summaries++
				case !strings.Contains(string(g.body), blockMessage):
					t.Fatal("a request after the rescue does not carry the compaction block's message byte for byte")
				}
			}
			if refused != 1 {
				t.Fatalf("%d refusals, want the one rescued", refused)
			}
			t.Logf("rescued with %d summary calls", summaries)
		})
	}
}
