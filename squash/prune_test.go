package squash

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// recorded is one real tool output and the call that produced it.
type recorded struct {
	call Call
	text string
}

// corpusResult returns the first tool message of a corpus trace (a chat
// body) whose text contains sel, with its call.
func corpusResult(t *testing.T, trace, sel string) recorded {
	t.Helper()
	for _, o := range corpusToolOutputs(t) {
		if o.file == trace && strings.Contains(o.text, sel) {
			return recorded{o.call(), o.text}
		}
	}
	t.Fatalf("%s: no tool result contains %q", trace, sel)
	return recorded{}
}

// codexResult returns the output of codex's function_call_output whose
// text contains sel, in a captured codex request (internal/responsestest),
// with its call.
func codexResult(t *testing.T, capture, sel string) recorded {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "internal", "responsestest", "testdata", capture))
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Input []struct {
			Type, Name, Arguments, Output string
			CallID                        string `json:"call_id"`
		} `json:"input"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		t.Fatal(err)
	}
	calls := map[string]Call{}
	for _, it := range body.Input {
		switch {
		case it.Type == "function_call":
			calls[it.CallID] = Call{Tool: it.Name, Args: it.Arguments}
		case it.Type == "function_call_output" && strings.Contains(it.Output, sel):
			return recorded{calls[it.CallID], it.Output}
		}
	}
	t.Fatalf("%s: no output contains %q", capture, sel)
	return recorded{}
}

// Pruned lines of real outputs keep the facts an agent acts on: the
// command, the exit status the output shows, its size, the first error
// (for a traceback, the exception it ends with) and a test summary; and
// they claim nothing the output does not show.
func TestPruneLineKeepsTheFactsOfRealOutputs(t *testing.T) {
	const mini = "mini-gemini3pro-"
	tests := []struct {
		name      string
		out       func(t *testing.T) recorded
		want, not []string
	}{
		{"a failing pytest run: its first E line and its summary",
			func(t *testing.T) recorded {
				return corpusResult(t, mini+"astropy__astropy-13398.json", "6 failed, 63 passed")
			},
			[]string{"[bash] ran `pytest astropy/coordinates/tests/test_intermediate_transformations.py`", "exit 1", "229 lines", "10.3 KB",
				"first error: E TypeError: unsupported operand type(s) for -: 'Time' and 'float'", "summary: 6 failed, 63 passed, 3 skipped in 2.05s"}, nil},
		{"a passing pytest run: its summary, no error",
			func(t *testing.T) recorded {
				return corpusResult(t, mini+"sphinx-doc__sphinx-9258.json", "45 passed, 192 warnings")
			},
			[]string{"ran `pytest tests/test_domain_py.py`", "exit 0", "78 lines", "summary: 45 passed, 192 warnings in 1.76s"}, []string{"first error"}},
		{"a traceback: the exception it ends with",
			func(t *testing.T) recorded {
				return corpusResult(t, mini+"astropy__astropy-13398.json", "AttributeError: 'ITRS' object has no attribute 'distance'")
			},
			[]string{"ran `python reproduce_issue.py`", "exit 1", "17 lines", "first error: AttributeError: 'ITRS' object has no attribute 'distance'"},
			[]string{"first error: Traceback", "DEBUG"}},
		{"a chained traceback: the last exception of the chain",
			func(t *testing.T) recorded {
				return corpusResult(t, mini+"django__django-16560.json", "no such table: __main___product")
			},
			[]string{"ran `python test_unique_constraint.py`", "exit 1", "first error: django.db.utils.OperationalError: no such table: __main___product"},
			[]string{"sqlite3."}},
		{"unittest through Django's runner: the first ERROR and the verdict",
			func(t *testing.T) recorded {
				return corpusResult(t, mini+"psf__requests-1142.json", "FAILED (errors=21)")
			},
			[]string{"ran `/usr/bin/python3 test_requests.py`", "exit 1", "first error: ERROR: test_BASICAUTH_TUPLE_HTTP_200_OK_GET (__main__.RequestsTestCase)",
				"summary: FAILED (errors=21)"}, nil},
		{"a syntax error in a test run",
			func(t *testing.T) recorded {
				return corpusResult(t, mini+"django__django-11138.json", "IndentationError")
			},
			[]string{"ran `python3 reproduce_issue.py`", "exit 1", "23 lines", "first error: IndentationError: expected an indented block"}, nil},
		{"a linter: its exit status and first diagnostic",
			func(t *testing.T) recorded {
				return corpusResult(t, mini+"pylint-dev__pylint-6528.json", "<returncode>28</returncode>")
			},
			[]string{"ran `cd reproduction && pylint --recursive=y .`", "exit 28", "48 lines",
				"first error: reproduce_issue.py:1:0: C0114: Missing module docstring"}, nil},
		{"a build (pip install) that succeeded",
			func(t *testing.T) recorded {
				return corpusResult(t, mini+"sphinx-doc__sphinx-9229.json", "Successfully installed")
			},
			[]string{"ran `pip install -e .`", "exit 0", "33 lines", "4.5 KB"}, []string{"first error"}},
		{"a grep: a search's matches are no error",
			func(t *testing.T) recorded {
				return corpusResult(t, mini+"sphinx-doc__sphinx-10673.json", "sphinx/locale/ko/LC_MESSAGES/sphinx.po:msgid")
			},
			[]string{"ran `grep -r \"toctree contains reference to nonexisting document\" sphinx`", "exit 0", "81 lines", "7.6 KB"},
			[]string{"first error", "summary"}},
		{"an ls -R listing",
			func(t *testing.T) recorded {
				return corpusResult(t, mini+"astropy__astropy-14369.json", "<returncode>0</returncode>\n<warning>")
			},
			[]string{"ran `ls -R`", "exit 0", "706 lines", "10.3 KB"}, []string{"first error"}},
		{"a diff: an error word in its hunks is the file's, not the command's",
			func(t *testing.T) recorded {
				return corpusResult(t, mini+"psf__requests-1142.json", "Client Error: %s")
			},
			[]string{"ran `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached`", "16587 lines", "847.8 KB"},
			[]string{"first error", "exit"}},
		{"OpenHands: the exit code of its suffix",
			func(t *testing.T) recorded {
				return corpusResult(t, "ohsdk-claude-sonnet-4-fncall.json", "[Command finished with exit code 0]")
			},
			[]string{"[terminal] ran `pwd && ls -la`", "exit 0", "31 lines", "1.9 KB"}, nil},
		{"SWE-agent prints no exit status: none is claimed",
			func(t *testing.T) recorded {
				return corpusResult(t, "sweagent-demo-marshmallow-1867-default.json", "Successfully installed")
			},
			[]string{"ran `pip install -e .[dev]`", "61 lines", "6.9 KB"}, []string{"exit"}},
		{"codex: the exit code of its run details, the error after 400 build lines",
			func(t *testing.T) recorded {
				return codexResult(t, "codex171-parallel-calls.json", "error: pkg401 failed")
			},
			[]string{"[exec_command] ran `for i in $(seq 1 400); do echo", "exit 0", "279 lines", "first error: error: pkg401 failed"},
			[]string{"Chunk ID"}},
		{"a SWE-agent tool that is not a shell: its path",
			func(t *testing.T) recorded {
				return corpusResult(t, "sweagent-test-pydicom-1458.json", "numpy_handler.py (372 lines total)")
			},
			[]string{"[open] `pydicom/pixel_data_handlers/numpy_handler.py`", "call the tool again to see it"}, []string{"ran `", "exit"}},
	}
	s := New(Config{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.out(t)
			line := s.PruneLine(o.call, o.text)
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("the line lacks %q:\n%s", w, line)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(line, n) {
					t.Errorf("the line says %q:\n%s", n, line)
				}
			}
			if !strings.HasSuffix(line, " to see it]") {
				t.Errorf("the line does not say how to get the output back:\n%s", line)
			}
		})
	}
}

// Every pruned line of the corpus is one line of valid UTF-8 within
// MaxPruneLine bytes, the same on every call, naming its tool.
func TestPruneLineIsOneBoundedLine(t *testing.T) {
	s := New(Config{})
	n := 0
	for _, o := range corpusToolOutputs(t) {
		line := s.PruneLine(o.call(), o.text)
		switch {
		case len(line) > MaxPruneLine:
			t.Errorf("%s: %d bytes: %s", o.file, len(line), line)
		case strings.ContainsAny(line, "\n\r\t"):
			t.Errorf("%s: not one line: %q", o.file, line)
		case !utf8.ValidString(line):
			t.Errorf("%s: not valid UTF-8: %q", o.file, line)
		case line != s.PruneLine(o.call(), o.text):
			t.Errorf("%s: two calls, two lines", o.file)
		case o.tool != "" && !strings.HasPrefix(line, "["+o.tool+"]"):
			t.Errorf("%s: does not name %s: %s", o.file, o.tool, line)
		}
		n++
	}
	t.Logf("%d outputs", n)
}

// Long arguments and error lines are cut, on rune boundaries, so the line
// stays bounded; a path keeps its end.
func TestPruneLineShortensLongParts(t *testing.T) {
	s := New(Config{})
	long := strings.Repeat("é", 400)
	tests := []struct {
		name      string
		call      Call
		output    string
		want, not []string
	}{
		{"a long command", Call{Tool: "bash", Args: `{"command":"echo ` + long + `"}`}, "x\n", []string{"ran `echo éé", "…`"}, nil},
		{"a multi-line script is one line", Call{Tool: "bash", Args: `{"command":"cd src\npython -m pytest -x"}`}, "ok\n",
			[]string{"ran `cd src python -m pytest -x`"}, nil},
		{"a long path keeps its file name", Call{Tool: "grep", Args: `{"pattern":"TODO","path":"/very/long/` + strings.Repeat("dir/", 30) + `main.go"}`},
			"a\nb\n", []string{"[grep] `TODO` in `…", "/main.go`"}, nil},
		{"a long error line", Call{Tool: "bash", Args: `{"command":"make"}`}, "error: " + long + "\n", []string{"first error: error: éé", "…"}, nil},
		{"an argv command", Call{Tool: "shell", Args: `{"command":["bash","-lc","go vet ./..."]}`}, "", []string{"ran `go vet ./...`", "no output"}, []string{"bash -lc"}},
		{"an editor's sub-command and path", Call{Tool: "str_replace_editor", Args: `{"command":"create","path":"/w/a.py","file_text":"x"}`}, "created\n",
			[]string{"[str_replace_editor] create `/w/a.py`"}, []string{" in "}},
		{"unknown arguments are shown shortened", Call{Tool: "decompile", Args: `{"binary_path": "rock", "function_name": "main"}`}, "x\n",
			[]string{"[decompile] `rock`"}, nil},
		{"no call", Call{}, "out\n", []string{"[tool] → 1 line, 4 bytes"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			line := s.PruneLine(tc.call, tc.output)
			if len(line) > MaxPruneLine || !utf8.ValidString(line) {
				t.Fatalf("%d bytes, valid %v: %s", len(line), utf8.ValidString(line), line)
			}
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("lacks %q:\n%s", w, line)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(line, n) {
					t.Errorf("says %q:\n%s", n, line)
				}
			}
		})
	}
}

// An exit status is read only from a framing that states it.
func TestExitStatusOnlyWhereTheOutputShowsOne(t *testing.T) {
	tests := []struct {
		name, output string
		want         string // "" for none
	}{
		{"mini-swe-agent", "<returncode>2</returncode>\n<output>\nx\n</output>", "2"},
		{"OpenHands", "x\n[Command finished with exit code 1]", "1"},
		{"OpenHands' completion note", "x\n[The command completed with exit code 0.]\n[Current working directory: /w]", "0"},
		{"codex exec_command", "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 127\nOriginal token count: 3\nOutput:\nsh: x: not found\n", "127"},
		{"codex shell", "Exit code: 3\nWall time: 0 seconds\nOutput:\nboom\n", "3"},
		{"older codex JSON", `{"output":"boom\n","metadata":{"exit_code":4,"duration_seconds":0.1}}`, "4"},
		{"Claude Code's first line", "Exit code 1\nnpm ERR! missing script\n", "1"},
		{"go's last line", "--- FAIL: TestX (0.00s)\nFAIL\nexit status 1\nFAIL\tpkg\t0.01s\n", "1"},
		{"a negative status", "<returncode>-9</returncode>\n", "-9"},
		{"no framing", "all good\n", ""},
		{"an exit code in the middle of an output is a message", "step 1\nthe server said exit code 3\nstep 2\n" + strings.Repeat("x\n", 10), ""},
		{"exit status inside a line", "tool failed with exit status 2 after retry\n", ""},
		{"not a number", "<returncode>none</returncode>\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := exitStatus(tc.output)
			if ok != (tc.want != "") || got != tc.want {
				t.Errorf("exitStatus = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

// What squash keeps whole is what prune keeps: exempt tools and file
// reads through a shell, as squash's config says.
func TestKeepsWholeFollowsSquashExemptions(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		call Call
		want bool
	}{
		{"an exempt tool", Config{}, Call{Tool: "Read", Args: `{"file_path":"a.go"}`}, true},
		{"a read through the shell", Config{}, Call{Tool: "bash", Args: `{"command":"cd src && nl -ba a.py | sed -n '10,40p'"}`}, true},
		{"a search through the shell", Config{}, Call{Tool: "bash", Args: `{"command":"grep -rn x src"}`}, false},
		{"a test run", Config{}, Call{Tool: "bash", Args: `{"command":"pytest -x"}`}, false},
		{"reads not kept (read_max_bytes -1)", Config{ReadMaxBytes: -1}, Call{Tool: "bash", Args: `{"command":"cat a.py"}`}, false},
		{"exempt tools configured away", Config{ExemptTools: []string{}}, Call{Tool: "Read"}, false},
		{"a tool configured exempt", Config{ExemptTools: []string{"fetch"}}, Call{Tool: "fetch"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := New(tc.cfg).KeepsWhole(tc.call); got != tc.want {
				t.Errorf("KeepsWhole = %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzPruneLine: whatever the call and output, a pruned line is one line
// of valid UTF-8 within MaxPruneLine bytes.
func FuzzPruneLine(f *testing.F) {
	f.Add("bash", `{"command":"go test ./..."}`, "--- FAIL: T\nexit status 1\n")
	f.Add("Grep", `{"pattern":"x","path":"src"}`, "a.go:1:x\n")
	f.Add("", "", "")
	f.Add("bash", `{"command":["sh","-c","x"]}`, "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n  File \"a\"\nValueError: \xff\n</output>")
	s := New(Config{})
	f.Fuzz(func(t *testing.T, tool, args, output string) {
		line := s.PruneLine(Call{Tool: tool, Args: args}, output)
		if len(line) > MaxPruneLine || strings.ContainsAny(line, "\n\r") || !utf8.ValidString(line) {
			t.Fatalf("%d bytes, valid %v: %q", len(line), utf8.ValidString(line), line)
		}
	})
}
