package squash

import (
	"encoding/json"
	"path"
	"strings"
)

// DefaultShellTools are the tools that run a shell command, named in their
// arguments as "command" or "cmd", a string or an argv array: Claude Code
// and Amp (Bash), opencode, SWE-agent and mini-swe-agent (bash), codex
// (shell, local_shell, exec_command), OpenHands (execute_bash, terminal),
// Gemini CLI and qwen-code (run_shell_command), Cursor (run_terminal_cmd),
// Cline and Roo (execute_command), Copilot (run_in_terminal), Continue
// (run_terminal_command), Windsurf (run_command).
var DefaultShellTools = []string{
	"bash", "Bash", "shell", "Shell", "local_shell", "exec_command", "execute_bash", "terminal",
	"run_shell_command", "run_terminal_cmd", "run_terminal_command", "run_in_terminal",
	"execute_command", "run_command", "shell_command",
}

// DefaultReadCommands are the programs whose output is the content of the
// file they are given: a shell call whose output comes from them is a read.
// sed counts only when it prints lines (sed -n '10,40p', never sed -i),
// awk only when it prints whole lines ('NR>=10 && NR<=40', '{print NR": "$0}').
var DefaultReadCommands = []string{"cat", "head", "tail", "sed", "nl", "awk", "bat", "batcat", "less", "more"}

// fileRead is what a shell command that prints a file says about its
// output, for a marker that names the lines it leaves out.
type fileRead struct {
	file     string // the one file printed, as a path to pass back; "" when unknown or several
	first    int    // the file's line number of the output's first line; 0 when unknown
	numbered bool   // every output line starts with its line number in file (cat -n, nl, awk NR)
	redo     string // a command that prints the same output again; "" when none is known
}

// shellRead reports whether call ran a shell command whose output is the
// content of files (a read), and what it says about that output. A list
// (cd x && cat f; echo ---; cat g) is a read when every part of it that
// writes output is a read or an echo, and at least one is a read.
func (s *Squasher) shellRead(c Call) (fileRead, bool) {
	if _, ok := s.shell[c.Tool]; !ok || c.Args == "" || len(s.reads) == 0 {
		return fileRead{}, false
	}
	script, argv, dir, ok := shellCommand(c.Args)
	if !ok {
		return fileRead{}, false
	}
	rs := readScan{reads: s.reads, dir: dir, dirKnown: true}
	if argv != nil {
		ok = rs.argv(argv)
	} else {
		var pls []shPipeline
		pls, ok = parseShell(script)
		ok = ok && rs.list(pls, 0)
	}
	switch {
	case !ok || len(rs.found) == 0:
		return fileRead{}, false
	case len(rs.found) > 1 || rs.echoes > 0:
		return fileRead{}, true // lines of several outputs: no file, no numbers
	}
	return rs.found[0], true
}

// shellCommand finds the command in a shell tool's arguments: a script
// ("command": "cat f") or an argv array ("command": ["bash","-lc","cat f"]),
// and the directory it runs in, when the call names one.
func shellCommand(args string) (script string, argv []string, dir string, ok bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &m) != nil {
		return "", nil, "", false
	}
	for _, k := range [...]string{"workdir", "cwd"} {
		if json.Unmarshal(m[k], &dir) == nil {
			break
		}
	}
	for _, k := range [...]string{"command", "cmd"} {
		raw, found := m[k]
		if !found {
			continue
		}
		if json.Unmarshal(raw, &script) == nil {
			return script, nil, dir, true
		}
		if json.Unmarshal(raw, &argv) == nil && len(argv) > 0 {
			return "", argv, dir, true
		}
		return "", nil, "", false
	}
	return "", nil, "", false
}

// readScan walks a command list in order, following cd.
type readScan struct {
	reads    map[string]struct{}
	dir      string // where the commands run, relative to the agent's directory
	dirKnown bool   // false after a cd to somewhere unknown (cd -, cd $X)
	found    []fileRead
	echoes   int // echo, printf, pwd: output that is no file's but does not spoil a read
}

// maxShellDepth bounds bash -c 'bash -c "…"' nesting.
const maxShellDepth = 3

// silentCommands write nothing to stdout when they work.
var silentCommands = map[string]bool{
	"export": true, "unset": true, "set": true, "source": true, ".": true, "true": true, ":": true,
	"umask": true, "ulimit": true, "shopt": true, "alias": true, "sleep": true, "wait": true,
	"mkdir": true, "touch": true, "rm": true, "cp": true, "mv": true, "chmod": true, "ln": true,
}

func (rs *readScan) list(pls []shPipeline, depth int) bool {
	for _, pl := range pls {
		if !rs.pipeline(pl, depth) {
			return false
		}
	}
	return true
}

// argv handles a command given as an argv array: no shell reads it.
func (rs *readScan) argv(argv []string) bool {
	words := make([]shWord, len(argv))
	for i, a := range argv {
		words[i] = shWord{text: a}
	}
	return rs.pipeline(shPipeline{cmds: []shCmd{{words: words}}, text: joinArgv(argv)}, 0)
}

// pipeline reports whether pl's output (its last command's) is a read, an
// echo or nothing, and records what it found.
func (rs *readScan) pipeline(pl shPipeline, depth int) bool {
	if len(pl.cmds) == 1 {
		return rs.simple(pl, depth)
	}
	if pl.cmds[len(pl.cmds)-1].stdoutOff {
		return true // the output goes to a file
	}
	var fr fileRead
	for k, cmd := range pl.cmds {
		name, args, ok := unwrap(cmd.words)
		if !ok || cmd.stdoutOff && k < len(pl.cmds)-1 {
			return false
		}
		st, ok := rs.stage(name, args)
		if !ok {
			return false
		}
		if k == 0 {
			if fr, ok = rs.source(st, cmd); !ok {
				return false
			}
			continue
		}
		if len(st.files) > 0 || st.dynamic || cmd.stdinSet {
			return false // a later stage reads something else than the pipe
		}
		fr = st.after(fr)
	}
	fr.redo = rs.redo(pl.text)
	rs.found = append(rs.found, fr)
	return true
}

// simple handles a pipeline of one command.
func (rs *readScan) simple(pl shPipeline, depth int) bool {
	cmd := pl.cmds[0]
	name, args, ok := unwrap(cmd.words)
	switch {
	case !ok:
		return false
	case name == "":
		return true // assignments only
	case name == "cd":
		rs.cd(args)
		return true
	case isShellName(name):
		script, ok := shellScript(args)
		if !ok || depth >= maxShellDepth {
			return false
		}
		if cmd.stdoutOff {
			return true
		}
		pls, ok := parseShell(script)
		dir, known := rs.dir, rs.dirKnown
		ok = ok && rs.list(pls, depth+1)
		rs.dir, rs.dirKnown = dir, known // a child shell's cd stays in it
		return ok
	case cmd.stdoutOff || silentCommands[name]:
		return true
	case name == "echo" || name == "printf" || name == "pwd" || name == "pushd" || name == "popd":
		rs.echoes++
		return true
	}
	st, ok := rs.stage(name, args)
	if !ok {
		return false
	}
	fr, ok := rs.source(st, cmd)
	if !ok {
		return false
	}
	fr.redo = rs.redo(pl.text)
	rs.found = append(rs.found, fr)
	return true
}

// stage applies the read rule of program name, if it is a read command.
func (rs *readScan) stage(name string, args []shWord) (readStage, bool) {
	if _, ok := rs.reads[name]; !ok {
		return readStage{}, false
	}
	rule := readRules[name]
	if rule == nil {
		rule = plainReadRule
	}
	return rule(args)
}

// source turns the first stage of a read into what is known of its output:
// it must read a file, named as an operand or by "< file".
func (rs *readScan) source(st readStage, cmd shCmd) (fileRead, bool) {
	files := st.files
	if cmd.stdinSet {
		if len(files) > 0 || cmd.stdin == "" {
			return fileRead{}, false // a here-document is not a file
		}
		files = []string{cmd.stdin}
	}
	if len(files) == 0 && !st.dynamic {
		return fileRead{}, false // reads stdin: the agent's own text, or nothing
	}
	fr := fileRead{first: st.first, numbered: st.numbers}
	if len(files) != 1 || st.dynamic {
		return fileRead{}, true // several files: lines of several outputs
	}
	fr.file = rs.path(files[0])
	return fr, true
}

// path returns file as seen from the agent's directory, "" when the cd
// before it went somewhere unknown.
func (rs *readScan) path(file string) string {
	switch {
	case path.IsAbs(file):
		return file
	case !rs.dirKnown:
		return ""
	case rs.dir == "":
		return file
	}
	return path.Join(rs.dir, file)
}

// redo returns a command that prints a pipeline's output again: the
// pipeline, after a cd to where it ran.
func (rs *readScan) redo(text string) string {
	switch {
	case !rs.dirKnown || strings.ContainsAny(text, "\n"):
		return ""
	case rs.dir == "":
		return text
	}
	return "cd " + shellQuote(rs.dir) + " && " + text
}

// cd follows a cd: to a known place, or to somewhere unknown (cd, cd -,
// cd ~, cd $X).
func (rs *readScan) cd(args []shWord) {
	var target []shWord
	for _, a := range args {
		if a.text != "-L" && a.text != "-P" && a.text != "--" {
			target = append(target, a)
		}
	}
	if len(target) != 1 || target[0].dynamic || target[0].text == "-" || strings.HasPrefix(target[0].text, "~") || target[0].text == "" {
		rs.dirKnown = false
		return
	}
	d := target[0].text
	if path.IsAbs(d) || rs.dir == "" {
		rs.dir = path.Clean(d)
	} else {
		rs.dir = path.Join(rs.dir, d)
	}
}

// unwrap drops what runs a command without changing its output: leading
// assignments (A=B cmd), env, timeout, nice, nohup, time, command, exec,
// sudo, stdbuf. It returns the program's base name and its arguments; name
// is "" for a line of assignments only, and ok is false when the program is
// not known (cmd is $X).
func unwrap(words []shWord) (name string, args []shWord, ok bool) {
	i := 0
	for i < len(words) {
		w := words[i]
		if isAssignment(w.text) {
			i++
			continue
		}
		if w.dynamic {
			return "", nil, false
		}
		name = path.Base(w.text)
		skip, ok := wrapperArgs(name, words[i+1:])
		if !ok {
			return name, words[i+1:], true
		}
		i += 1 + skip
	}
	return "", nil, true
}

// wrapperArgs reports whether name is a wrapper, and how many of the words
// after it belong to it (its options, env's assignments, timeout's
// duration).
func wrapperArgs(name string, rest []shWord) (int, bool) {
	value := "" // short options that take a value
	positional := 0
	switch name {
	case "env":
		value = "uSCP"
	case "timeout":
		value, positional = "sk", 1
	case "nice":
		value = "n"
	case "sudo":
		value = "ugUChpDrt"
	case "stdbuf":
		value = "oei"
	case "nohup", "time", "command", "exec", "builtin", "noglob":
	default:
		return 0, false
	}
	i := 0
	for i < len(rest) {
		t := rest[i].text
		switch {
		case t == "--":
			return i + 1 + positional, true
		case strings.HasPrefix(t, "--"):
			i++
		case len(t) > 1 && t[0] == '-':
			i++
			if strings.IndexByte(value, t[len(t)-1]) >= 0 && !(name == "nice" && len(t) > 2) {
				i++ // -n 5, -u root
			}
		case name == "env" && isAssignment(t):
			i++
		default:
			return min(i+positional, len(rest)), true
		}
	}
	return len(rest), true
}

// isAssignment reports whether a word is NAME=value.
func isAssignment(t string) bool {
	eq := strings.IndexByte(t, '=')
	if eq <= 0 || t[0] >= '0' && t[0] <= '9' {
		return false
	}
	for i := 0; i < eq; i++ {
		if !isWordByte(t[i]) {
			return false
		}
	}
	return true
}

func isShellName(name string) bool {
	switch name {
	case "bash", "sh", "zsh", "dash", "ksh", "ash":
		return true
	}
	return false
}

// shellScript returns the script of bash -c SCRIPT (also -lc, -ec, -o
// pipefail -c); ok is false for a script file or stdin.
func shellScript(args []shWord) (string, bool) {
	cflag := false
	for i := 0; i < len(args); i++ {
		t := args[i].text
		switch {
		case t == "-o" || t == "+o":
			i++
		case strings.HasPrefix(t, "--"):
		case len(t) > 1 && (t[0] == '-' || t[0] == '+'):
			cflag = cflag || strings.IndexByte(t, 'c') > 0
		default:
			return t, cflag && !args[i].dynamic
		}
	}
	return "", false
}

// joinArgv renders an argv array as a shell command line.
func joinArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// shellQuote returns s as one shell word: as it is when that is safe,
// else in single quotes.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	for i := 0; i < len(s); i++ {
		if !isWordByte(s[i]) && strings.IndexByte("/.-_+,:=@%", s[i]) < 0 {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
