package rewrite

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/internal/responsestest"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/messages"
	"github.com/ctxpress/ctxpress/wire/responses"
	"github.com/tidwall/gjson"
)

// bigText is a tool output of about n bytes, distinct per seed.
func bigText(seed string, n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%s line %04d: compiling module pkg%03d ... ok\n", seed, i, i%89)
	}
	return b.String()
}

// responsesBody is a Responses request of items.
func responsesBody(items ...string) []byte {
	return []byte(`{"model":"gpt-5","store":false,"tools":[{"type":"function","name":"exec_command","parameters":{}}],"input":[` + strings.Join(items, ",") + `]}`)
}

func userItem(text string) string {
	return `{"type":"message","role":"user","content":[{"type":"input_text","text":` + jsonString(text) + `}]}`
}

// everyCallKind is an agent loop that uses each call kind the Responses
// API pairs with an output: shell, apply_patch, computer, MCP approval,
// function (two in parallel), custom and local shell calls; big outputs
// where the kind's output is text.
func everyCallKind() []string {
	out := func(s string) string { return jsonString(bigText(s, 3000)) }
	return []string{
		`{"type":"message","role":"developer","content":"You are a coding agent."}`,
		userItem("Fix the leap-year bug in dateparse."),
		`{"type":"shell_call","id":"shc_1","call_id":"sh_1","action":{"commands":["go test ./..."]},"status":"completed"}`,
		`{"type":"shell_call_output","call_id":"sh_1","output":[{"stdout":` + out("go test") + `,"stderr":"","outcome":{"type":"exit","exit_code":1}}]}`,
		`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"exec_command","arguments":"{\"cmd\":\"sed -n 1,80p parse.go\"}"}`,
		`{"type":"function_call","id":"fc_2","call_id":"call_2","name":"exec_command","arguments":"{\"cmd\":\"go vet ./...\"}"}`,
		`{"type":"function_call_output","call_id":"call_1","output":` + out("sed") + `}`,
		`{"type":"function_call_output","call_id":"call_2","output":` + out("vet") + `}`,
		`{"type":"apply_patch_call","id":"apc_1","call_id":"ap_1","operation":{"type":"update_file","path":"parse.go","diff":"@@ -1 +1 @@"},"status":"completed"}`,
		`{"type":"apply_patch_call_output","call_id":"ap_1","status":"completed","output":` + out("patch") + `}`,
		userItem("Now check the rendering in the browser."),
		`{"type":"computer_call","id":"cc_1","call_id":"cu_1","action":{"type":"screenshot"},"pending_safety_checks":[],"status":"completed"}`,
		`{"type":"computer_call_output","call_id":"cu_1","output":{"type":"computer_screenshot","image_url":"data:image/png;base64,` + strings.Repeat("QUFB", 500) + `"}}`,
		`{"type":"mcp_approval_request","id":"mcpr_1","name":"deploy","arguments":"{\"env\":\"staging\"}","server_label":"ops"}`,
		`{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true}`,
		`{"type":"custom_tool_call","id":"ctc_1","call_id":"cust_1","name":"apply_patch","input":"*** Begin Patch"}`,
		`{"type":"custom_tool_call_output","call_id":"cust_1","output":` + out("custom") + `}`,
		`{"type":"shell_call","id":"shc_2","call_id":"sh_2","action":{"commands":["git diff"]},"status":"completed"}`,
		`{"type":"shell_call","id":"shc_3","call_id":"sh_3","action":{"commands":["git status"]},"status":"completed"}`,
		`{"type":"shell_call_output","call_id":"sh_2","output":[{"stdout":` + out("diff") + `,"stderr":"","outcome":{"type":"exit","exit_code":0}}]}`,
		`{"type":"shell_call_output","call_id":"sh_3","output":[{"stdout":"clean","stderr":"","outcome":{"type":"exit","exit_code":0}}]}`,
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Fixed."}]}`,
		userItem("Thanks. Anything else?"),
	}
}

// Every cut ctxpress can make in a loop of every call kind — a compaction
// keeping any number of recent messages, a history cap of any size, a cut
// to fit any budget — forwards a request that pairs every call with its
// output as OpenAI checks them: no shell, apply_patch, computer or MCP
// approval pair is split.
func TestCutsNeverSplitAnyCallKind(t *testing.T) {
	body := responsesBody(everyCallKind()...)
	check := func(what string, out []byte) {
		t.Helper()
		if _, err := responsestest.Check(out, responsestest.Options{Client: body}); err != nil {
			t.Fatalf("%s: refused: %s", what, err.Message)
		}
	}
	check("the loop itself", body)
	p := New(Config{Format: responses.Format{}, Squash: &squash.Config{}, Dedup: DefaultDedupConfig()})
	check("squashed and deduped", p.RewriteWith(body, Options{}).Body)
	cuts := everyCut(t, p, body, 100, func(what string, res Result) { check(what, res.Body) })
	if cuts < 4 {
		t.Fatalf("only %d distinct cuts tried", cuts)
	}
}

// A call kind's output that is not text (a shell_call_output's list, a
// computer screenshot) is counted whole and sent as it is; a text output
// (apply_patch) is squashed like a function's.
func TestOutputsOfEveryKindAreCountedAndOnlyTextIsSquashed(t *testing.T) {
	body := responsesBody(everyCallKind()...)
	c, ok := responses.Format{}.Parse(body)
	if !ok {
		t.Fatal("not parsed")
	}
	calls, results := map[string]bool{}, map[string]bool{}
	for _, it := range c.Items {
		switch it.Kind {
		case wire.KindToolCall:
			calls[it.CallID] = true
		case wire.KindToolResult:
			results[it.CallID] = true
			typ := gjson.GetBytes(it.Span.Of(body), "type").Str
			if editable := typ != "shell_call_output" && typ != "computer_call_output" && typ != "mcp_approval_response"; editable != it.Content.Exists() {
				t.Errorf("%s: content span %v", typ, it.Content)
			}
		}
	}
	for _, id := range []string{"sh_1", "sh_2", "sh_3", "call_1", "call_2", "ap_1", "cu_1", "mcpr_1", "cust_1"} {
		if !calls[id] || !results[id] {
			t.Errorf("%s: call %v, output %v", id, calls[id], results[id])
		}
	}
	p := New(Config{Format: responses.Format{}, Squash: &squash.Config{}, Dedup: DefaultDedupConfig()})
	res := p.RewriteWith(body, Options{})
	for _, keep := range []string{`"type":"shell_call_output","call_id":"sh_1","output":[{"stdout":` + jsonString(bigText("go test", 3000)), strings.Repeat("QUFB", 500)} {
		if !strings.Contains(string(res.Body), keep) {
			t.Errorf("changed: %.80s", keep)
		}
	}
	if strings.Contains(string(res.Body), jsonString(bigText("patch", 3000))) {
		t.Error("the apply_patch output was not squashed")
	}
	if res.TokensBefore < len(body)/8 {
		t.Errorf("counted %d tokens of a %d-byte body", res.TokensBefore, len(body))
	}
}

// providerHistory is a Responses history the provider compacted: a long
// stretch before the compaction item, then the turns after it.
func providerHistory(before bool, after ...string) []byte {
	var items []string
	if before {
		items = append(items, `{"type":"message","role":"developer","content":"You are a coding agent."}`, userItem("Start the port."))
		for i := range 6 {
			id := strconv.Itoa(i)
			items = append(items,
				`{"type":"function_call","id":"fc_b`+id+`","call_id":"b`+id+`","name":"exec_command","arguments":"{\"cmd\":\"go build ./pkg`+id+`\"}"}`,
				`{"type":"function_call_output","call_id":"b`+id+`","output":`+jsonString(bigText("before"+id, 6000))+`}`)
		}
	}
	items = append(items, `{"type":"compaction","id":"cmp_1","encrypted_content":"gAAAAB`+strings.Repeat("x9", 400)+`"}`)
	return responsesBody(append(items, after...)...)
}

// turnsAfter is n tool turns and an ask, after a provider compaction.
func turnsAfter(n int) []string {
	items := []string{userItem("Carry on with the port.")}
	for i := range n {
		id := strconv.Itoa(i)
		items = append(items,
			`{"type":"shell_call","id":"shc_a`+id+`","call_id":"a`+id+`","action":{"commands":["go test ./pkg`+id+`"]},"status":"completed"}`,
			`{"type":"shell_call_output","call_id":"a`+id+`","output":[{"stdout":"ok pkg`+id+`","stderr":"","outcome":{"type":"exit","exit_code":0}}]}`,
			`{"type":"function_call","id":"fc_a`+id+`","call_id":"f`+id+`","name":"exec_command","arguments":"{\"cmd\":\"make `+id+`\"}"}`,
			`{"type":"function_call_output","call_id":"f`+id+`","output":`+jsonString(bigText("after"+id, 2000))+`}`)
	}
	return append(items, userItem("And the docs?"))
}

// A provider compaction is a boundary: ctxpress summarises only items
// after it, never cuts or drops across it, sends it and everything before
// it as it sent them before (the Responses API reads the items before a
// compaction item: the user messages /responses/compact keeps, codex's
// initial context), and puts its summary right after it.
func TestProviderCompactionIsABoundary(t *testing.T) {
	p := New(Config{Format: responses.Format{}, Squash: &squash.Config{}, Dedup: DefaultDedupConfig()})
	after := turnsAfter(6)
	body := providerHistory(true, after...)
	res, alone := p.RewriteWith(body, Options{}), p.RewriteWith(providerHistory(false, after...), Options{})
	if res.TokensBefore <= alone.TokensBefore+4*1500 {
		t.Fatalf("counted %d tokens with the items before the compaction, %d without: they are read", res.TokensBefore, alone.TokensBefore)
	}
	items := gjson.GetBytes(body, "input").Array()
	boundary := 0
	for i, it := range items {
		if it.Get("type").Str == "compaction" {
			boundary = i
		}
	}
	sent := gjson.GetBytes(res.Body, "input").Array()[boundary]
	prefix := res.Body[:sent.Index+len(sent.Raw)]
	if sent.Raw != items[boundary].Raw || len(prefix) >= items[boundary].Index {
		t.Fatal("the items before the compaction were not squashed, or the compaction changed: the test proves nothing")
	}
	check := func(what string, out []byte) {
		t.Helper()
		if _, err := responsestest.Check(out, responsestest.Options{}); err != nil {
			t.Fatalf("%s: refused: %s", what, err.Message)
		}
		if !strings.HasPrefix(string(out), string(prefix)) {
			t.Fatalf("%s: the items up to the provider's compaction changed", what)
		}
	}
	check("squashed", res.Body)
	tried := 0
	for keep := 1; keep < res.Messages; keep++ {
		prop, ok := res.Compaction(keep, 0)
		if !ok {
			continue
		}
		tried++
		if prop.From != boundary+1 || prop.Cut <= prop.From {
			t.Fatalf("keep %d: summarises [%d, %d), the compaction is message %d", keep, prop.From, prop.Cut, boundary)
		}
		for _, m := range prop.Messages[prop.From:prop.Cut] {
			if strings.Contains(m.Text, "before") {
				t.Fatalf("keep %d: the summary covers what the provider compacted", keep)
			}
		}
		out := p.RewriteWith(body, Options{Branches: []history.Branch{{Summary: "## Active Task\nPort.", Covered: prop.Covered, Hash: prop.Hash}}})
		if out.Applied != 0 {
			t.Fatalf("keep %d: not applied", keep)
		}
		check("a compaction keeping "+strconv.Itoa(keep), out.Body)
		if next := gjson.GetBytes(out.Body, "input").Array()[boundary+1]; !strings.Contains(next.Raw, "<conversation_summary>") {
			t.Fatalf("keep %d: the item after the provider's compaction is %.100s", keep, next.Raw)
		}
	}
	if tried == 0 {
		t.Fatal("no compaction proposed")
	}
	everyCut(t, p, body, 200, func(what string, res Result) { check(what, res.Body) })
}

// A compaction item is counted by the size of its encrypted content, not
// as text: several times smaller.
func TestCompactionItemIsNotCountedAsText(t *testing.T) {
	p := New(Config{Format: responses.Format{}})
	blob := strings.Repeat("gAAAAB9xYz", 4000)
	with := p.RewriteWith(responsesBody(`{"type":"compaction","encrypted_content":"`+blob+`"}`, userItem("go on")), Options{})
	without := p.RewriteWith(responsesBody(userItem("go on")), Options{})
	item := with.TokensBefore - without.TokensBefore
	if text := p.Counter().Count(O200K, blob); item <= 0 || item*2 > text {
		t.Fatalf("the compaction counts %d tokens; as text it is %d", item, text)
	}
}

// A request that asks the provider to compact it is the client's
// compaction: nothing new is cut to fit or capped, no /compact is taken as
// a command, and the plan never compacts or rescues it; what the earlier
// requests sent stays as they sent it (a summary ctxpress applied), so the
// provider's cache and signed thinking stay valid.
func TestClientCompactionWins(t *testing.T) {
	loop := responsesBody(turnsAfter(4)...)
	triggered := responsesBody(append(turnsAfter(4), `{"type":"compaction_trigger"}`)...)
	edit := `"context_management":{"edits":[{"type":"compact_20260112","trigger":{"type":"input_tokens","value":50000}}]},`
	cases := []struct {
		name        string
		format      wire.Format
		plain, asks []byte
	}{
		{"responses compaction_trigger", responses.Format{}, loop, triggered},
		{"messages compact edit", messages.Format{}, messagesBody(""), messagesBody(edit)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := New(Config{Format: c.format, Dedup: DefaultDedupConfig()})
			plain := p.RewriteWith(c.plain, Options{})
			prop, ok := plain.Compaction(2, 0)
			if !ok || plain.ProviderCompacts {
				t.Fatal("nothing a compaction could cover: the test proves nothing")
			}
			branch := history.Branch{Summary: "## Active Task\nPort.", Covered: prop.Covered, Hash: prop.Hash}
			base := p.RewriteWith(c.asks, Options{})
			if !base.ProviderCompacts {
				t.Fatal("not seen as the client's compaction")
			}
			res := p.RewriteWith(c.asks, Options{FitTokens: base.TokensAfter / 3, ForceCommand: true, Branches: []history.Branch{branch}})
			if res.FitDropped != 0 || res.CompactCommand {
				t.Fatalf("cut to fit %d messages, command %v", res.FitDropped, res.CompactCommand)
			}
			sent := p.RewriteWith(c.plain, Options{Branches: []history.Branch{branch}})
			history := func(b []byte) string {
				if in := gjson.GetBytes(b, "input"); in.Exists() {
					var items []string
					for _, it := range in.Array() {
						if it.Get("type").Str != "compaction_trigger" {
							items = append(items, it.Raw)
						}
					}
					return strings.Join(items, ",")
				}
				return gjson.GetBytes(b, "system").Raw + gjson.GetBytes(b, "messages").Raw
			}
			if res.Applied != 0 || sent.Applied != 0 || history(res.Body) != history(sent.Body) || !strings.Contains(history(res.Body), "conversation_summary") {
				t.Fatalf("the summary sent before is not sent alike (applied %d):\n%.300s\n%.300s", res.Applied, history(res.Body), history(sent.Body))
			}
			pl := planPolicy.PlanTurn(TurnFacts{Model: "gpt-5", Tokens: 1 << 20, Identified: true, ProviderCompacts: true, Refused: true, Manual: true}, time.Now())
			if pl.MayRewrite || pl.Action != ActNone || !errors.Is(pl.Why, ErrProviderCompacts) {
				t.Fatalf("planned %v (may rewrite %v, why %v)", pl.Action, pl.MayRewrite, pl.Why)
			}
		})
	}
}

// messagesBody is a Claude tool loop of a few turns, with extra top-level
// members before messages.
func messagesBody(extra string) []byte {
	var msgs []string
	msgs = append(msgs, `{"role":"user","content":"Port the parser."}`)
	for i := range 4 {
		id := strconv.Itoa(i)
		msgs = append(msgs,
			`{"role":"assistant","content":[{"type":"tool_use","id":"tu_`+id+`","name":"Bash","input":{"command":"cat f`+id+`.go"}}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu_`+id+`","content":`+jsonString(bigText("m"+id, 3000))+`}]}`)
	}
	msgs = append(msgs, `{"role":"assistant","content":"Done."}`, `{"role":"user","content":"Next file."}`)
	return []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,` + extra + `"system":"You are Claude Code.","messages":[` + strings.Join(msgs, ",") + `]}`)
}

// Anthropic's compaction block is the boundary too; one whose content is
// null (a failed compaction, a no-op for the API) is not.
func TestMessagesCompactionBlockIsABoundary(t *testing.T) {
	loop := func(content string, before bool) []byte {
		b := messagesBody("")
		open := strings.Index(string(b), `"messages":[`) + len(`"messages":[`)
		at := strings.Index(string(b), `{"role":"assistant","content":[{"type":"tool_use","id":"tu_2"`)
		block := `{"role":"assistant","content":[{"type":"compaction","content":` + content + `,"encrypted_content":"` + strings.Repeat("Zm9v", 300) + `"}]},{"role":"user","content":"Continue."},`
		if !before {
			return []byte(string(b[:open]) + block + string(b[at:]))
		}
		return []byte(string(b[:at]) + block + string(b[at:]))
	}
	p := New(Config{Format: messages.Format{}, Squash: &squash.Config{}, Dedup: DefaultDedupConfig()})
	compacted := p.RewriteWith(loop(`"Ported f0 and f1; f2 next."`, true), Options{})
	bare := p.RewriteWith(loop(`"Ported f0 and f1; f2 next."`, false), Options{})
	failed := p.RewriteWith(loop(`null`, true), Options{})
	if compacted.TokensBefore != bare.TokensBefore || failed.TokensBefore <= compacted.TokensBefore {
		t.Fatalf("counted %d tokens after a compaction, %d without what it covers, %d after a failed one", compacted.TokensBefore, bare.TokensBefore, failed.TokensBefore)
	}
	prop, ok := compacted.Compaction(1, 0)
	if !ok || prop.From != 6 {
		t.Fatalf("summarises from %d (ok %v); the compaction is message 5", prop.From, ok)
	}
	if prop, ok := failed.Compaction(1, 0); !ok || prop.From != 0 {
		t.Fatalf("a failed compaction moved the start to %d", prop.From)
	}
}

// A summary sent before and not now (the client rewound, or a provider
// compaction moved where ctxpress's coverage starts) leaves the thinking
// produced under it bound to a prefix no longer sent: such a request asks
// the upstream to drop those blocks rather than refuse it.
func TestAMissedSummaryAsksToDropMismatchedThinking(t *testing.T) {
	body := []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,"thinking":{"type":"enabled","budget_tokens":1024},"system":"s","messages":[` +
		`{"role":"user","content":"Port the parser."},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"Read it first.","signature":"c2ln"},{"type":"tool_use","id":"tu_1","name":"Bash","input":{"command":"ls"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu_1","content":"a.go"}]}]}`)
	p := New(Config{Format: messages.Format{}})
	if res := p.RewriteWith(body, Options{}); res.DropMismatched {
		t.Fatal("drop asked with no summary given")
	}
	res := p.RewriteWith(body, Options{Branches: []history.Branch{{Summary: "## Active Task\nPort.", Covered: 2, Hash: [32]byte{1}}}})
	if !res.SummaryMiss || !res.DropMismatched || gjson.GetBytes(res.Body, "thinking.block_binding.prefix_mismatch_behavior").Str != "drop_block" {
		t.Fatalf("miss %v, drop %v: %s", res.SummaryMiss, res.DropMismatched, gjson.GetBytes(res.Body, "thinking").Raw)
	}
}
