package messages

import (
	"testing"

	"github.com/ctxpress/ctxpress/wire"
)

const (
	think  = `{"type":"thinking","thinking":"plan","signature":"c2ln"}`
	redact = `{"type":"redacted_thinking","data":"ZGF0YQ=="}`
	say    = `{"type":"text","text":"Running."}`
	useLs  = `{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}`
)

func TestFormatLeavesThinkingOut(t *testing.T) {
	for _, tc := range []struct {
		name, content, want string
		ok                  bool
	}{
		{"thinking first goes with the comma after it", think + "," + say + "," + useLs, say + "," + useLs, true},
		{"a run of thinking and redacted thinking", think + "," + redact + "," + say, say, true},
		{"thinking between blocks goes with the comma before it", say + "," + think + "," + useLs, say + "," + useLs, true},
		{"two runs", think + "," + say + " , " + redact + "," + useLs, say + "," + useLs, true},
		{"no thinking: nothing to do", say + "," + useLs, "", false},
		{"only thinking: the message may not be emptied", think + "," + redact, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := `{"role":"assistant","content":[` + tc.content + `]}`
			body := []byte(`{"model":"m","messages":[{"role":"user","content":"go"},` + msg + `]}`)
			c, _ := Format{}.Parse(body)
			eds, tokens, ok := Format{}.LeaveOut(c, 1, count)
			if ok != tc.ok {
				t.Fatalf("ok %v", ok)
			}
			if !ok {
				return
			}
			got := string(wire.Splice(c.Bytes(1), eds))
			if got != `{"role":"assistant","content":[`+tc.want+`]}` || tokens != count("plan") {
				t.Fatalf("got %s, %d tokens", got, tokens)
			}
		})
	}
}

func TestFormatAsksToDropMismatchedThinking(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"go"}]`
	for _, tc := range []struct {
		name, thinking, want string
		valid                bool // a request the API takes (an empty thinking object has no type)
	}{
		{"Claude Code's thinking gets a block_binding", `{"type":"adaptive","display":"omitted"}`,
			`{"type":"adaptive","display":"omitted","block_binding":{"prefix_mismatch_behavior":"drop_block"}}`, true},
		{"an empty object", `{ }`, `{ "block_binding":{"prefix_mismatch_behavior":"drop_block"}}`, false},
		{"a block_binding without the behaviour", `{"type":"enabled","budget_tokens":2048,"block_binding":{}}`,
			`{"type":"enabled","budget_tokens":2048,"block_binding":{"prefix_mismatch_behavior":"drop_block"}}`, true},
		{"the behaviour error is replaced", `{"type":"adaptive","block_binding":{"prefix_mismatch_behavior":"error","x":1}}`,
			`{"type":"adaptive","block_binding":{"prefix_mismatch_behavior":"drop_block","x":1}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(`{"model":"m","max_tokens":1,"thinking":` + tc.thinking + `,` + msgs + `}`)
			c, _ := Format{}.Parse(body)
			ed, ok := Format{}.DropMismatched(c)
			if !ok {
				t.Fatal("no edit")
			}
			out := wire.Splice(body, []wire.Edit{ed})
			if want := `{"model":"m","max_tokens":1,"thinking":` + tc.want + `,` + msgs + `}`; string(out) != want {
				t.Fatalf("got  %s\nwant %s", out, want)
			}
			if tc.valid {
				accepted(t, out)
			}
			c2, _ := Format{}.Parse(out)
			if _, again := (Format{}).DropMismatched(c2); again {
				t.Fatal("asked twice")
			}
		})
	}
	for _, body := range []string{`{"model":"m",` + msgs + `}`, `{"model":"m","thinking":null,` + msgs + `}`} {
		c, _ := Format{}.Parse([]byte(body))
		if _, ok := (Format{}).DropMismatched(c); ok {
			t.Errorf("%s: an edit without a thinking object", body)
		}
	}
}

func TestFormatMarksThinkingBound(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		bound      bool
	}{
		{"thinking asked for", `{"model":"m","thinking":{"type":"adaptive"},"messages":[{"role":"user","content":"go"}]}`, true},
		{"thinking blocks in the history", `{"model":"m","messages":[{"role":"user","content":"go"},{"role":"assistant","content":[` + think + `,` + say + `]}]}`, true},
		{"thinking disabled, none sent", `{"model":"m","thinking":{"type":"disabled"},"messages":[{"role":"user","content":"go"}]}`, false},
		{"no thinking", `{"model":"m","messages":[{"role":"user","content":"go"}]}`, false},
	} {
		c, _ := Format{}.Parse([]byte(tc.body))
		if c.Bound != tc.bound {
			t.Errorf("%s: bound %v", tc.name, c.Bound)
		}
	}
	c, _ := Format{}.Parse([]byte(`{"model":"m","messages":[{"role":"user","content":"go"},{"role":"assistant","content":[` + think + `,` + redact + `,` + say + `]}]}`))
	if it := c.ItemsOf(1); !it[0].Bound || !it[1].Bound || it[2].Bound || it[0].Kind != wire.KindOpaque {
		t.Fatalf("%+v", it)
	}
}
