package rewrite

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/messagestest"
	"github.com/ctxpress/ctxpress/internal/responsestest"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/wire/messages"
	"github.com/ctxpress/ctxpress/wire/responses"
	"github.com/tidwall/gjson"
)

// codexAsk is a user message of codex's, as it sends a new ask.
func codexAsk(text string) string {
	return `{"type":"message","role":"user","content":[{"type":"input_text","text":` + jsonString(text) + `}]}`
}

// codexDone is the assistant's closing message of a codex turn.
func codexDone(text string) string {
	return `{"type":"message","role":"assistant","content":[{"type":"output_text","text":` + jsonString(text) + `}]}`
}

// execRun is exec_command's output of a run that exited with code.
func execRun(chunk string, code int, printed string) string {
	out := "Chunk ID: " + chunk + "\nWall time: 0.4100 seconds\nProcess exited with code " + itoa(code) + "\nOriginal token count: " +
		fmt.Sprint(squash.ApproxTokens(printed)) + "\nOutput:\n" + printed
	return `{"type":"function_call_output","id":"fco_@N@","call_id":"call_@N@","output":` + jsonString(out) + `}`
}

// outputOf is the output value of call id's function_call_output in a
// Responses body.
func outputOf(body []byte, id string) gjson.Result {
	for _, it := range gjson.GetBytes(body, "input").Array() {
		if it.Get("type").Str == "function_call_output" && it.Get("call_id").Str == id {
			return it.Get("output")
		}
	}
	return gjson.Result{}
}

// codex's session through the Responses adapter: at the second ask the
// first ask's test run and search become their lines (strings, as the
// outputs were), every forwarded body passes the validator (pairing,
// reasoning verbatim before its item, the client's ids), the requests
// after it extend it, and a request continuing a stored response
// (previous_response_id) prunes nothing.
func TestPruneOnCodexResponses(t *testing.T) {
	p := New(Config{Format: responses.Format{}, Squash: &squash.Config{}, Dedup: DefaultDedupConfig(), Prune: PruneConfig{Enabled: true, MinTokens: 200}})
	base := codexCapture(t, "codex171-exec-loop.json")
	var items []string
	items = append(items, codexDone("Listed."), codexAsk("Run the tests and fix what fails."))
	items = append(items, codexTurn(100, execCall("pytest -x"), execRun("a1", 1, testLog(300, 7, 99)))...)
	items = append(items, codexTurn(101, execCall("rg -n Handler ."), execRun("a2", 0, grepLines("Handler", 80)))...)
	items = append(items, codexDone("Fixed test 7 and 99."))
	opening := append(append([]string(nil), items...), codexAsk("Now run everything again."))
	loop := append(append([]string(nil), opening...), codexTurn(102, execCall("pytest"), execRun("a3", 0, testLog(300)))...)
	var prev Result
	for k, in := range [][]byte{withInput(base, items...), withInput(base, opening...), withInput(base, loop...)} {
		res := p.RewriteWith(in, Options{PrevDedups: prev.Dedups, PrevPrunes: prev.Prunes})
		if _, err := responsestest.Check(res.Body, responsestest.Options{Client: in, Ledger: codexLedger(in)}); err != nil {
			t.Fatalf("request %d: the upstream would refuse it: %d %s", k, err.Status, err.Message)
		}
		want := 0
		if k > 0 {
			want = 2
		}
		if res.Pruned != want || len(res.Prunes) != want {
			t.Errorf("request %d: pruned %d (%d marks), want %d", k, res.Pruned, len(res.Prunes), want)
		}
		for _, id := range []string{"call_0100", "call_0101"} {
			out := outputOf(res.Body, id)
			if k > 0 && (out.Type != gjson.String || !isPrunedLine(out.Str)) {
				t.Errorf("request %d: the output of %s is forwarded as %.120s", k, id, out.Raw)
			}
		}
		if k == 1 {
			line := outputOf(res.Body, "call_0100").Str
			for _, w := range []string{"[exec_command] ran `pytest -x`", "exit 1", "2 failed, 298 passed"} {
				if !strings.Contains(line, w) {
					t.Errorf("the line lacks %q: %s", w, line)
				}
			}
		}
		if k == 2 {
			prevIn := gjson.GetBytes(prev.Body, "input")
			if !strings.HasPrefix(string(res.Body), string(prev.Body[:prevIn.Index+len(prevIn.Raw)-1])) {
				t.Error("the request after the batch does not extend it")
			}
		}
		prev = res
	}

	stored := []byte(`{"model":"gpt-5","previous_response_id":"resp_1","store":true,"input":[` +
		strings.Join(codexTurn(100, execCall("pytest -x"), execRun("a1", 1, testLog(300, 7, 99))), ",") + `,` + codexAsk("again") + `]}`)
	if res := p.RewriteWith(stored, Options{}); !res.ServerHistory || res.Pruned != 0 || len(res.Prunes) != 0 {
		t.Errorf("server history %v, pruned %d, marks %d", res.ServerHistory, res.Pruned, len(res.Prunes))
	}
}

// Anthropic Messages without thinking: one user message carries several
// tool_results; at the next ask each is judged on its own (the Bash test
// run is pruned, the Read of the same turn is kept), its mark names its
// place in the message, and the forwarded body is one the API accepts.
func TestPruneOnMessagesResultsOneByOne(t *testing.T) {
	src := goSource(t)
	p := New(Config{Format: messages.Format{}, Squash: &squash.Config{}, Dedup: DefaultDedupConfig(), Prune: PruneConfig{Enabled: true, MinTokens: 200}})
	use := func(id, tool, input string) string {
		return `{"type":"tool_use","id":"` + id + `","name":"` + tool + `","input":` + input + `}`
	}
	result := func(id, content string) string {
		return `{"type":"tool_result","tool_use_id":"` + id + `","content":` + jsonString(content) + `}`
	}
	msgs := []string{
		`{"role":"user","content":"Run the tests and read the proxy."}`,
		`{"role":"assistant","content":[{"type":"text","text":"Running both."},` + use("toolu_1", "Read", `{"file_path":"/w/reverseproxy.go"}`) + `,` +
			use("toolu_2", "Bash", `{"command":"go test ./...","description":"Run the tests"}`) + `]}`,
		`{"role":"user","content":[` + result("toolu_1", src) + `,` + result("toolu_2", "--- FAIL: TestServe (0.01s)\n    proxy_test.go:41: got 502, want 200\n"+testLog(300, 3)+"FAIL\nexit status 1\nFAIL\tgithub.com/x/proxy\t0.41s\n") + `]}`,
		`{"role":"assistant","content":[{"type":"text","text":"TestServe fails."}]}`,
		`{"role":"user","content":"Fix it."}`,
	}
	in := []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[` + strings.Join(msgs, ",") + `]}`)
	res := p.RewriteWith(in, Options{})
	if _, err := messagestest.Check(res.Body, messagestest.Options{}); err != nil {
		t.Fatalf("refused: %v", err)
	}
	if len(res.Prunes) != 1 || res.Prunes[0].Index != 2 || res.Prunes[0].Result != 1 || res.Prunes[0].Turn != 4 {
		t.Fatalf("marks %+v, want message 2's second result, decided at the ask of message 4", res.Prunes)
	}
	blocks := gjson.GetBytes(res.Body, "messages.2.content").Array()
	if blocks[0].Get("content").Str != src {
		t.Error("the Read result changed")
	}
	line := blocks[1].Get("content").Str
	for _, w := range []string{"[Bash] ran `go test ./...`", "exit 1", "first error: --- FAIL: TestServe (0.01s)", "[old output pruned by ctxpress; re-run to see it]"} {
		if !strings.Contains(line, w) {
			t.Errorf("the line lacks %q: %s", w, line)
		}
	}
	if n, err := p.Counter().CountRequest(messages.Format{}, res.Body); err != nil || n != res.TokensAfter {
		t.Errorf("TokensAfter %d, the forwarded body counts %d (%v)", res.TokensAfter, n, err)
	}
}
