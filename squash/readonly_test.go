package squash

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestReadOnlyCall(t *testing.T) {
	sq := New(Config{})
	for _, tc := range []struct {
		tool, cmd string
		want      bool
	}{
		{"exec_command", "cat a.py", true},
		{"exec_command", "sed -n 1,5p b.py", true},
		{"exec_command", "grep -n def a.py b.py", true},
		{"exec_command", "rg -n 'fn main' src | head -20", true},
		{"exec_command", "ls -la", true},
		{"exec_command", "cd pkg && git diff HEAD~1 -- a.go", true},
		{"exec_command", "git -C repo log --oneline", true},
		{"exec_command", "find . -name '*.go' | wc -l", true},
		{"bash", "bash -lc 'cat go.mod; echo ---; ls'", true},
		{"shell", "nl -ba server.go | sed -n '10,40p'", true},
		{"exec_command", "sed -i 's/a/b/' a.py", false},
		{"exec_command", "cat a.py > b.py", false},
		{"exec_command", "go test ./...", false},
		{"exec_command", "git commit -am x", false},
		{"exec_command", "git checkout main", false},
		{"exec_command", "find . -name '*.pyc' -delete", false},
		{"exec_command", "python reproduce.py", false},
		{"exec_command", "cat a.py | tee b.py", false},
		{"exec_command", "$EDITOR a.py", false},
		{"read_file", "cat a.py", false}, // not a shell tool: its own rules apply
	} {
		args, _ := json.Marshal(map[string]string{"cmd": tc.cmd})
		if got := sq.ReadOnlyCall(Call{Tool: tc.tool, Args: string(args)}); got != tc.want {
			t.Errorf("ReadOnlyCall(%s %q) = %v, want %v", tc.tool, tc.cmd, got, tc.want)
		}
	}
	argv, _ := json.Marshal(map[string][]string{"command": {"bash", "-lc", "git status --short"}})
	if !sq.ReadOnlyCall(Call{Tool: "shell", Args: string(argv)}) {
		t.Error("an argv array running git status is read-only")
	}
	// codex's own argument shapes, as it sends them.
	for _, tc := range []struct {
		name string
		call Call
		want bool
	}{
		{"exec_command (0.171) with its workdir and yield time", Call{Tool: "exec_command",
			Args: `{"cmd":"sed -n 1,40p a.py","workdir":"/repo","yield_time_ms":10000}`}, true},
		{"the older shell tool's argv", Call{Tool: "shell",
			Args: `{"command":["bash","-lc","rg -n def"],"workdir":"/repo","timeout_ms":10000}`}, true},
		{"a local_shell_call's action", Call{Tool: "local_shell",
			Args: `{"type":"exec","command":["bash","-lc","cat a.py"],"timeout_ms":null,"working_directory":null,"env":{},"user":null}`}, true},
		{"a local_shell_call that writes", Call{Tool: "local_shell",
			Args: `{"type":"exec","command":["bash","-lc","sed -i s/f/g/ a.py"],"env":{}}`}, false},
		{"apply_patch is not a shell tool", Call{Tool: "apply_patch", Args: "*** Begin Patch\n*** End Patch"}, false},
	} {
		if got := sq.ReadOnlyCall(tc.call); got != tc.want {
			t.Errorf("%s: ReadOnlyCall = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCommandOutput(t *testing.T) {
	for in, want := range map[string]string{
		"Chunk ID: 6160ec\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 12\nOutput:\ndef f():\n    return 1\n": "def f():\n    return 1\n",
		"Chunk ID: 1\nWall time: 2.1 seconds\nProcess exited with code 0\nOriginal token count: 0\nOutput:\n":                                  "",
		"Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nA c.py\n":                                         "Success. Updated the following files:\nA c.py\n",
		`{"output":"def f():\n    return 1\n","metadata":{"exit_code":0,"duration_seconds":0.1}}`:                                              "def f():\n    return 1\n",
		`{"output":"No such file\n","metadata":{"exit_code":1,"duration_seconds":0.0}}`:                                                        "No such file\n",
		`{"output":"x","metadata":{"exit_code":0,"duration_seconds":0.1},"more":1}`:                                                            `{"output":"x","metadata":{"exit_code":0,"duration_seconds":0.1},"more":1}`,
		`{"output":"x","metadata":{"exit_code":0}} trailing`:                                                                                   `{"output":"x","metadata":{"exit_code":0}} trailing`,
		`{"output":"a tool's own JSON, no metadata"}`:                                                                                          `{"output":"a tool's own JSON, no metadata"}`,
		"total 20\nOutput:\nnot a header\n":                                                                                                    "total 20\nOutput:\nnot a header\n",
		"plain output with no run details\n":                                                                                                   "plain output with no run details\n",
	} {
		if got := CommandOutput(in); got != want {
			t.Errorf("CommandOutput(%q) = %q, want %q", in, got, want)
		}
	}
}

// A search's matches come back whole up to 4 KiB, whatever their shape; a
// listing, a read-write command or a larger search is squashed by shape.
func TestSearchKeepsItsMatches(t *testing.T) {
	sq := New(Config{})
	var matches strings.Builder
	for i := 0; i < 60; i++ {
		fmt.Fprintf(&matches, "%d:        conn.create_function(\"fn_%d\", 2, _impl)\n", 100+i, i)
	}
	out := matches.String()
	for _, tc := range []struct {
		cmd  string
		want Shape
	}{
		{"grep -n create_function base.py", ShapeSearch},
		{"cd /repo && grep -rn create_function src | grep -v test | head -60", ShapeSearch},
		{"rg -n create_function", ShapeSearch},
		{"git --no-pager grep -n create_function", ShapeSearch},
		{"ls -R", ShapeGeneric},
		{"python run.py | grep create_function", ShapeGeneric},
		{"git log -n 60", ShapeGeneric},
	} {
		args, _ := json.Marshal(map[string]string{"command": tc.cmd})
		c := Call{Tool: "bash", Args: string(args)}
		r := sq.ApplyCall(c, out)
		if got := sq.Shape(c, out); got != tc.want {
			t.Errorf("%q: shape %s, want %s", tc.cmd, got, tc.want)
		}
		if whole := tc.want == ShapeSearch; whole != (r.Text == out) {
			t.Errorf("%q: kept whole %v, want %v", tc.cmd, r.Text == out, whole)
		}
	}
	big := strings.Repeat(out, 3) // over 4 KiB
	args, _ := json.Marshal(map[string]string{"command": "grep -rn create_function ."})
	if got := sq.Shape(Call{Tool: "bash", Args: string(args)}, big); got == ShapeSearch {
		t.Errorf("a %d-byte search: shape %s, want its own shape", len(big), got)
	}
}
