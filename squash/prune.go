package squash

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ctxpress/ctxpress/expand"
)

// MaxPruneLine bounds a pruned line (PruneLine), in bytes.
const MaxPruneLine = 300

// The end of every pruned line: it says the output is gone and how to get
// it back, so the model neither takes the line for the output nor trusts
// a memory of it.
const (
	pruneAgainShell = "[old output pruned by ctxpress; re-run to see it]"
	pruneAgainTool  = "[old output pruned by ctxpress; call the tool again to see it]"
)

// Bounds of the parts of a pruned line, in bytes, so that with the tool's
// name, the facts and the hint it stays under MaxPruneLine.
const (
	maxPruneTool    = 32
	maxPruneSubject = 90
	maxPruneError   = 110
	maxPruneSummary = 60
)

// The argument names, in order of preference, whose value says what a
// tool was asked: a path, and a pattern or query within it.
var (
	pathArgs = []string{"path", "file_path", "filePath", "filename", "file_name", "file", "absolute_path",
		"target_file", "notebook_path", "dir_path", "dir", "directory", "binary_path", "url"}
	patternArgs = []string{"pattern", "query", "regex", "search", "search_term", "q", "glob"}
)

// KeepsWhole reports whether c's output is a file's content that squash
// never changes: an exempt tool's (Config.ExemptTools), or a shell call
// that prints files while reads are kept (Config.ReadMaxBytes). Agents
// edit files by exact match against such an output, so it is not pruned
// either.
func (s *Squasher) KeepsWhole(c Call) bool {
	if _, ok := s.exempt[c.Tool]; ok {
		return true
	}
	if s.readMax <= 0 {
		return false
	}
	_, ok := s.shellRead(c)
	return ok
}

// PruneLine returns the one line that stands for an old tool output in its
// place: the tool, what it was asked (a shell command, a path, a pattern),
// the exit status the output shows, its size, its first error line (for a
// Python traceback, the exception it ends with), a test or build summary,
// and how to get the output back, e.g.
//
//	[bash] ran `go test ./...` → exit 1, 312 lines, 11.2 KB; first error: parse.go:41:2: undefined: x; summary: FAIL ./pkg [old output pruned by ctxpress; re-run to see it]
//
// It reads only c and output, so the same pair always gives the same line,
// which is one line of valid UTF-8 of at most MaxPruneLine bytes (its
// way back to the original, with Config.Ways, beyond). Nothing
// is said that the output does not show: without a printed exit status
// there is no exit status, without an error line no error.
func (s *Squasher) PruneLine(c Call, output string) string {
	shell, subject := s.pruneSubject(c)
	tool := clip(oneLine(c.Tool), maxPruneTool)
	if tool == "" {
		tool = "tool"
	}
	var b strings.Builder
	b.WriteString("[" + tool + "]")
	if subject != "" {
		b.WriteString(" " + subject)
	}
	b.WriteString(" → " + outputFacts(output))
	hint := pruneAgainTool
	switch {
	case s.ways != nil:
		hint = "[old output pruned by ctxpress; " + s.ways.Back(expand.Ref(output), expand.AllLines(output)) + "]"
	case shell:
		hint = pruneAgainShell
	}
	var errLine, summary string
	if !s.ReadOnlyCall(c) {
		// A search or listing prints what it found: an "error" line in it
		// is a match, not the command's error.
		errLine, summary = outputFindings(output)
	}
	room := MaxPruneLine - b.Len() - min(len(hint), len(pruneAgainTool)) - 1
	if errLine != "" && room > len("; first error: ")+20 {
		e := clip(errLine, min(maxPruneError, room-len("; first error: ")))
		b.WriteString("; first error: " + e)
		room -= len("; first error: ") + len(e)
	}
	if summary != "" && summary != errLine && room > len("; summary: ")+10 {
		b.WriteString("; summary: " + clip(summary, min(maxPruneSummary, room-len("; summary: "))))
	}
	b.WriteString(" " + hint)
	return b.String()
}

// pruneSubject says what c asked: "ran `command`" for a shell tool's
// command (shell true), else the path and pattern of its arguments, else
// its arguments themselves, shortened; "" when it has none.
func (s *Squasher) pruneSubject(c Call) (shell bool, subject string) {
	if _, ok := s.shell[c.Tool]; ok && c.Args != "" {
		if script, argv, _, ok := shellCommand(c.Args); ok {
			if script == "" {
				script = argvScript(argv)
			}
			return true, "ran `" + clip(oneLine(script), maxPruneSubject) + "`"
		}
	}
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(c.Args), &m) != nil || len(m) == 0 {
		return false, ""
	}
	var parts []string
	if sub := stringArg(m, "command"); sub != "" { // an editor tool's sub-command: view, create
		parts = append(parts, clip(oneLine(sub), maxPruneTool))
	}
	pattern, file := stringArg(m, patternArgs...), stringArg(m, pathArgs...)
	if pattern != "" {
		parts = append(parts, "`"+clip(oneLine(pattern), maxPruneSubject/2)+"`")
	}
	if file != "" {
		if pattern != "" {
			parts = append(parts, "in")
		}
		parts = append(parts, "`"+clipHead(oneLine(file), maxPruneSubject/2)+"`")
	}
	if len(parts) == 0 {
		return false, clip(oneLine(compactJSON(c.Args)), maxPruneSubject)
	}
	return false, strings.Join(parts, " ")
}

// argvScript is the script an argv array runs: the script of bash -lc
// SCRIPT, else the argv as a command line.
func argvScript(argv []string) string {
	if len(argv) >= 3 && isShellName(path.Base(argv[0])) && strings.HasPrefix(argv[len(argv)-2], "-") &&
		strings.Contains(argv[len(argv)-2], "c") {
		return argv[len(argv)-1]
	}
	return joinArgv(argv)
}

// stringArg returns the first of names that m holds as a non-empty string.
func stringArg(m map[string]json.RawMessage, names ...string) string {
	for _, n := range names {
		var s string
		if raw, ok := m[n]; ok && json.Unmarshal(raw, &s) == nil && strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

// compactJSON returns args without insignificant whitespace, or as it is
// when it is not JSON.
func compactJSON(args string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(args)) != nil {
		return args
	}
	return b.String()
}

// outputFacts is the exit status output shows (if any) and the size of
// what the command printed: "exit 1, 312 lines, 11.2 KB", "exit 0, no
// output".
func outputFacts(output string) string {
	var facts []string
	if code, ok := exitStatus(output); ok {
		facts = append(facts, "exit "+code)
	}
	printed := printedText(output)
	if strings.TrimSpace(printed) == "" {
		return strings.Join(append(facts, "no output"), ", ")
	}
	lines := strings.Count(printed, "\n")
	if !strings.HasSuffix(printed, "\n") {
		lines++
	}
	if lines == 1 {
		facts = append(facts, "1 line")
	} else {
		facts = append(facts, strconv.Itoa(lines)+" lines")
	}
	if n := len(printed); n >= 1024 {
		facts = append(facts, fmt.Sprintf("%.1f KB", float64(n)/1024))
	} else {
		facts = append(facts, strconv.Itoa(n)+" bytes")
	}
	return strings.Join(facts, ", ")
}

// printedText is what the command printed in output: without codex's run
// details (CommandOutput) and mini-swe-agent's return code and <output>
// tags.
func printedText(output string) string {
	out := CommandOutput(output)
	if rest, ok := strings.CutPrefix(out, "<returncode>"); ok {
		if _, after, ok := strings.Cut(rest, "</returncode>"); ok {
			out = strings.TrimPrefix(after, "\n")
			if inner, ok := strings.CutPrefix(out, "<output>\n"); ok {
				out = strings.TrimSuffix(strings.TrimSuffix(inner, "\n"), "</output>")
			}
		}
	}
	return out
}

// exitStatus returns the exit status a tool output shows, in the framing
// the agents that print one use: mini-swe-agent's
// "<returncode>N</returncode>", OpenHands' "[Command finished with exit
// code N]" (or "[The command completed with exit code N.]"), codex's
// "Process exited with code N" and "Exit code: N" run details and its older
// JSON {"metadata":{"exit_code":N}}, Claude Code's "Exit code N" first
// line, and a line that is only "exit status N" (Go's). false when output
// shows none: no status is ever guessed.
func exitStatus(output string) (string, bool) {
	if rest, ok := strings.CutPrefix(output, "<returncode>"); ok {
		if code, _, ok := strings.Cut(rest, "</returncode>"); ok && isStatus(code) {
			return code, true
		}
	}
	if strings.HasPrefix(output, `{"output":`) {
		return jsonExitCode(output)
	}
	// codex's run details, before its "Output:" line; Claude Code's first line.
	head := output[:min(len(output), maxRunDetails+len(execOutputMark))]
	if i := strings.Index(head, execOutputMark); i >= 0 {
		head = head[:i]
	} else if i := strings.IndexByte(head, '\n'); i >= 0 {
		head = head[:i]
	}
	for _, line := range strings.Split(head, "\n") {
		for _, p := range [...]string{"Process exited with code ", "Exit code: ", "Exit code "} {
			if code, ok := strings.CutPrefix(strings.TrimSpace(line), p); ok && isStatus(code) {
				return code, true
			}
		}
	}
	// OpenHands' suffix and Go's last line, among the last lines.
	tail := output[max(0, len(output)-512):]
	lines := strings.Split(strings.TrimRight(tail, "\n"), "\n")
	for k := len(lines) - 1; k >= max(0, len(lines)-4); k-- {
		t := strings.TrimSpace(lines[k])
		for _, f := range [...][2]string{{"[Command finished with exit code ", "]"}, {"[The command completed with exit code ", ".]"}, {"exit status ", ""}} {
			if code, ok := strings.CutPrefix(t, f[0]); ok {
				if code, ok = strings.CutSuffix(code, f[1]); ok && isStatus(code) {
					return code, true
				}
			}
		}
	}
	return "", false
}

// isStatus reports whether s is an exit status: an integer of a few digits.
func isStatus(s string) bool {
	d := strings.TrimPrefix(s, "-")
	return len(d) > 0 && len(d) <= 4 && isDigits(d)
}

// jsonExitCode reads the exit code of older codex's exec output (see
// jsonExecOutput).
func jsonExitCode(s string) (string, bool) {
	if _, ok := jsonExecOutput(s); !ok {
		return "", false
	}
	var v struct {
		Metadata struct {
			ExitCode int `json:"exit_code"`
		} `json:"metadata"`
	}
	if json.Unmarshal([]byte(s), &v) != nil {
		return "", false
	}
	return strconv.Itoa(v.Metadata.ExitCode), true
}

// outputFindings returns output's first error line (for a traceback, the
// exception line that ends it and the chain it heads) and its last test or
// build summary line, each on one line; "" when there is none. The lines
// of a diff's hunks are what a file says, not what the command did: they
// are not read.
func outputFindings(output string) (errLine, summary string) {
	lines := strings.Split(CommandOutput(output), "\n")
	hunk := false
	for k := 0; k < len(lines); k++ {
		line := strings.TrimRight(lines[k], "\r")
		switch {
		case strings.HasPrefix(line, "@@ "):
			hunk = true
			continue
		case hunk && line != "" && strings.IndexByte("+- \\", line[0]) >= 0:
			continue
		}
		hunk = false
		t := trimBlank(line)
		if errLine == "" && strings.Contains(t, "Traceback (most recent call last)") {
			if exc, end := tracebackException(lines, k+1); exc != "" {
				errLine, k = exc, end
				continue
			}
		}
		li := classify(line)
		switch {
		case li.summary && t != "":
			summary = t
		case errLine == "" && li.cls == clsError && !li.frame:
			errLine = t
		}
	}
	return oneLine(errLine), oneLine(strings.Trim(summary, "=-* "))
}

// tracebackException returns the exception line a Python traceback whose
// frames start at lines[from] ends with, following "During handling of
// the above exception" and "The above exception was the direct cause" to
// the last exception of the chain, and the index of that line; "" when the
// traceback ends without one.
func tracebackException(lines []string, from int) (exc string, at int) {
	for k := from; k < len(lines); k++ {
		line := strings.TrimRight(lines[k], "\r")
		if line == "" || line[0] == ' ' || line[0] == '\t' || strings.HasPrefix(line, "Traceback (most recent call last)") {
			continue
		}
		if !exceptionLine(line) {
			continue // a line another stream printed among the frames
		}
		exc, at = line, k
		next := k + 1
		for next < len(lines) && strings.TrimSpace(lines[next]) == "" {
			next++
		}
		if next < len(lines) && (strings.HasPrefix(lines[next], "During handling of the above exception") ||
			strings.HasPrefix(lines[next], "The above exception was the direct cause")) {
			continue // a chained exception follows: its last one is the error
		}
		return exc, at
	}
	return exc, at
}

// exceptionLine reports whether line is how Python prints an exception:
// "ValueError: msg", "pkg.mod.CustomError", "KeyboardInterrupt".
func exceptionLine(line string) bool {
	name := firstWord(line)
	if name == "" || len(name) < len(line) && line[len(name)] != ':' {
		return false
	}
	base := name[strings.LastIndexByte(name, '.')+1:]
	for _, suffix := range [...]string{"Error", "Exception", "Exit", "Interrupt", "Warning", "Failure", "Iteration", "Fault"} {
		if strings.HasSuffix(base, suffix) {
			return true
		}
	}
	return strings.Contains(name, ".") && base != "" && base[0] >= 'A' && base[0] <= 'Z'
}

// oneLine returns s with every run of white space (newlines included) and
// control characters made one space, trimmed.
func oneLine(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if r == ' ' || r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029' || r == utf8.RuneError {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// clip returns s cut to at most n bytes on a rune boundary, an ellipsis
// at the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n-len("…"), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// clipHead is clip keeping the end of s (a path's file name matters more
// than its first directories).
func clipHead(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := len(s) - max(n-len("…"), 0)
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return "…" + s[cut:]
}
