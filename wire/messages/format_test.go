package messages

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/messagestest"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

func count(s string) int { return len(strings.Fields(s)) + 1 }

func capture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "internal", "messagestest", "testdata", "claude-code-2.1.332-"+name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// accepted asks the strict validator whether the API would take body.
func accepted(t *testing.T, body []byte) {
	t.Helper()
	if _, err := messagestest.Check(body, messagestest.Options{}); err != nil {
		t.Fatalf("refused: %v\n%s", err, body)
	}
}

const marker = `"cache_control":{"type":"ephemeral"}`

// every holds one of each block type, system as blocks, tool_result
// content as a string and as blocks, and fields ctxpress does not know.
var every = `{"model":"claude-opus-5-5","max_tokens":64,"metadata":{"user_id":"u","x_vendor":{"b":1,"a":[true,null]}},` +
	`"system":[{"type":"text","text":"You are an agent."},{"type":"text","text":"Be careful.",` + marker + `}],` +
	`"messages":[` +
	`{"role":"user","content":"list the files"},` +
	`{"role":"system","content":"# Environment\nlinux"},` +
	`{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"c2ln"},{"type":"redacted_thinking","data":"ZGF0YQ=="},` +
	`{"type":"text","text":"Running two."},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls","description":"List"}},` +
	`{"type":"tool_use","id":"toolu_2","name":"Read","input":{"file_path":"/r/a.py"}}]},` +
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a.py\nb.py","is_error":false},` +
	`{"tool_use_id":"toolu_2","type":"tool_result","content":[{"type":"text","text":"1\tdef add():"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}],"is_error":true,` + marker + `}]},` +
	`{"role":"assistant","content":[{"type":"text","text":"Done."}]},` +
	`{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"notes"}},{"type":"text","text":"and now?","x_extra":1}]}` +
	`],"stream":true}`

func TestFormatReadsEveryBlock(t *testing.T) {
	body := []byte(every)
	accepted(t, body)
	c, ok := Format{}.Parse(body)
	if !ok || c.Model != "claude-opus-5-5" || !c.Stream || c.Lead != 0 || !c.SystemSlot || len(c.Counted) != 1 {
		t.Fatalf("conversation: ok %v %+v", ok, c)
	}
	type item struct {
		kind         wire.Kind
		call, tool   string
		text, args   string
		contentShape byte // first byte of the content: " or [; 0 when none
	}
	want := [][]item{
		{{kind: wire.KindUser, text: "list the files", contentShape: '"'}},
		{{kind: wire.KindInstruction, text: "# Environment\nlinux", contentShape: '"'}},
		{{kind: wire.KindOpaque}, {kind: wire.KindOpaque}, {kind: wire.KindAssistant, text: "Running two.", contentShape: '"'},
			{kind: wire.KindToolCall, call: "toolu_1", tool: "Bash", args: `{"command":"ls","description":"List"}`},
			{kind: wire.KindToolCall, call: "toolu_2", tool: "Read", args: `{"file_path":"/r/a.py"}`}},
		{{kind: wire.KindToolResult, call: "toolu_1", text: "a.py\nb.py", contentShape: '"'},
			{kind: wire.KindToolResult, call: "toolu_2", text: "1\tdef add():", contentShape: '['}},
		{{kind: wire.KindAssistant, text: "Done.", contentShape: '"'}},
		{{kind: wire.KindOpaque}, {kind: wire.KindUser, text: "and now?", contentShape: '"'}},
	}
	roles := []wire.Role{wire.RoleUser, wire.RoleInstruction, wire.RoleAssistant, wire.RoleTool, wire.RoleAssistant, wire.RoleUser}
	msgs := gjson.GetBytes(body, "messages").Array()
	if len(c.Messages) != len(want) {
		t.Fatalf("%d messages", len(c.Messages))
	}
	f := Format{}
	for m, items := range want {
		msg := c.Messages[m]
		if string(c.Bytes(m)) != msgs[m].Raw || msg.Role != roles[m] || !msg.Object {
			t.Fatalf("message %d: %+v", m, msg)
		}
		got := c.ItemsOf(m)
		if len(got) != len(items) {
			t.Fatalf("message %d: %d items, want %d", m, len(got), len(items))
		}
		for k, w := range items {
			it := got[k]
			i := msg.Items.Start + k
			var shape byte
			if it.Content.Exists() {
				shape = body[it.Content.Start]
			}
			g := item{kind: it.Kind, call: it.CallID, tool: it.Tool, contentShape: shape}
			if it.Content.Exists() {
				g.text = f.Text(c, i)
			}
			if it.Kind == wire.KindToolCall {
				g.args = f.Arguments(c, i)
			}
			if g != w {
				t.Errorf("message %d item %d: %+v, want %+v", m, k, g, w)
			}
		}
	}
	if got := string(f.CanonicalArguments(c, 5)); got != `{"command":"ls","description":"List"}` {
		t.Errorf("canonical arguments %s", got)
	}
	if c.Result(3) != c.Messages[3].Items.Start {
		t.Error("Result")
	}
}

func TestFormatReadsClaudeCode(t *testing.T) {
	for _, name := range []string{"turn1", "turn6", "persisted-output"} {
		t.Run(name, func(t *testing.T) {
			body := capture(t, name)
			c, ok := Format{}.Parse(body)
			if !ok || c.SessionID == "" || c.Lead != 0 || len(c.Counted) != 2 {
				t.Fatalf("ok %v session %q lead %d", ok, c.SessionID, c.Lead)
			}
			if c.Messages[0].Role != wire.RoleUser || c.Messages[1].Role != wire.RoleInstruction {
				t.Fatalf("opening roles %v %v", c.Messages[0].Role, c.Messages[1].Role)
			}
			calls := map[string]bool{}
			for i, it := range c.Items {
				switch it.Kind {
				case wire.KindToolCall:
					calls[it.CallID] = true
				case wire.KindToolResult:
					m := c.Messages[it.Message]
					if !calls[it.CallID] || m.Role != wire.RoleTool || m.WireRole != "tool" || (Format{}).Text(c, i) == "" {
						t.Errorf("result %d: %+v", i, it)
					}
				}
			}
			if name != "turn1" && len(calls) == 0 {
				t.Error("no calls")
			}
			// The counted request is in the range of its bytes.
			n := Format{}.Overhead(c, 0, count)
			if n <= tokensPerMessage {
				t.Errorf("overhead %d", n)
			}
		})
	}
}

func TestFormatDigest(t *testing.T) {
	digest := func(body string) [32]byte {
		c, ok := Format{}.Parse([]byte(`{"model":"m","messages":[` + body + `]}`))
		if !ok {
			t.Fatalf("not parsed: %s", body)
		}
		return Format{}.Digest(c, 0)
	}
	for _, tc := range []struct {
		name string
		a, b string
		same bool
	}{
		{"a string content is its one text block",
			`{"role":"system","content":"# Env"}`, `{"role":"system","content":[{"type":"text","text":"# Env",` + marker + `}]}`, true},
		{"a tool_result's string content is its one text block",
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}`,
			`{"content":[{"tool_use_id":"t","type":"tool_result","content":[{"type":"text","text":"ok"}],` + marker + `}],"role":"user"}`, true},
		{"a marker moved to the newest block",
			`{"role":"user","content":[{"type":"text","text":"a",` + marker + `},{"type":"text","text":"b"}]}`,
			`{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b",` + marker + `}]}`, true},
		{"an edited text", `{"role":"user","content":"a"}`, `{"role":"user","content":"b"}`, false},
		{"is_error kept", `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x","is_error":true}]}`, false},
		{"two text blocks are not one string", `{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`,
			`{"role":"user","content":"a\nb"}`, false},
		{"a thinking signature", `{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"a"}]}`,
			`{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"b"}]}`, false},
	} {
		if got := digest(tc.a) == digest(tc.b); got != tc.same {
			t.Errorf("%s: same %v, want %v", tc.name, got, tc.same)
		}
	}
}

// edited parses body, applies the edits e makes of it, checks the API
// takes the result and returns it.
func edited(t *testing.T, body []byte, e func(c *wire.Conversation) []wire.Edit) []byte {
	t.Helper()
	c, ok := Format{}.Parse(body)
	if !ok {
		t.Fatal("not parsed")
	}
	out := wire.Splice(body, e(c))
	accepted(t, out)
	return out
}

func TestFormatReplaceContentKeepsEveryOtherByte(t *testing.T) {
	body := []byte(every)
	f := Format{}
	for _, tc := range []struct {
		name string
		item func(c *wire.Conversation) int
		want string // the block or message as it becomes
	}{
		{"a string tool_result content stays a string", func(c *wire.Conversation) int { return c.Messages[3].Items.Start },
			`{"type":"tool_result","tool_use_id":"toolu_1","content":"[gone]","is_error":false}`},
		{"a block list becomes one text block and keeps is_error and its marker", func(c *wire.Conversation) int { return c.Messages[3].Items.Start + 1 },
			`{"tool_use_id":"toolu_2","type":"tool_result","content":[{"type":"text","text":"[gone]"}],"is_error":true,` + marker + `}`},
		{"a text block's text, its unknown field kept", func(c *wire.Conversation) int { return c.Messages[5].Items.Start + 1 },
			`{"type":"text","text":"[gone]","x_extra":1}`},
		{"a string message content", func(c *wire.Conversation) int { return c.Messages[0].Items.Start },
			`{"role":"user","content":"[gone]"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var span wire.Span
			out := edited(t, body, func(c *wire.Conversation) []wire.Edit {
				it := tc.item(c)
				span = c.Items[it].Span
				if c.Items[it].Span == c.Items[it].Content {
					span = c.Messages[c.Items[it].Message].Span
				}
				return []wire.Edit{f.ReplaceContent(c, it, "[gone]")}
			})
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("got %s", out)
			}
			if before, after := string(body[:span.Start]), string(out[:span.Start]); before != after {
				t.Fatal("bytes before the edit changed")
			}
			if before, after := string(body[span.End:]), string(out[len(out)-(len(body)-span.End):]); before != after {
				t.Fatal("bytes after the edit changed")
			}
		})
	}
	// A nested marker is carried over to the one block, never added.
	nested := []byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"go"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"a",` + marker + `},{"type":"text","text":"b"}]}]}]}`)
	out := edited(t, nested, func(c *wire.Conversation) []wire.Edit {
		return []wire.Edit{f.ReplaceContent(c, c.Messages[2].Items.Start, "[gone]")}
	})
	if strings.Count(string(out), "cache_control") != 1 || !strings.Contains(string(out), `"content":[{"type":"text","text":"[gone]",`+marker+`}]`) {
		t.Fatalf("nested marker: %s", out)
	}
}

func TestFormatAddInstructionsEndsTheTopLevelSystem(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, body, want string
	}{
		{"blocks get one text block per text, after the client's marker",
			`{"model":"m","max_tokens":1,"system":[{"type":"text","text":"A",` + marker + `}],` + msgs + `}`,
			`{"model":"m","max_tokens":1,"system":[{"type":"text","text":"A",` + marker + `},{"type":"text","text":"one"},{"type":"text","text":"two"}],` + msgs + `}`},
		{"a string gets the texts appended",
			`{"model":"m","max_tokens":1,"system":"A",` + msgs + `}`,
			`{"model":"m","max_tokens":1,"system":"A\n\none\n\ntwo",` + msgs + `}`},
		{"no system gets one",
			`{"model":"m","max_tokens":1,` + msgs + `}`,
			`{"system":"one\n\ntwo","model":"m","max_tokens":1,` + msgs + `}`},
		{"an empty one is set", `{"model":"m","max_tokens":1,"system":[],` + msgs + `}`,
			`{"model":"m","max_tokens":1,"system":"one\n\ntwo",` + msgs + `}`},
		{"a null one is set", `{"model":"m","max_tokens":1,"system":null,` + msgs + `}`,
			`{"model":"m","max_tokens":1,"system":"one\n\ntwo",` + msgs + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Counting bytes: the tokens added are what counting the
			// system as Counted has it (its raw JSON) adds.
			bytesCount := func(s string) int { return len(s) }
			var tokens int
			in := []byte(tc.body)
			out := edited(t, in, func(c *wire.Conversation) []wire.Edit {
				ed, msg, n := Format{}.AddInstructions(c, []string{"one", "two"}, bytesCount, nil, true)
				if ed == nil || msg != nil {
					t.Fatalf("edit %v, message %s", ed, msg)
				}
				if _, _, m := (Format{}).AddInstructions(c, []string{"one", "two"}, bytesCount, nil, false); m != n {
					t.Fatalf("tokens %d built, %d counted", n, m)
				}
				tokens = n
				return []wire.Edit{*ed}
			})
			counted := func(b []byte) int {
				if s := gjson.GetBytes(b, "system"); s.Exists() {
					return len(s.Raw)
				}
				return 0
			}
			if string(out) != tc.want || tokens != counted(out)-counted(in) {
				t.Fatalf("got  %s\nwant %s (%d tokens, counted %d)", out, tc.want, tokens, counted(out)-counted(in))
			}
		})
	}
}

func TestFormatMessageEdits(t *testing.T) {
	body := []byte(every)
	f := Format{}
	prepend := func(m int) func(c *wire.Conversation) []wire.Edit {
		return func(c *wire.Conversation) []wire.Edit {
			e, n, ok := f.PrependText(c, m, "<conversation_summary>s</conversation_summary>", count)
			if !ok || n <= 0 {
				t.Fatalf("message %d: no prepend", m)
			}
			at := c.Messages[m].Start
			return []wire.Edit{{Start: at + e.Start, End: at + e.End, Repl: e.Repl}}
		}
	}
	out := edited(t, body, prepend(0))
	if got := gjson.GetBytes(out, "messages.0.content").String(); got != "<conversation_summary>s</conversation_summary>\n\nlist the files" {
		t.Fatalf("string: %q", got)
	}
	out = edited(t, body, prepend(5))
	if got := gjson.GetBytes(out, "messages.5.content.0.text").String(); got != "<conversation_summary>s</conversation_summary>" ||
		gjson.GetBytes(out, "messages.5.content.1.type").String() != "document" {
		t.Fatalf("blocks: %s", gjson.GetBytes(out, "messages.5").Raw)
	}
	c, _ := f.Parse(body)
	for _, m := range []int{1, 2, 3} {
		if _, _, ok := f.PrependText(c, m, "x", count); ok {
			t.Errorf("prepended to message %d (role %v)", m, c.Messages[m].Role)
		}
	}

	// The opening kept, the tool round and the answer replaced by one
	// assistant message: whole messages, so no tool_use loses its result.
	out = edited(t, body, func(c *wire.Conversation) []wire.Edit {
		a, _ := f.NewMessage(wire.RoleAssistant, "ok", count)
		e, ok := f.ReplaceMessages(c, 2, 5, [][]byte{a})
		if !ok {
			t.Fatal("no edit")
		}
		return []wire.Edit{e}
	})
	if n := len(gjson.GetBytes(out, "messages").Array()); n != 4 || strings.Contains(string(out), "toolu_1") {
		t.Fatalf("%d messages: %s", n, out)
	}
	out = edited(t, body, func(c *wire.Conversation) []wire.Edit { return []wire.Edit{f.DropMessages(c, 4, 6)} })
	if n := len(gjson.GetBytes(out, "messages").Array()); n != 4 || !strings.HasSuffix(string(out), `"is_error":true,`+marker+`}]}],"stream":true}`) {
		t.Fatalf("dropped: %s", out)
	}
	empty := []byte(`{"model":"m","max_tokens":1,"messages":[ ]}`)
	ce, _ := f.Parse(empty)
	u, _ := f.NewMessage(wire.RoleUser, "hi", count)
	if e, ok := f.ReplaceMessages(ce, 0, 0, [][]byte{u}); !ok || string(wire.Splice(empty, []wire.Edit{e})) != `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"} ]}` {
		t.Fatalf("into an empty array: %s", wire.Splice(empty, []wire.Edit{e}))
	}
}

func TestFormatParseRefuses(t *testing.T) {
	for _, body := range []string{`{"model":"m"}`, `{"model":"m","messages":"hi"}`, `[]`, `"x"`} {
		if _, ok := (Format{}).Parse([]byte(body)); ok {
			t.Errorf("Parse(%s) ok", body)
		}
	}
	// Not an object: no items, counted as its raw text.
	c, ok := Format{}.Parse([]byte(`{"model":"m","messages":[42,{"role":"critic","content":"x"}]}`))
	if !ok || c.Messages[0].Object || c.Messages[1].Role != wire.RoleOther || c.Items[0].Kind != wire.KindOpaque {
		t.Fatalf("%+v", c)
	}
}
