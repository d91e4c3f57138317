package squash

import (
	"encoding/json"
	"io"
	"strings"
)

// queryCommands only look at the files they are given and print what they
// found: searches, listings and counts. With the read commands they make a
// shell call read-only (ReadOnlyCall).
var queryCommands = map[string]bool{
	"grep": true, "egrep": true, "fgrep": true, "rg": true, "ag": true, "ack": true,
	"ls": true, "tree": true, "find": true, "fd": true, "wc": true, "file": true, "stat": true,
	"du": true, "sort": true, "uniq": true, "cut": true, "tr": true, "diff": true, "cmp": true,
	"which": true, "type": true, "realpath": true, "readlink": true, "basename": true, "dirname": true,
}

// findActions make find change or run things.
var findActions = []string{"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprintf", "-fls"}

// gitQueries are git's subcommands that only read the repository.
var gitQueries = map[string]bool{
	"diff": true, "log": true, "show": true, "status": true, "blame": true, "grep": true,
	"ls-files": true, "ls-tree": true, "rev-parse": true, "describe": true, "shortlog": true, "cat-file": true,
}

// ReadOnlyCall reports whether c is a shell call whose command only looks:
// every command it runs is a read (cat, head, sed -n …p, …:
// Config.ReadCommands), a search (grep, rg), a listing (ls, find, tree), a
// count or filter of those (wc, sort), one of git's read-only subcommands
// (diff, log, show, status, …), cd, echo or an assignment, and none of its
// output goes to a file. Run again on the same files it prints the same
// thing, so a later identical call supersedes an earlier one's result.
func (s *Squasher) ReadOnlyCall(c Call) bool {
	_, ok := s.queryCall(c)
	return ok
}

// searchCall reports whether c is a search: a shell call that only looks
// (ReadOnlyCall) and runs a search (grep, rg, ag, ack, git grep), alone or
// filtered (grep -r x src | grep -v test | head): its output lines are the
// matches the agent asked for.
func (s *Squasher) searchCall(c Call) bool {
	q, ok := s.queryCall(c)
	return ok && q.searches > 0
}

// queryCall scans c's command as ReadOnlyCall does, and reports whether it
// only looks.
func (s *Squasher) queryCall(c Call) (queryScan, bool) {
	q := queryScan{rs: readScan{reads: s.reads}}
	if _, ok := s.shell[c.Tool]; !ok || c.Args == "" {
		return q, false
	}
	script, argv, _, ok := shellCommand(c.Args)
	if !ok {
		return q, false
	}
	if argv != nil {
		words := make([]shWord, len(argv))
		for i, a := range argv {
			words[i] = shWord{text: a}
		}
		return q, q.cmd(shCmd{words: words}, 0)
	}
	ok = q.script(script, 0)
	return q, ok
}

// searchCommands are the query commands that print the lines matching a
// pattern.
var searchCommands = map[string]bool{"grep": true, "egrep": true, "fgrep": true, "rg": true, "ag": true, "ack": true}

// queryScan checks that every command of a script only looks, and counts
// the searches among them.
type queryScan struct {
	rs       readScan
	searches int
}

func (q *queryScan) script(script string, depth int) bool {
	pls, ok := parseShell(script)
	if !ok || len(pls) == 0 {
		return false
	}
	for _, pl := range pls {
		for _, cmd := range pl.cmds {
			if !q.cmd(cmd, depth) {
				return false
			}
		}
	}
	return true
}

func (q *queryScan) cmd(cmd shCmd, depth int) bool {
	name, args, ok := unwrap(cmd.words)
	switch {
	case !ok || cmd.stdoutOff:
		return false // unknown, or writes a file
	case name == "" || name == "cd" || name == "pushd" || name == "popd" || name == "echo" ||
		name == "printf" || name == "pwd" || name == "true":
		return true
	case isShellName(name):
		script, ok := shellScript(args)
		return ok && depth < maxShellDepth && q.script(script, depth+1)
	case name == "git":
		if gitSubcommand(args) == "grep" {
			q.searches++
		}
		return gitQuery(args)
	case name == "find":
		for _, a := range args {
			if contains(findActions, a.text) {
				return false
			}
		}
		return true
	case queryCommands[name]:
		if searchCommands[name] {
			q.searches++
		}
		return true
	}
	_, ok = q.rs.stage(name, args)
	return ok
}

// gitQuery reports whether git's arguments name a read-only subcommand
// (global options such as -C dir and --no-pager before it).
func gitQuery(args []shWord) bool {
	return gitQueries[gitSubcommand(args)]
}

// gitSubcommand returns the subcommand git's arguments name, after global
// options; "" when none.
func gitSubcommand(args []shWord) string {
	for i := 0; i < len(args); i++ {
		t := args[i].text
		switch {
		case t == "-C" || t == "-c" || t == "--git-dir" || t == "--work-tree":
			i++
		case strings.HasPrefix(t, "-"):
		default:
			return t
		}
	}
	return ""
}

// execOutputMark ends the run details a coding agent's exec tool puts
// before the command's own output: codex's exec_command ("Chunk ID:
// …\nWall time: …\nProcess exited with code 0\nOriginal token count:
// 59\nOutput:\n") and its apply_patch and older shell ("Exit code:
// 0\nWall time: 0 seconds\nOutput:\n").
const execOutputMark = "\nOutput:\n"

// maxRunDetails bounds the run details before execOutputMark: a mark
// further in is the command's own output.
const maxRunDetails = 512

// CommandOutput returns what the command printed in a tool output that
// wraps it in run details, which differ on every run of the same command:
// codex's "Chunk ID: …", "Wall time: …" lines before "Output:", or older
// codex's JSON {"output":"…","metadata":{"exit_code":0,"duration_seconds":0.1}}.
// Any other output is returned as it is. Two runs that printed the same
// thing have equal CommandOutputs.
func CommandOutput(output string) string {
	if strings.HasPrefix(output, `{"output":`) {
		if printed, ok := jsonExecOutput(output); ok {
			return printed
		}
		return output
	}
	i := strings.Index(output[:min(len(output), maxRunDetails+len(execOutputMark))], execOutputMark)
	if i < 0 {
		return output
	}
	head := output[:i]
	if !strings.HasPrefix(head, "Chunk ID: ") && !strings.HasPrefix(head, "Exit code: ") ||
		!strings.Contains(head, "\nWall time: ") {
		return output
	}
	return output[i+len(execOutputMark):]
}

// jsonExecOutput reads older codex's exec output, a JSON object of exactly
// "output" (a string) and "metadata" (exit_code, duration_seconds), as its
// shell tool serialised it; false for anything else.
func jsonExecOutput(s string) (string, bool) {
	var v struct {
		Output   *string `json:"output"`
		Metadata *struct {
			ExitCode        *int     `json:"exit_code"`
			DurationSeconds *float64 `json:"duration_seconds"`
		} `json:"metadata"`
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if dec.Decode(&v) != nil || v.Output == nil || v.Metadata == nil || v.Metadata.ExitCode == nil {
		return "", false
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", false // something after the object
	}
	return *v.Output, true
}
