package rewrite

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// shellCall is an assistant message running cmd with the bash tool.
func shellCall(id, cmd string) string {
	args, _ := json.Marshal(map[string]string{"command": cmd})
	return callMsg(id, "bash", jsonString(string(args)))
}

// Shell-based agents (mini-swe-agent, SWE-agent, codex, OpenHands) read
// files with cat, sed -n, nl, head: squash used to remove 79% of those
// outputs' bytes (sed -n '774,810p', 37 lines asked for, lost half), and
// the agent then edited blind. Real reads from the corpus go through the
// pipeline as a chat body with the call and its result: each comes out
// byte-identical.
func TestShellFileReadIsNeverSquashed(t *testing.T) {
	reads := []struct{ trace, cmd string }{
		{"mini-gemini3pro-astropy__astropy-13398.json", "sed -n '774,810p' astropy/coordinates/tests/test_intermediate_transformations.py"},
		{"mini-gemini3pro-scikit-learn__scikit-learn-25102.json", "cat sklearn/utils/_set_output.py"},
		{"mini-gemini3pro-sphinx-doc__sphinx-9258.json", "cat sphinx/pycode/ast.py"},
		{"mini-gemini3pro-matplotlib__matplotlib-20826.json", "nl -ba lib/matplotlib/axes/_base.py | sed -n '1473,1550p'"},
		{"mini-gemini3pro-scikit-learn__scikit-learn-12682.json", "sed -n '799,850p' sklearn/linear_model/coordinate_descent.py"},
		{"mini-gemini3pro-pytest-dev__pytest-7490.json", "cat pyproject.toml"},
		{"mini-gemini3pro-sphinx-doc__sphinx-9229.json", "cat reproduce_issue/_build/html/api/file.html"},
	}
	outs := corpusOutputs(t, 0)
	p := sharedCorpusPipeline()
	for _, r := range reads {
		var text string
		for _, o := range outs {
			var args struct{ Command string }
			if o.trace == r.trace && json.Unmarshal([]byte(o.call.Arguments), &args) == nil && args.Command == r.cmd {
				text = o.text
			}
		}
		if len(text) < 1500 {
			t.Fatalf("%s: no output of %q over 1500 B", r.trace, r.cmd)
		}
		body := chat("gpt-4o", `{"role":"user","content":"fix the bug"}`, shellCall("c1", r.cmd), resultMsg("c1", text))
		res := p.Rewrite(body)
		if got := contentOf(res.Body, 2); got != text || res.Squashed != 0 {
			t.Errorf("%s: %q (%d B) was changed: %d B forwarded, %d squashed", r.trace, r.cmd, len(text), len(got), res.Squashed)
		}
	}
}

// A read larger than the cap (64 KiB) is the one read that is cut, and the
// marker says which lines are missing and how to print them: cat
// server.go (Go's net/http, 131 KB) used to become 21 lines around
// "[4053 lines omitted]".
func TestShellReadOverTheCapSaysWhichLinesAreMissing(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "src", "net", "http", "server.go"))
	if err != nil {
		t.Skipf("Go source not available: %v", err)
	}
	src := string(data)
	for _, tt := range []struct{ cmd, file string }{
		{"cat server.go", "server.go"},
		{"cd /go/src/net/http && cat server.go", "/go/src/net/http/server.go"},
	} {
		body := chat("gpt-4o", shellCall("c1", tt.cmd), resultMsg("c1", src))
		got := contentOf(sharedCorpusPipeline().Rewrite(body).Body, 1)
		m := regexp.MustCompile(`(?m)^\[lines (\d+)-(\d+) of (\S+) omitted; sed -n '(\d+),(\d+)p' (\S+)\]\n`).FindStringSubmatchIndex(got)
		if m == nil {
			t.Fatalf("%s: no marker naming the missing lines in %d B:\n%.300s", tt.cmd, len(got), got)
		}
		num := func(k int) int { n, _ := strconv.Atoi(got[m[2*k]:m[2*k+1]]); return n }
		a, z := num(1), num(2)
		if got[m[6]:m[7]] != tt.file || got[m[12]:m[13]] != tt.file || num(4) != a || num(5) != z {
			t.Errorf("%s: marker %q, want lines of %s and a sed printing them", tt.cmd, got[m[0]:m[1]], tt.file)
		}
		lines := strings.SplitAfter(src, "\n")
		head, tail := strings.Join(lines[:a-1], ""), strings.Join(lines[z:], "")
		if got[:m[0]] != head || got[m[1]:] != tail {
			t.Errorf("%s: the text around the marker is not lines 1-%d and %d-%d of the file", tt.cmd, a-1, z+1, len(lines))
		}
		if len(got) > 64<<10 || a < 1000 || len(lines)-z < 300 {
			t.Errorf("%s: %d B forwarded, lines 1-%d and %d-%d kept", tt.cmd, len(got), a-1, z+1, len(lines))
		}
	}
}

// The squash of a tool output depends on its call: the same output bytes,
// in the same message bytes, are kept whole after a read (cat build.log)
// and squashed after a build (make). Neither result is recalled from the
// memo for the other call.
func TestSquashOfAReadIsNotReusedForAnotherCommand(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, "2024-03-17 16:13:%02d INFO worker: processed job %d\n", i%60, i)
	}
	b.WriteString("2024-03-17 16:18:00 ERROR worker: job 300 failed: disk full\n")
	out := b.String()
	read := chat("gpt-4o", shellCall("c1", "cat build.log"), resultMsg("c1", out))
	build := chat("gpt-4o", shellCall("c1", "make"), resultMsg("c1", out))
	for _, order := range [][]string{{"read", "build"}, {"build", "read"}} {
		p := New(Config{Format: chatFormat, Squasher: corpusSquash})
		for _, name := range order {
			body, wantKept := read, true
			if name == "build" {
				body, wantKept = build, false
			}
			got := contentOf(p.Rewrite(body).Body, 1)
			if kept := got == out; kept != wantKept {
				t.Errorf("%v: the %s's output kept whole: %v, want %v", order, name, kept, wantKept)
			}
		}
	}
}

// Squash is handed the call each output answers: its name and arguments,
// for a tool_call (a JSON string, or an object from a sloppy client), a
// legacy function_call, and nothing for a result whose call is unknown.
func TestSquashSeesTheCall(t *testing.T) {
	seen := map[string]ToolCall{}
	p := New(Config{Format: chatFormat, Squasher: squashWith(func(call ToolCall, content string) string {
		seen[content] = call
		return content
	})})
	p.Rewrite(chat("gpt-4o",
		`{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"bash","arguments":"{\"command\":\"cat a.go\"}"}},`+
			`{"id":"b","type":"function","function":{"name":"bash","arguments":{"command":"ls"}}}]}`,
		`{"role":"tool","tool_call_id":"b","content":"out-b"}`,
		`{"role":"tool","tool_call_id":"a","content":"out-a"}`,
		`{"role":"tool","tool_call_id":"zzz","name":"named","content":"out-unmatched"}`,
		`{"role":"assistant","function_call":{"name":"legacy_fn","arguments":"{\"x\":1}"}}`,
		`{"role":"function","name":"legacy_fn","content":"out-legacy"}`))
	want := map[string]ToolCall{
		"out-a":         {Name: "bash", Arguments: `{"command":"cat a.go"}`},
		"out-b":         {Name: "bash", Arguments: `{"command":"ls"}`},
		"out-unmatched": {Name: "named"},
		"out-legacy":    {Name: "legacy_fn", Arguments: `{"x":1}`},
	}
	for content, call := range want {
		if seen[content] != call {
			t.Errorf("%s: squash saw %+v, want %+v", content, seen[content], call)
		}
	}
}
