package responses

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/responsestest"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

func count(s string) int { return len(strings.Fields(s)) + 1 }

func TestFormatReadsCodexAsANeutralConversation(t *testing.T) {
	body := fixture(t, "codex171-exec-loop.json")
	c, ok := Format{}.Parse(body)
	if !ok {
		t.Fatal("not parsed")
	}
	items := gjson.GetBytes(body, "input").Array()
	// 4 messages, then 5 × (reasoning + call, output): the reasoning item
	// travels with its call.
	if len(c.Messages) != 4+2*5 || len(c.Items) != len(items) || c.Lead != 2 {
		t.Fatalf("%d messages, %d items (want %d), lead %d", len(c.Messages), len(c.Items), len(items), c.Lead)
	}
	for m := 4; m < len(c.Messages); m += 2 {
		call, out := c.Messages[m], c.Messages[m+1]
		if call.Role != wire.RoleAssistant || call.Items.End-call.Items.Start != 2 ||
			c.Items[call.Items.Start].Kind != wire.KindOpaque || c.Items[call.Items.Start+1].Kind != wire.KindToolCall {
			t.Fatalf("message %d: %+v", m, call)
		}
		res := c.Items[out.Items.Start]
		if out.Role != wire.RoleTool || res.Kind != wire.KindToolResult || res.CallID != c.Items[call.Items.Start+1].CallID {
			t.Fatalf("message %d: %+v", m+1, res)
		}
		if txt := (Format{}).Text(c, out.Items.Start); !strings.HasPrefix(txt, "Chunk ID: ") {
			t.Fatalf("output text %q", txt)
		}
		if a := (Format{}).Arguments(c, call.Items.Start+1); !strings.Contains(a, `"cmd"`) {
			t.Fatalf("arguments %q", a)
		}
	}
	if !c.CacheKey.Exists() || !c.Stream || c.Model != "m" {
		t.Fatalf("conversation: %+v", c)
	}
}

// check asks the strict validator whether the upstream would take body,
// as rewritten from the client's.
func check(t *testing.T, client, body []byte) {
	t.Helper()
	if _, err := responsestest.Check(body, responsestest.Options{Client: client}); err != nil {
		t.Fatalf("refused: %s\n%s", err.Message, body)
	}
}

func TestFormatEditsKeepTheRequestValid(t *testing.T) {
	body := fixture(t, "codex171-exec-loop.json")
	f := Format{}
	c, _ := f.Parse(body)
	out := c.Messages[5].Items.Start // the first output
	squashed := wire.Splice(body, []wire.Edit{f.ReplaceContent(c, out, "[lines 3-40 omitted]")})
	check(t, body, squashed)
	if got := gjson.GetBytes(squashed, "input.6.output").String(); got != "[lines 3-40 omitted]" {
		t.Fatalf("output now %q", got)
	}

	// A summary replaces the first three tool exchanges: whole messages,
	// so no reasoning item loses its call and no call its output.
	summary, _ := f.NewMessage(wire.RoleUser, "<conversation_summary>…</conversation_summary>", count)
	ed, ok := f.ReplaceMessages(c, 4, 10, [][]byte{summary})
	if !ok {
		t.Fatal("no edit")
	}
	compacted := wire.Splice(body, []wire.Edit{ed})
	check(t, body, compacted)
	cc, ok := f.Parse(compacted)
	if !ok || len(cc.Messages) != len(c.Messages)-6+1 || strings.Contains(string(compacted), `"id":"fc_0001"`) {
		t.Fatalf("after the summary: %d messages", len(cc.Messages))
	}
	if strings.Contains(string(summary), `"id"`) {
		t.Fatalf("ctxpress's message invents an id: %s", summary)
	}

	_, msg, _ := f.AddInstructions(c, []string{"rules"}, count, nil, true)
	withRule, _ := f.ReplaceMessages(c, c.Lead, c.Lead, [][]byte{msg})
	check(t, body, wire.Splice(body, []wire.Edit{withRule}))

	ask := 3 // the user's ask
	pe, _, ok := f.PrependText(c, ask, "<conversation_summary>s</conversation_summary>", count)
	if !ok {
		t.Fatal("no prepend")
	}
	pe.Start += c.Messages[ask].Start
	pe.End += c.Messages[ask].Start
	merged := wire.Splice(body, []wire.Edit{pe})
	check(t, body, merged)
	if got := gjson.GetBytes(merged, "input.3.content.0.text").String(); got != "<conversation_summary>s</conversation_summary>" {
		t.Fatalf("prepended %q", got)
	}
}

func TestFormatDigestIgnoresKeyOrder(t *testing.T) {
	a := []byte(`{"model":"m","input":[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"e"},{"type":"function_call","call_id":"c","name":"x","arguments":"{}"}]}`)
	b := []byte(`{"model":"m","input":[{"id":"rs_1","type":"reasoning","encrypted_content":"e","summary":[]},{"name":"x","type":"function_call","call_id":"c","arguments":"{}"}]}`)
	ca, _ := (Format{}).Parse(a)
	cb, _ := (Format{}).Parse(b)
	if f := (Format{}); len(ca.Messages) != 1 || f.Digest(ca, 0) != f.Digest(cb, 0) {
		t.Fatal("re-serialised items hash differently")
	}
}

// A request that continues a stored response or a conversation the
// provider keeps says so: the core must not compact what it cannot see.
func TestFormatMarksHistoryTheProviderKeeps(t *testing.T) {
	for body, want := range map[string]bool{
		`{"model":"m","input":[{"role":"user","content":"hi"}]}`:                                  false,
		`{"model":"m","previous_response_id":null,"input":[{"role":"user","content":"hi"}]}`:      false,
		`{"model":"m","previous_response_id":"resp_1","input":[{"role":"user","content":"hi"}]}`:  true,
		`{"model":"m","conversation":"conv_1","input":[{"role":"user","content":"hi"}]}`:          true,
		`{"model":"m","conversation":{"id":"conv_1"},"input":[{"role":"user","content":"hi"}]}`:   true,
		`{"model":"m","previous_response_id":"resp_1","input":"plain text continues it as well"}`: true,
	} {
		c, ok := Format{}.Parse([]byte(body))
		if !ok || c.ServerHistory != want {
			t.Errorf("%s: ok %v, server history %v", body, ok, c.ServerHistory)
		}
	}
}

// A parse continued from the end of a reasoning item that ended the
// earlier request reads that item again: here an item follows it, and
// the two are one message.
func TestResumeAfterTrailingReasoningRegroupsIt(t *testing.T) {
	user := `{"role":"user","content":"fix it"}`
	reasoning := `{"type":"reasoning","summary":[],"encrypted_content":"gAAA"}`
	call := `{"type":"function_call","call_id":"c1","name":"shell","arguments":"{}"}`
	prevBody := []byte(`{"model":"m","input":[` + user + `,` + reasoning + `]}`)
	body := []byte(`{"model":"m","input":[` + user + `,` + reasoning + `,` + call + `]}`)
	prev, ok := Format{}.Parse(prevBody)
	if !ok || len(prev.Messages) != 2 {
		t.Fatalf("earlier request: %d messages", len(prev.Messages))
	}
	got, ok, taken := Format{}.Resume(body, prev, prev.Messages[1].End)
	want, _ := Format{}.Parse(body)
	if !ok || taken != 1 || !reflect.DeepEqual(got, want) {
		t.Fatalf("resumed (%v, took %d):\n%+v\nparsed:\n%+v", ok, taken, got, want)
	}
}
