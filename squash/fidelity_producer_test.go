package squash

import (
	"encoding/json"
	"path"
	"strings"
	"testing"
)

// producer is what kind of command produced a tool output, for the
// fidelity figures by producer. It is the benchmark's own view, decided
// from the call alone, not squash's: a read squash fails to recognise still
// counts as a read here.
type producer string

// Producers, in the order the figures list them.
const (
	producerRead   producer = "read"    // a file's content: a read tool, or cat, sed, head, nl… first in a pipeline
	producerTest   producer = "test"    // a test runner: pytest, go test, runtests.py, a test_*.py script…
	producerBuild  producer = "build"   // a build, an install or a linter: make, go build, pip install, pylint…
	producerSearch producer = "search"  // grep, rg, git grep, a search tool
	producerList   producer = "listing" // ls, find, tree, git status, a listing tool
	producerDiff   producer = "diff"    // git diff, git show, diff
	producerOther  producer = "other"   // anything else: scripts, edits, web pages, decompilers…
)

var producers = []producer{producerRead, producerTest, producerBuild, producerSearch, producerList, producerDiff, producerOther}

// producerRank orders the producers of a command list's parts: the list is
// the highest-ranked kind among them (cd x && python -m pytest | tail is a
// test run, git add -A && git diff a diff, ls; cat a.py a listing).
var producerRank = map[producer]int{
	producerTest: 6, producerBuild: 5, producerOther: 4, producerDiff: 3, producerSearch: 2, producerList: 1, producerRead: 0,
}

// producerTools are the non-shell tools whose name says what they produce.
var producerTools = map[string]producer{
	"open": producerRead, "goto": producerRead, "scroll_up": producerRead, "scroll_down": producerRead,
	"read": producerRead, "read_file": producerRead, "Read": producerRead, "ReadFile": producerRead,
	"readFile": producerRead, "view": producerRead, "view_file": producerRead, "cat": producerRead,
	"fs_read": producerRead, "get_file_contents": producerRead, "NotebookRead": producerRead,
	"search_dir": producerSearch, "search_file": producerSearch, "find_file": producerSearch,
	"grep": producerSearch, "Grep": producerSearch, "search": producerSearch, "codebase_search": producerSearch,
	"file_search": producerSearch, "search_files": producerSearch, "google": producerSearch, "web_search": producerSearch,
	"ls": producerList, "LS": producerList, "list_files": producerList, "list_dir": producerList,
	"list_directory": producerList, "glob": producerList, "Glob": producerList,
}

// producerPrograms are the shell programs whose name alone says what they
// produce; producerOfProgram decides the others from their arguments.
var producerPrograms = map[string]producer{
	"cat": producerRead, "head": producerRead, "tail": producerRead, "nl": producerRead, "awk": producerRead,
	"less": producerRead, "more": producerRead, "bat": producerRead, "batcat": producerRead,
	"grep": producerSearch, "egrep": producerSearch, "fgrep": producerSearch, "rg": producerSearch,
	"ag": producerSearch, "ack": producerSearch,
	"ls": producerList, "tree": producerList, "du": producerList, "locate": producerList, "fd": producerList,
	"diff": producerDiff, "colordiff": producerDiff, "cmp": producerDiff,
	"pytest": producerTest, "py.test": producerTest, "tox": producerTest, "nox": producerTest,
	"nosetests": producerTest, "jest": producerTest, "vitest": producerTest, "mocha": producerTest,
	"ctest": producerTest, "phpunit": producerTest, "rspec": producerTest, "runtests.py": producerTest,
	"gcc": producerBuild, "g++": producerBuild, "cc": producerBuild, "clang": producerBuild,
	"javac": producerBuild, "rustc": producerBuild, "tsc": producerBuild, "cmake": producerBuild,
	"ninja": producerBuild, "pip": producerBuild, "pip3": producerBuild, "conda": producerBuild,
	"apt-get": producerBuild, "apt": producerBuild, "pylint": producerBuild, "flake8": producerBuild,
	"mypy": producerBuild, "ruff": producerBuild, "eslint": producerBuild, "golangci-lint": producerBuild,
	"make": producerBuild, "mvn": producerBuild, "gradle": producerBuild, "gradlew": producerBuild,
}

// producerSubcommands decide by the first argument: go test, cargo build…
var producerSubcommands = map[string]map[string]producer{
	"go":    {"test": producerTest, "build": producerBuild, "vet": producerBuild, "install": producerBuild, "mod": producerBuild, "generate": producerBuild},
	"cargo": {"test": producerTest, "build": producerBuild, "check": producerBuild, "clippy": producerBuild},
	"npm":   {"test": producerTest, "install": producerBuild, "ci": producerBuild, "build": producerBuild},
	"yarn":  {"test": producerTest, "install": producerBuild, "build": producerBuild},
	"pnpm":  {"test": producerTest, "install": producerBuild, "build": producerBuild},
	"make":  {"test": producerTest, "check": producerTest},
	"mvn":   {"test": producerTest, "verify": producerTest},
	"git": {"diff": producerDiff, "show": producerDiff, "format-patch": producerDiff, "grep": producerSearch,
		"ls-files": producerList, "status": producerList},
}

// quietGit are git subcommands that print little or nothing when they
// work: in a list they do not decide what produced its output.
var quietGit = map[string]bool{"add": true, "checkout": true, "reset": true, "stash": true, "commit": true,
	"apply": true, "config": true, "init": true, "rm": true, "mv": true, "restore": true, "switch": true}

// producerOf classifies the output of call: by the tool's name, or, for a
// shell tool, by the programs of its command (see producerOfScript).
func producerOf(c Call) producer {
	if p, ok := producerTools[c.Tool]; ok {
		return p
	}
	switch c.Tool {
	case "str_replace_editor", "str_replace_based_edit_tool":
		var a struct{ Command string }
		if json.Unmarshal([]byte(c.Args), &a) == nil && a.Command == "view" {
			return producerRead
		}
		return producerOther
	case "execute_ipython_cell": // OpenHands' file and search helpers are Python calls
		var a struct{ Code string }
		_ = json.Unmarshal([]byte(c.Args), &a)
		switch code := strings.TrimSpace(a.Code); {
		case strings.HasPrefix(code, "open_file("):
			return producerRead
		case strings.HasPrefix(code, "search_dir("), strings.HasPrefix(code, "search_file("), strings.HasPrefix(code, "find_file("):
			return producerSearch
		}
		return producerOther
	}
	if !containsString(DefaultShellTools, c.Tool) {
		return producerOther
	}
	script, argv, _, ok := shellCommand(c.Args)
	if !ok {
		return producerOther
	}
	if argv != nil {
		script = joinArgv(argv)
	}
	if p, found := producerOfScript(script, 0); found {
		return p
	}
	return producerOther
}

// producerOfScript classifies a command line: each pipeline that writes
// output is the kind of its first program (cat f | grep x is a read, grep
// -rn x . | head a search, pytest | tail a test run; see
// producerOfPipeline), and the list is the
// highest-ranked of them (producerRank). Pipelines whose output goes to a
// file, cd, assignments, echo and the quiet commands produce nothing; found
// is false when no part produces anything.
func producerOfScript(script string, depth int) (p producer, found bool) {
	pls, ok := parseShell(script)
	if !ok {
		return producerOther, true
	}
	for _, pl := range pls {
		if pl.cmds[len(pl.cmds)-1].stdoutOff {
			continue
		}
		q, ok := producerOfPipeline(pl, depth)
		if ok && (!found || producerRank[q] > producerRank[p]) {
			p, found = q, true
		}
	}
	return p, found
}

// producerOfPipeline classifies a pipeline by its first program that is
// not echo or printf (echo x | python is a python run), or by the program
// a later xargs runs.
func producerOfPipeline(pl shPipeline, depth int) (producer, bool) {
	for k, cmd := range pl.cmds {
		name, args, ok := unwrap(cmd.words)
		switch {
		case !ok:
			return producerOther, true
		case name == "" || name == "cd" || silentCommands[name] || name == "pwd":
			if len(pl.cmds) == 1 {
				return "", false
			}
			continue
		case (name == "echo" || name == "printf") && k < len(pl.cmds)-1:
			continue
		case name == "echo" || name == "printf":
			return "", false
		case isShellName(name):
			script, ok := shellScript(args)
			if !ok || depth >= maxShellDepth {
				return producerOther, true
			}
			return producerOfScript(script, depth+1)
		}
		program := cmd.words[len(cmd.words)-len(args)-1].text
		p, ok := producerOfProgram(name, program, args)
		for _, later := range pl.cmds[k+1:] {
			if name, args, _ := unwrap(later.words); name == "xargs" {
				p, ok = producerOfProgram(name, name, args) // find … | xargs grep: grep writes
			}
		}
		return p, ok
	}
	return "", false
}

// producerOfProgram classifies one program (its base name and the word it
// was run as) by its arguments.
func producerOfProgram(name, program string, args []shWord) (producer, bool) {
	first := ""
	for _, a := range args {
		if !strings.HasPrefix(a.text, "-") {
			first = a.text
			break
		}
	}
	if sub, ok := producerSubcommands[name]; ok {
		if p, ok := sub[first]; ok {
			return p, true
		}
		if name == "git" && quietGit[first] {
			return "", false
		}
	}
	switch name {
	case "sed":
		for _, a := range args {
			if strings.HasPrefix(a.text, "-i") || strings.HasPrefix(a.text, "--in-place") {
				return producerOther, true // an edit
			}
		}
		return producerRead, true
	case "find":
		for _, a := range args {
			if p := producerPrograms[path.Base(a.text)]; p == producerSearch {
				return producerSearch, true // find … -exec grep
			}
		}
		return producerList, true
	case "xargs":
		for i, a := range args {
			if !strings.HasPrefix(a.text, "-") {
				return producerOfProgram(path.Base(a.text), a.text, args[i+1:])
			}
		}
		return producerOther, true
	case "test":
		if strings.Contains(program, "/") {
			return producerTest, true // bin/test, not the shell's test
		}
		return "", false
	}
	if strings.HasPrefix(name, "python") {
		return producerOfPython(args), true
	}
	if p, ok := producerPrograms[name]; ok {
		return p, true
	}
	return producerOther, true
}

// producerOfPython classifies python ARGS: -m pytest or unittest is a test
// run, -m pip or setup.py a build, a script named like a test a test run.
func producerOfPython(args []shWord) producer {
	for i, a := range args {
		switch {
		case a.text == "-m" && i+1 < len(args):
			switch args[i+1].text {
			case "pytest", "unittest", "tox", "nose", "nose2":
				return producerTest
			case "pip", "build", "pylint", "flake8", "mypy":
				return producerBuild
			}
			return producerOther
		case a.text == "-c" || a.text == "-":
			return producerOther
		case strings.HasPrefix(a.text, "-"):
			continue
		}
		base := path.Base(a.text)
		switch {
		case base == "setup.py":
			return producerBuild
		case base == "runtests.py" || strings.HasPrefix(base, "test_") || strings.HasSuffix(base, "_test.py") || base == "tests.py":
			return producerTest
		}
		return producerOther
	}
	return producerOther
}

func TestProducerOf(t *testing.T) {
	tests := []struct {
		name, tool, args string
		want             producer
	}{
		{"a read tool is a read", "open", `{"path": "setup.py"}`, producerRead},
		{"str_replace_editor view is a read", "str_replace_editor", `{"command": "view", "path": "/a.py"}`, producerRead},
		{"str_replace_editor create is other", "str_replace_editor", `{"command": "create", "path": "/a.py"}`, producerOther},
		{"OpenHands open_file is a read", "execute_ipython_cell", `{"code": "open_file('/w/a.tsx')"}`, producerRead},
		{"a search tool is a search", "search_dir", `{"search_term": "x"}`, producerSearch},
		{"cat of a file is a read", "bash", `{"command": "cat src/_pytest/skipping.py"}`, producerRead},
		{"sed -n range is a read", "bash", `{"command": "sed -n '360,400p' django/utils/functional.py"}`, producerRead},
		{"nl piped to grep is a read: the lines are the file's", "bash", `{"command": "nl -ba requests/models.py | grep -C 10 \"Content-Length\""}`, producerRead},
		{"sed -i is an edit", "bash", `{"command": "sed -i 's/a/b/' x.py"}`, producerOther},
		{"grep piped to head is a search", "bash", `{"command": "grep -rn \"def factor\" sympy | head -20"}`, producerSearch},
		{"find with -exec grep is a search", "bash", `{"command": "find . -name '*.py' -exec grep -l foo {} +"}`, producerSearch},
		{"find piped to xargs grep is a search", "bash", `{"command": "find . -name '*.py' | xargs grep -l foo"}`, producerSearch},
		{"xargs runs the search", "bash", `{"command": "xargs grep -l foo < files.txt"}`, producerSearch},
		{"ls -R is a listing", "bash", `{"command": "ls -R astropy/coordinates"}`, producerList},
		{"pytest after cd, piped to tail, is a test run", "bash", `{"command": "cd /testbed && python -m pytest tests/a.py 2>&1 | tail -50"}`, producerTest},
		{"a test runner found by its path is a test run", "bash", `{"command": "./tests/runtests.py admin_inlines"}`, producerTest},
		{"sympy's bin/test is a test run", "bash", `{"command": "bin/test sympy/core/tests/test_expr.py"}`, producerTest},
		{"a test_*.py script is a test run", "bash", `{"command": "/usr/bin/python3 test_requests.py"}`, producerTest},
		{"a reproduce script is other", "bash", `{"command": "python reproduce_issue.py"}`, producerOther},
		{"a heredoc written to a file, then run, is the run", "bash", "{\"command\": \"cat <<'EOF' > r.py\\nprint(1)\\nEOF\\npython r.py\"}", producerOther},
		{"a test run after a cleanup and before a cat is a test run", "bash", `{"command": "rm -f /tmp/d.txt\npytest t.py\ncat /tmp/d.txt"}`, producerTest},
		{"git add then git diff is a diff", "bash", `{"command": "git add -A && git diff --cached"}`, producerDiff},
		{"git show is a diff", "bash", `{"command": "git show HEAD~1"}`, producerDiff},
		{"pip install is a build", "bash", `{"command": "pip install -e ."}`, producerBuild},
		{"pylint is a build (a linter)", "bash", `{"command": "pylint --recursive=y ."}`, producerBuild},
		{"go test is a test run", "bash", `{"command": "go test ./..."}`, producerTest},
		{"make html is a build, make test a test run", "bash", `{"command": "make html && make test"}`, producerTest},
		{"bash -lc wraps a search", "bash", `{"command": "bash -lc 'grep -rn foo .'"}`, producerSearch},
		{"an argv command is read like a script", "exec_command", `{"cmd": ["bash", "-lc", "cat a.go"]}`, producerRead},
		{"only echoes produce nothing: other", "bash", `{"command": "echo hi"}`, producerOther},
		{"an unknown tool is other", "decompile", `{"binary_path": "rock"}`, producerOther},
	}
	for _, tt := range tests {
		if got := producerOf(Call{Tool: tt.tool, Args: tt.args}); got != tt.want {
			t.Errorf("%s: producerOf(%s %s) = %s, want %s", tt.name, tt.tool, tt.args, got, tt.want)
		}
	}
}
