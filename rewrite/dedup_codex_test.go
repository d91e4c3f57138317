package rewrite

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/responsestest"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/responses"
	"github.com/tidwall/gjson"
)

// codexCapture returns a request body codex 0.171 sent, byte for byte
// (internal/responsestest/testdata).
func codexCapture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "responsestest", "testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// withInput returns body with items appended to its input, as codex's
// next request sends the history it sent and what happened since.
func withInput(body []byte, items ...string) []byte {
	if len(items) == 0 {
		return body
	}
	in := gjson.GetBytes(body, "input")
	end := in.Index + len(in.Raw) - 1 // the closing bracket
	return []byte(string(body[:end]) + "," + strings.Join(items, ",") + string(body[end:]))
}

// codexTurn is one model turn of codex's tool loop as it re-sends it: the
// reasoning item the server produced, then its call and codex's output,
// their ids numbered n (for the @N@ in call and output) as the recording
// server numbered its own (rs_0001, fc_0001, call_0001 in the captures).
func codexTurn(n int, call, output string) []string {
	num := fmt.Sprintf("%04d", n)
	reasoning := `{"type":"reasoning","id":"rs_@N@","summary":[{"type":"summary_text","text":"**Thinking** step @N@"}],"content":null,"encrypted_content":"ENC@N@"}`
	return []string{strings.ReplaceAll(reasoning, "@N@", num), strings.ReplaceAll(call, "@N@", num), strings.ReplaceAll(output, "@N@", num)}
}

// execCall is codex 0.171's exec_command call of cmd; execOutput its
// output, framed in the run details of one run (chunk id and wall time),
// printing printed.
func execCall(cmd string) string {
	return `{"type":"function_call","status":"completed","id":"fc_@N@","name":"exec_command","arguments":` +
		jsonString(`{"cmd": `+jsonString(cmd)+`}`) + `,"call_id":"call_@N@"}`
}

func execOutput(chunk, wall, printed string) string {
	out := "Chunk ID: " + chunk + "\nWall time: " + wall + " seconds\nProcess exited with code 0\nOriginal token count: " +
		fmt.Sprint(squash.ApproxTokens(printed)) + "\nOutput:\n" + printed
	return `{"type":"function_call_output","id":"fco_@N@","call_id":"call_@N@","output":` + jsonString(out) + `}`
}

// oldShellCall and shellOutput are older codex's shell tool: an argv command
// and a JSON-string output of output and metadata.
func oldShellCall(script string) string {
	return `{"type":"function_call","id":"fc_@N@","name":"shell","arguments":` +
		jsonString(`{"command":["bash","-lc",`+jsonString(script)+`],"workdir":"/tmp/h11/repo","timeout_ms":10000}`) + `,"call_id":"call_@N@"}`
}

func shellOutput(seconds, printed string) string {
	out := `{"output":` + jsonString(printed) + `,"metadata":{"exit_code":0,"duration_seconds":` + seconds + `}}`
	return `{"type":"function_call_output","call_id":"call_@N@","output":` + jsonString(out) + `}`
}

// localShellCall is a local_shell_call item, its command in action.
func localShellCall(script string) string {
	return `{"type":"local_shell_call","id":"lsh_@N@","call_id":"call_@N@","status":"completed","action":{"type":"exec","command":["bash","-lc",` +
		jsonString(script) + `],"timeout_ms":null,"working_directory":null,"env":{},"user":null}}`
}

// codexLedger is what the upstream issued for body: each reasoning item
// with the item after it (the captures' server answered so), so the
// validator verifies every reasoning item forwarded is the one issued,
// verbatim, right before its item.
func codexLedger(body []byte) *responsestest.Ledger {
	l := responsestest.NewLedger()
	items := gjson.GetBytes(body, "input").Array()
	for i, it := range items {
		if it.Get("type").String() == "reasoning" && i+1 < len(items) {
			l.Record([]byte(`{"id":"resp_`+it.Get("id").String()+`","output":[`+it.Raw+`,`+items[i+1].Raw+`]}`), false)
		}
	}
	return l
}

// outputsOf returns the neutral result (message, 0) of each call id's
// output in body.
func outputsOf(tb testing.TB, body []byte, callIDs []string) []at {
	tb.Helper()
	c, ok := responses.Format{}.Parse(body)
	if !ok {
		tb.Fatal("not a Responses body")
	}
	var out []at
	for _, id := range callIDs {
		found := false
		for _, it := range c.Items {
			if it.Kind == wire.KindToolResult && it.CallID == id {
				out, found = append(out, at{it.Message, 0}), true
			}
		}
		if !found {
			tb.Fatalf("no output of %s", id)
		}
	}
	return out
}

// checkCodexForwarded checks a forwarded Responses body as OpenAI would
// (call and output pairing, each reasoning item verbatim before its item,
// no item id the client did not send, store untouched) and that it is
// the client's body with exactly the outputs of replaced (call ids) sent
// as the placeholder.
func checkCodexForwarded(tb testing.TB, in []byte, res Result, replaced []string) {
	tb.Helper()
	if _, err := responsestest.Check(res.Body, responsestest.Options{Client: in, Ledger: codexLedger(in)}); err != nil {
		tb.Fatalf("the upstream would refuse the forwarded body: %d %s", err.Status, err.Message)
	}
	if want := withPlaceholders(tb, responses.Format{}, in, outputsOf(tb, in, replaced)); string(res.Body) != string(want) {
		tb.Errorf("forwarded body is not the client's with the outputs of %v replaced", replaced)
	}
	if res.Deduped != len(replaced) {
		tb.Errorf("Deduped %d, want %d", res.Deduped, len(replaced))
	}
}

// The exec-loop capture's calls: call_0001 ls -la, call_0002 cat a.py,
// call_0003 grep -n def a.py b.py, call_0004 sed -n 1,5p b.py, call_0005
// git log --oneline.
const capturedA = "def f():\n    return 1\n\ndef g():\n    return 2\n"

// TestCodexRerunsOfReadOnlyCommandsAreDeduped: codex's shell tools through the Responses adapter. An
// earlier run of a read-only command is replaced when a later run of the
// same call printed the same (its chunk id and wall time differ on every
// run) or, being a read, supersedes it; a command that writes only
// collapses into an identical later run.
func TestCodexRerunsOfReadOnlyCommandsAreDeduped(t *testing.T) {
	big := goFile(t, "dump.go") // a file codex prints whole (under its ~10 KB cut)
	noMin := DedupConfig{Enabled: true, MinTokens: -1}
	gen := "wrote out.txt\n" + strings.Repeat("generated row\n", 20)
	tests := []struct {
		name     string
		capture  string
		cfg      DedupConfig
		turns    [][]string
		replaced []string // call ids whose output is sent as the placeholder
	}{
		{"cat a.py run again, the same output under a new chunk id and wall time: the earlier run is replaced",
			"codex171-exec-loop.json", noMin,
			[][]string{codexTurn(100, execCall("cat a.py"), execOutput("a81f0c", "0.0012", capturedA))},
			[]string{"call_0002"}},
		{"cat a.py run again after the file changed: the later read supersedes the earlier one",
			"codex171-exec-loop.json", noMin,
			[][]string{codexTurn(100, execCall("cat a.py"), execOutput("a81f0c", "0.0012", capturedA+"\ndef k():\n    return 3\n"))},
			[]string{"call_0002"}},
		{"the same command with other arguments (sed -n 1,9p after 1,5p): nothing replaced",
			"codex171-exec-loop.json", noMin,
			[][]string{codexTurn(100, execCall("sed -n 1,9p b.py"), execOutput("5e2d11", "0.0000", "import a\n\ndef h():\n    return a.f()\n"))},
			nil},
		{"a command that writes, run twice with the same output: collapsed, as any identical output",
			"codex171-exec-loop.json", noMin,
			[][]string{codexTurn(100, execCall("python3 gen.py"), execOutput("0c11aa", "0.4000", gen)),
				codexTurn(101, execCall("python3 gen.py"), execOutput("9d03be", "0.3812", gen))},
			[]string{"call_0100"}},
		{"a command that writes, run twice with different outputs: both kept",
			"codex171-exec-loop.json", noMin,
			[][]string{codexTurn(100, execCall("python3 gen.py"), execOutput("0c11aa", "0.4000", gen)),
				codexTurn(101, execCall("python3 gen.py"), execOutput("9d03be", "0.3812", gen+"generated row\n"))},
			nil},
		{"sed -i between two reads: the earlier read is still superseded, the later one is the file as it is now",
			"codex171-exec-loop.json", noMin,
			[][]string{codexTurn(100, execCall("sed -i 's/return 1/return 10/' a.py"), execOutput("77aa01", "0.0000", "")),
				codexTurn(101, execCall("cat a.py"), execOutput("77aa02", "0.0000", strings.Replace(capturedA, "return 1", "return 10", 1)))},
			[]string{"call_0002"}},
		{"apply_patch between two reads (the apply-patch capture): the earlier read is still superseded",
			"codex171-apply-patch-second-ask.json", noMin,
			[][]string{codexTurn(100, `{"type":"custom_tool_call","id":"ctc_@N@","status":"completed","call_id":"call_@N@","name":"apply_patch","input":"*** Begin Patch\n*** Update File: a.py\n@@\n-    return 1\n+    return 10\n*** End Patch\n"}`,
				`{"type":"custom_tool_call_output","id":"ctco_@N@","call_id":"call_@N@","output":"Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nM a.py\n"}`),
				codexTurn(101, execCall("cat a.py"), execOutput("e87852", "0.0000", strings.Replace(capturedA, "return 1", "return 10", 1)))},
			[]string{"call_0001"}},
		{"older codex's shell tool, argv command and JSON output: compared by what it printed",
			"codex171-exec-loop.json", noMin,
			[][]string{codexTurn(100, oldShellCall("cat a.py"), shellOutput("0.1", capturedA)),
				codexTurn(101, oldShellCall("cat a.py"), shellOutput("0.0", capturedA))},
			[]string{"call_0100"}},
		{"a local_shell_call's action.command, read again",
			"codex171-exec-loop.json", noMin,
			[][]string{codexTurn(100, localShellCall("cat a.py"), shellOutput("0.1", capturedA)),
				codexTurn(101, localShellCall("cat a.py"), shellOutput("0.0", capturedA+"# more\n"))},
			[]string{"call_0100"}},
		{"a shell output without run details (chat agents' shape) read again with a different output: kept, as chat's dedup does",
			"codex171-exec-loop.json", noMin,
			[][]string{codexTurn(100, execCall("cat c.py"), `{"type":"function_call_output","call_id":"call_@N@","output":`+jsonString(big)+`}`),
				codexTurn(101, execCall("cat c.py"), `{"type":"function_call_output","call_id":"call_@N@","output":`+jsonString(big+"// edited\n")+`}`)},
			nil},
		{"the default minimum: codex's small reads save under 1000 tokens, nothing replaced",
			"codex171-exec-loop.json", DefaultDedupConfig(),
			[][]string{codexTurn(100, execCall("cat a.py"), execOutput("a81f0c", "0.0012", capturedA))},
			nil},
		{"the default minimum: a file of a few thousand tokens printed twice is replaced",
			"codex171-exec-loop.json", DefaultDedupConfig(),
			[][]string{codexTurn(100, execCall("cat dump.go"), execOutput("3f0a10", "0.0021", big)),
				codexTurn(101, execCall("cat dump.go"), execOutput("3f0a11", "0.0019", big))},
			[]string{"call_0100"}},
		{"a later run printing a stub of the earlier (under a quarter of it) does not supersede it",
			"codex171-exec-loop.json", DefaultDedupConfig(),
			[][]string{codexTurn(100, execCall("cat dump.go"), execOutput("3f0a10", "0.0021", big)),
				codexTurn(101, execCall("cat dump.go"), execOutput("3f0a11", "0.0019", "cat: dump.go: No such file or directory\n"))},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var items []string
			for _, tr := range tt.turns {
				items = append(items, tr...)
			}
			in := withInput(codexCapture(t, tt.capture), items...)
			p := New(Config{Format: responses.Format{}, Squash: &squash.Config{}, Dedup: tt.cfg})
			res := p.Rewrite(in)
			if !res.Understood {
				t.Fatal("not understood")
			}
			checkCodexForwarded(t, in, res, tt.replaced)
			if n, err := p.Counter().CountRequest(responses.Format{}, res.Body); err != nil || n != res.TokensAfter {
				t.Errorf("TokensAfter %d, the forwarded body counts %d (%v)", res.TokensAfter, n, err)
			}
		})
	}
}

// codex's tool loop request by request, each with the previous forwarded
// request's marks, as the proxy runs it: the earlier read is replaced at
// the first request that holds a later identical one, stays replaced,
// every forwarded body passes the validator, and each one's input is a
// byte prefix of the next one's but at the request that added the dedup.
func TestCodexDedupIsStickyAcrossRequests(t *testing.T) {
	big := goFile(t, "dump.go")
	turns := [][]string{
		codexTurn(100, execCall("cat dump.go"), execOutput("3f0a10", "0.0021", big)),
		codexTurn(101, execCall("rg -n Dump dump.go"), execOutput("3f0a11", "0.0100", "12:func DumpRequestOut(\n")),
		codexTurn(102, execCall("cat dump.go"), execOutput("3f0a12", "0.0019", big)), // supersedes call_0100
		codexTurn(103, execCall("git status --short"), execOutput("3f0a13", "0.0050", "")),
	}
	p := New(Config{Format: responses.Format{}, Squash: &squash.Config{}, Dedup: DefaultDedupConfig()})
	base := codexCapture(t, "codex171-exec-loop.json")
	var prev Result
	var items []string
	for k, tr := range turns {
		items = append(items, tr...)
		in := withInput(base, items...)
		res := p.RewriteWith(in, Options{PrevDedups: prev.Dedups})
		var want []string
		if k >= 2 {
			want = []string{"call_0100"}
		}
		checkCodexForwarded(t, in, res, want)
		if k > 0 && k != 2 {
			in := gjson.GetBytes(prev.Body, "input")
			open := prev.Body[:in.Index+len(in.Raw)-1]
			if !strings.HasPrefix(string(res.Body), string(open)) {
				t.Errorf("request %d's input does not extend request %d's", k, k-1)
			}
		}
		prev = res
	}
}

// Chat agents' shell outputs carry no run details, and their dedup stays
// what it was: a shell read run again collapses only into an identical
// later output.
func TestChatShellRereadIsDedupedOnlyWhenIdentical(t *testing.T) {
	src := goSource(t)
	cat := jsonString(`{"command":"cat proxy.go"}`)
	user := `{"role":"user","content":"look at proxy.go"}`
	tests := []struct {
		name     string
		later    string
		replaced []int
	}{
		{"bash cat run again with a different output: both kept", src + "// edited\n", nil},
		{"bash cat run again with the same output: the earlier one replaced", src, []int{2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := chat("gpt-4o", user, callMsg("c1", "bash", cat), resultMsg("c1", src), callMsg("c2", "bash", cat), resultMsg("c2", tt.later))
			res := New(Config{Format: chatFormat, Dedup: DefaultDedupConfig()}).Rewrite(body)
			var got []int
			for _, m := range res.Dedups {
				got = append(got, m.Index)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.replaced) {
				t.Errorf("replaced %v, want %v", got, tt.replaced)
			}
		})
	}
}
