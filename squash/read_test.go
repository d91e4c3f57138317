package squash

import (
	"encoding/json"
	"testing"

	"github.com/ctxpress/ctxpress/internal/corpustest"
)

// commandArgs is the arguments of a shell call running cmd.
func commandArgs(cmd string) string {
	b, _ := json.Marshal(map[string]string{"command": cmd})
	return string(b)
}

const mini = "mini-gemini3pro-"

// shellReadTests are the read rule on real commands (the trace each is
// from is named; "-" for made-up ones) and tricky ones. want is what the
// marker of a cut read can say: the file, the file line of the output's
// first line (0: not known), whether each line carries its file line.
var shellReadTests = []struct {
	rule, from string
	tool, args string // args "" means commandArgs(cmd)
	cmd        string
	read       bool
	want       fileRead
}{
	// Real reads.
	{"sed -n range reads from its first line", mini + "astropy__astropy-13398.json", "bash", "",
		"sed -n '774,810p' astropy/coordinates/tests/test_intermediate_transformations.py", true,
		fileRead{file: "astropy/coordinates/tests/test_intermediate_transformations.py", first: 774}},
	{"cat reads a whole file", mini + "astropy__astropy-13398.json", "bash", "",
		"cat astropy/coordinates/builtin_frames/cirs_observed_transforms.py", true,
		fileRead{file: "astropy/coordinates/builtin_frames/cirs_observed_transforms.py", first: 1}},
	{"nl -ba piped to a sed range is a numbered read", mini + "django__django-11138.json", "bash", "",
		"nl -ba django/db/backends/sqlite3/base.py | sed -n '190,210p'", true,
		fileRead{file: "django/db/backends/sqlite3/base.py", first: 190, numbered: true}},
	{"a comment line before the read writes nothing", mini + "django__django-11138.json", "bash", "",
		"# Read the file to locate lines\nnl -ba django/db/backends/sqlite3/base.py | sed -n '400,470p'", true,
		fileRead{file: "django/db/backends/sqlite3/base.py", first: 400, numbered: true}},
	{"head reads from line 1", mini + "pylint-dev__pylint-6528.json", "bash", "",
		"head -n 50 pylint/lint/pylinter.py", true, fileRead{file: "pylint/lint/pylinter.py", first: 1}},
	{"tail reads, from a line not known", mini + "sphinx-doc__sphinx-9229.json", "bash", "",
		"tail -n 50 sphinx/ext/autodoc/__init__.py", true, fileRead{file: "sphinx/ext/autodoc/__init__.py"}},
	{"a regex range reads, from a line not known", mini + "mwaskom__seaborn-3069.json", "bash", "",
		"sed -n '/class Nominal/,/class Continuous/p' seaborn/_core/scales.py", true, fileRead{file: "seaborn/_core/scales.py"}},
	{"a regex range cut by head is a read", mini + "pallets__flask-5014.json", "bash", "",
		"sed -n '/class Blueprint(Scaffold):/,/def __init__/p' src/flask/blueprints.py | head -n 50", true,
		fileRead{file: "src/flask/blueprints.py"}},
	{"cat piped to a sed range", mini + "pytest-dev__pytest-7490.json", "bash", "",
		"cat src/_pytest/skipping.py | sed -n '260,290p'", true, fileRead{file: "src/_pytest/skipping.py", first: 260}},
	{"head | tail | cat -A is a read", mini + "django__django-14349.json", "bash", "",
		"head -n 118 django/core/validators.py | tail -n 5 | cat -A", true, fileRead{file: "django/core/validators.py"}},
	{"a write to a file writes nothing; the cat after it is the read", mini + "sphinx-doc__sphinx-9258.json", "bash", "",
		"sed -n '110,180p' sphinx/domains/python.py > parse_annotation.py\ncat parse_annotation.py", true,
		fileRead{file: "parse_annotation.py", first: 1}},
	{"a file of unknown name is still a read", mini + "sphinx-doc__sphinx-9229.json", "bash", "",
		"head -n 1 $(which sphinx-build)", true, fileRead{}},
	{"OpenHands execute_bash", "openhands-resolver-pr-viewer-issue5.json", "execute_bash", "", "cat LICENSE", true,
		fileRead{file: "LICENSE", first: 1}},

	// Real non-reads.
	{"grep after a read is a search", mini + "pallets__flask-5014.json", "bash", "",
		`sed -n '/class Blueprint(Scaffold):/,/def setup_loader/p' src/flask/blueprints.py | grep -A 50 "def __init__"`, false, fileRead{}},
	{"nl | grep is a search", mini + "matplotlib__matplotlib-23299.json", "bash", "",
		`nl -ba lib/matplotlib/pyplot.py | grep -A 50 "def switch_backend"`, false, fileRead{}},
	{"cat of a here-document into a file, then a script (shortened from django-11138)", "-", "bash", "",
		"cat <<'EOF' > reproduce_issue.py\nimport django\nprint(1)\nEOF\npython3 reproduce_issue.py", false, fileRead{}},
	{"sed -i edits", mini + "django__django-16560.json", "bash", "",
		"sed -i '348,$d' django/db/models/constraints.py && cat unique_constraint_validate.py >> django/db/models/constraints.py", false, fileRead{}},
	{"a script after cd", mini + "pylint-dev__pylint-6528.json", "bash", "", "cd reproduction && python3 reproduce_issue.py", false, fileRead{}},
	{"git diff", mini + "astropy__astropy-13398.json", "bash", "",
		"echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached", false, fileRead{}},
	{"a read after a test run is not the output", mini + "pytest-dev__pytest-6197.json", "bash", "",
		"rm -f /tmp/debug.txt\npytest testing/test_collection.py::test_collect_sub_with_symlinks\ncat /tmp/debug.txt", false, fileRead{}},
	{"grep | tail", mini + "django__django-16950.json", "bash", "", `grep -A 100 "DEBUG: Setting id to None!" output.txt | tail -n 50`, false, fileRead{}},
	{"commands that write nothing are no read", "openhands-resolver-pr-viewer-issue5.json", "execute_bash", "", "touch LICENSE", false, fileRead{}},

	// Wrappers and lists.
	{"cd joins the file's path", "-", "bash", "", "cd /repo && cat server.go", true, fileRead{file: "/repo/server.go", first: 1}},
	{"cd ; cat -n | sed", "-", "bash", "", "cd src; cat -n main.go | sed -n '10,40p'", true,
		fileRead{file: "src/main.go", first: 10, numbered: true}},
	{"cd to somewhere unknown loses the file", "-", "bash", "", `cd "$DIR" && cat f.go`, true, fileRead{first: 1}},
	{"assignments before the command", "-", "bash", "", "LANG=C PAGER=cat cat a.py", true, fileRead{file: "a.py", first: 1}},
	{"env, timeout and nice wrap the read", "-", "bash", "", "env -i A=1 timeout -s KILL 10 nice -n 5 head -n 20 a.py", true,
		fileRead{file: "a.py", first: 1}},
	{"sudo and time", "-", "bash", "", "time sudo -u root cat /etc/hosts", true, fileRead{file: "/etc/hosts", first: 1}},
	{"bash -lc wraps the read", "-", "bash", "", `bash -lc 'cd /w && sed -n "5,9p" a.py'`, true, fileRead{file: "/w/a.py", first: 5}},
	{"sh -c with a pipeline", "-", "bash", "", `sh -c "cat -n a.py | head -n 40"`, true, fileRead{file: "a.py", first: 1, numbered: true}},
	{"a subshell", "-", "bash", "", "(cd pkg && cat x.go)", true, fileRead{file: "pkg/x.go", first: 1}},
	{"stderr redirections keep the read", "-", "bash", "", "cat a.py 2>/dev/null", true, fileRead{file: "a.py", first: 1}},
	{"stdin from a file", "-", "bash", "", "sed -n '3,4p' < a.py", true, fileRead{file: "a.py", first: 3}},
	{"an echo beside a read leaves no file", "-", "bash", "", "echo '--- a.py' && cat a.py", true, fileRead{}},
	{"two files", "-", "bash", "", "cat a.py b.py", true, fileRead{}},
	{"a glob", "-", "bash", "", "cat src/*.py", true, fileRead{}},
	{"codex local_shell argv", "-", "local_shell", `{"command":["bash","-lc","nl -ba src/lib.rs | sed -n '80,120p'"]}`, "", true,
		fileRead{file: "src/lib.rs", first: 80, numbered: true}},
	{"codex exec_command cmd in a workdir", "-", "exec_command", `{"cmd":"sed -n '1,80p' src/lib.rs","workdir":"/repo"}`, "", true,
		fileRead{file: "/repo/src/lib.rs", first: 1}},
	{"an argv without a shell", "-", "shell", `{"command":["cat","go.mod"]}`, "", true, fileRead{file: "go.mod", first: 1}},
	{"cat | grep is a search", "-", "bash", "", "cat f | grep x", false, fileRead{}},
	{"a read then ls", "-", "bash", "", "cat f; ls", false, fileRead{}},
	{"stdout to stderr writes nothing", "-", "bash", "", "cat f >&2", false, fileRead{}},
	{"cat of stdin", "-", "bash", "", "cat", false, fileRead{}},
	{"cat of a here-document", "-", "bash", "", "cat <<EOF\nhello\nEOF", false, fileRead{}},
	{"a loop", "-", "bash", "", "for f in *.py; do cat $f; done", false, fileRead{}},
	{"an unclosed quote", "-", "bash", "", "cat 'a.py", false, fileRead{}},
	{"python printing a file", "-", "bash", "", `python -c "print(open('f').read())"`, false, fileRead{}},
	{"git show is not in the read list", "-", "bash", "", "git show HEAD:a.go", false, fileRead{}},
	{"a tool that is no shell", "-", "grep", "", "cat a.py", false, fileRead{}},
	{"arguments that are not JSON", "-", "bash", "cat a.py", "", false, fileRead{}},

	// sed, awk, tail, bat, pagers.
	{"sed -n one line", "-", "bash", "", "sed -n 10p a.py", true, fileRead{file: "a.py", first: 10}},
	{"sed -n two ranges", "-", "bash", "", "sed -n '1,5p;20,25p' a.py", true, fileRead{file: "a.py"}},
	{"sed -n -e", "-", "bash", "", "sed -n -e '/a/,/b/p' a.py", true, fileRead{file: "a.py"}},
	{"sed -ne range then quit", "-", "bash", "", "sed -ne '10,20p;20q' a.py", true, fileRead{file: "a.py", first: 10}},
	{"sed Nq is head", "-", "bash", "", "sed 5q a.py", true, fileRead{file: "a.py", first: 1}},
	{"sed -n with -i edits", "-", "bash", "", "sed -n -i '10,20p' a.py", false, fileRead{}},
	{"sed s/// changes lines", "-", "bash", "", "sed 's/a/b/' a.py", false, fileRead{}},
	{"sed p without -n prints lines twice", "-", "bash", "", "sed '1,5p' a.py", false, fileRead{}},
	{"awk by line numbers", "-", "bash", "", "awk 'NR>=10 && NR<=20' a.py", true, fileRead{file: "a.py", first: 10}},
	{"awk numbering a range", "-", "bash", "", `awk 'NR==5,NR==9 {print NR": "$0}' a.py`, true, fileRead{file: "a.py", first: 5, numbered: true}},
	{"awk past a line", "-", "bash", "", "awk 'NR>3' a.py", true, fileRead{file: "a.py", first: 4}},
	{"awk printing a field", "-", "bash", "", "awk '{print $2}' a.py", false, fileRead{}},
	{"awk matching text", "-", "bash", "", "awk '/def /' a.py", false, fileRead{}},
	{"tail -n +N starts at N", "-", "bash", "", "tail -n +100 a.py | head -n 20", true, fileRead{file: "a.py", first: 100}},
	{"bat with a line range", "-", "bash", "", "bat -r 10:20 a.py", true, fileRead{file: "a.py", first: 10}},
	{"more +N", "-", "bash", "", "more +5 a.py", true, fileRead{file: "a.py", first: 5}},
	{"less", "-", "bash", "", "less a.py", true, fileRead{file: "a.py", first: 1}},
}

// TestShellReads checks shellReadTests, and that each row citing a
// trace is a call of that trace.
func TestShellReads(t *testing.T) {
	s := New(Config{})
	cited := citedCalls(t)
	for _, tt := range shellReadTests {
		args := tt.args
		if args == "" {
			args = commandArgs(tt.cmd)
		}
		if cited != nil && tt.from != "-" && !cited[tt.from+"\x00"+tt.tool+"\x00"+tt.cmd] {
			t.Errorf("%s: no call %s %q in %s", tt.rule, tt.tool, tt.cmd, tt.from)
		}
		got, read := s.shellRead(Call{Tool: tt.tool, Args: args})
		got.redo = ""
		if read != tt.read || got != tt.want {
			t.Errorf("%s (%s): %q: read %v %+v, want %v %+v", tt.rule, tt.from, args, read, got, tt.read, tt.want)
		}
	}
}

// citedCalls returns every shell call of the corpus as trace, tool and
// command joined by NULs, or nil without the corpus.
func citedCalls(t *testing.T) map[string]bool {
	if dir, _ := corpustest.Find(); dir == "" {
		return nil
	}
	calls := map[string]bool{}
	for _, o := range corpusToolOutputs(t) {
		var args struct{ Command string }
		if json.Unmarshal([]byte(o.args), &args) == nil {
			calls[o.file+"\x00"+o.tool+"\x00"+args.Command] = true
		}
	}
	return calls
}

// The read and shell lists are configurable, and ReadMaxBytes < 0 turns
// reads off.
func TestReadConfig(t *testing.T) {
	args := commandArgs("cat a.py")
	if _, ok := New(Config{ReadCommands: []string{}}).shellRead(Call{"bash", args}); ok {
		t.Error("an empty read list still found a read")
	}
	if _, ok := New(Config{ShellTools: []string{"sh_tool"}}).shellRead(Call{"sh_tool", args}); !ok {
		t.Error("a configured shell tool is not read")
	}
	if _, ok := New(Config{ReadCommands: []string{"zcat"}}).shellRead(Call{"bash", commandArgs("zcat a.gz")}); !ok {
		t.Error("a configured read command is not a read")
	}
	if sh := New(Config{ReadMaxBytes: -1}).Shape(Call{"bash", args}, "x"); sh == ShapeRead {
		t.Error("ReadMaxBytes -1 still keeps reads")
	}
}
