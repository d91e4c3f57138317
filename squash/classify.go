package squash

import "strings"

// lineClass is the severity of one line of text.
type lineClass uint8

const (
	clsPlain lineClass = iota // no level field, no error or warning shape
	clsDebug
	clsInfo
	clsWarn
	clsError
)

// lineInfo is what classify learns about one line.
type lineInfo struct {
	cls      lineClass
	leveled  bool // the class came from a level field, not from a shape
	frame    bool // a stack frame (Java/JS "at ...", Python File "...", Go)
	summary  bool // a run summary: "3 failed, 10 passed", "BUILD FAILED", ...
	failTest bool // names a failing test; kept verbatim, never collapsed
	diag     bool // compiler diagnostic "path:line:col: ..."; kept verbatim
	runner   bool // a line only a test runner or build tool prints
	blank    bool // empty or only whitespace
}

// maxHeaderTokens bounds where a level field may appear: loghub's widest
// header (BGL) puts it in the 9th field.
const (
	maxHeaderTokens = 12
	maxHeaderBytes  = 256
)

// classify looks at one line (without its newline). A level field in the
// line header decides the class on its own; the word "error" inside a message
// does not (Zookeeper prints it in hundreds of INFO lines). Lines without a
// level are classified by the shapes that errors, warnings, stack frames and
// runner summaries have.
func classify(line string) lineInfo {
	var li lineInfo
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	cls, found, msg := scanLevel(line)
	t := trimBlank(line)
	if found {
		li.cls, li.leveled = cls, true
		// Build tools print their verdict under a level ("[INFO] BUILD SUCCESS").
		m := trimBlank(line[msg:])
		if strongSummary(m) {
			li.summary, li.runner = true, true
		}
		return li
	}
	if strings.TrimRight(t, " \t") == "" {
		li.blank = true
		return li
	}
	if isFrame(line, t) {
		li.frame = true
		return li
	}
	li.cls, li.failTest, li.diag = shapeClass(t)
	if li.cls == clsPlain && msg > 0 && msg < len(line) {
		li.cls, li.failTest, li.diag = shapeClass(trimBlank(line[msg:]))
	}
	li.runner = runnerLine(t)
	li.summary = strongSummary(t) || countSummary(t)
	return li
}

// scanLevel looks for a level field among the first header tokens of line.
// It stops after the first token ending in ':' (the end of a header such as
// "sshd[24200]:" or "WindowManager:"): what follows is the message, where a
// level word is just a word. msg is the offset just after that token.
func scanLevel(line string) (cls lineClass, found bool, msg int) {
	lim := len(line)
	if lim > maxHeaderBytes {
		lim = maxHeaderBytes
	}
	i := 0
	prevNum := false
	for tok := 0; tok < maxHeaderTokens; tok++ {
		for i < lim && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i >= lim {
			break
		}
		j := i
		for j < lim && line[j] != ' ' && line[j] != '\t' {
			j++
		}
		t := line[i:j]
		// Column-aligned levels ("Info                  CBS") are followed
		// by a run of spaces or a tab.
		wide := j+1 < len(line) && (line[j] == '\t' || line[j] == ' ' && line[j+1] == ' ')
		if c, ok := levelToken(t, tok == 0, prevNum, wide); ok {
			return c, true, j
		}
		if len(t) > 1 && t[len(t)-1] == ':' {
			return clsPlain, false, j
		}
		prevNum = isDigits(t)
		i = j
	}
	return clsPlain, false, 0
}

// levelToken reports whether the header token t is a level field.
func levelToken(t string, first, prevNum, wide bool) (lineClass, bool) {
	if len(t) == 0 {
		return 0, false
	}
	// One-letter levels: logcat "pid tid E Tag:", logcat brief "E/Tag(12):",
	// glog "E0317 16:13:38".
	if len(t) == 1 && prevNum {
		return letterLevel(t[0])
	}
	if first && len(t) > 2 && t[1] == '/' {
		return letterLevel(t[0])
	}
	if first && len(t) == 5 && isDigits(t[1:]) {
		return letterLevel(t[0])
	}
	switch t[0] {
	case '[', '<':
		// "[error]", "[INFO]", "<warn>": any case counts when bracketed.
		end := strings.IndexAny(t, "]>")
		if end > 1 {
			return wordLevel(t[1:end], true)
		}
		return 0, false
	}
	if v, ok := keyedLevel(t); ok {
		return wordLevel(v, true)
	}
	w := t
	if k := strings.IndexByte(w, ':'); k > 0 {
		// "ERROR:" and Python's "WARNING:root:msg".
		w = w[:k]
	}
	c, ok := wordLevel(w, false)
	if !ok {
		return 0, false
	}
	if isUpper(w) || wide || len(w) < len(t) && w[0] >= 'A' && w[0] <= 'Z' {
		return c, true
	}
	return 0, false
}

// keyedLevel extracts v from level=v, severity=v or "level":"v".
func keyedLevel(t string) (string, bool) {
	if strings.IndexByte(t, '=') < 0 && strings.IndexByte(t, '"') < 0 {
		return "", false
	}
	for _, k := range [...]string{"level=", "lvl=", "severity=", `"level":"`, `"severity":"`, `"lvl":"`} {
		i := strings.Index(t, k)
		if i < 0 || i > 0 && k[0] != '"' && isWordByte(t[i-1]) {
			continue
		}
		v := strings.TrimLeft(t[i+len(k):], `"`)
		end := 0
		for end < len(v) && isWordByte(v[end]) {
			end++
		}
		if end > 0 {
			return v[:end], true
		}
	}
	return "", false
}

// wordLevel maps a level word to a class. Upper-case words always count;
// other spellings only when anyCase (bracketed or key=value) or, for
// capitalised words, when the caller sees a column layout.
func wordLevel(w string, anyCase bool) (lineClass, bool) {
	if len(w) < 3 || len(w) > 9 {
		return 0, false
	}
	var buf [9]byte
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf[i] = c
	}
	up := string(buf[:len(w)])
	if !anyCase && !(w[0] >= 'A' && w[0] <= 'Z') {
		return 0, false
	}
	switch up {
	case "ERROR", "ERR", "FATAL", "SEVERE", "CRITICAL", "CRIT", "PANIC", "EMERG", "EMERGENCY", "ALERT":
		if up == "ALERT" && !anyCase {
			// BGL prints "ALERT 0" inside messages; only a bracketed
			// or keyed ALERT is a syslog level.
			return 0, false
		}
		return clsError, true
	case "WARN", "WARNING":
		return clsWarn, true
	case "INFO", "NOTICE":
		return clsInfo, true
	case "DEBUG", "TRACE", "VERBOSE", "FINE", "FINER", "FINEST":
		return clsDebug, true
	}
	return 0, false
}

func letterLevel(c byte) (lineClass, bool) {
	switch c {
	case 'E', 'F', 'A':
		return clsError, true
	case 'W':
		return clsWarn, true
	case 'I':
		return clsInfo, true
	case 'D', 'V', 'T':
		return clsDebug, true
	}
	return 0, false
}

// isFrame reports whether line is a stack frame.
func isFrame(line, t string) bool {
	switch {
	case strings.HasPrefix(t, "at ") && len(t) > 4:
		// Java "at a.B.c(B.java:12)", JS "at f (x.js:1:2)" / "at x.js:1:2".
		last := t[len(t)-1]
		return last == ')' || last >= '0' && last <= '9' && strings.IndexByte(t, ':') > 0
	case strings.HasPrefix(t, `File "`):
		return strings.Contains(t, `", line `)
	case strings.HasPrefix(t, "... ") && strings.HasSuffix(t, " more"):
		return true
	case line[0] == '\t' && strings.Contains(t, ".go:"):
		return true
	case strings.HasPrefix(t, "goroutine ") && strings.HasSuffix(t, "]:"):
		return true
	}
	return false
}

// shapeClass classifies a level-less line (or message) by its shape.
func shapeClass(t string) (cls lineClass, failTest, diag bool) {
	if hasAnyPrefix(t, errorPrefixes[:]) {
		return clsError, isFailTest(t), false
	}
	if isFailTest(t) {
		return clsError, true, false
	}
	if hasAnyPrefix(t, warnPrefixes[:]) {
		return clsWarn, false, false
	}
	if d, c := diagnostic(t); d {
		return c, false, true
	}
	if typ := firstWord(t); len(typ) > 5 && (len(typ) < len(t) && t[len(typ)] == ':' || len(typ) == len(t)) {
		// Python/Java exception lines: "ValueError: x", "java.io.IOException".
		switch {
		case strings.HasSuffix(typ, "Error") || strings.HasSuffix(typ, "Exception"):
			return clsError, false, false
		case strings.HasSuffix(typ, "Warning"):
			return clsWarn, false, false
		}
	}
	if errorInfix(t) {
		return clsError, false, false
	}
	if i := strings.Index(t, ": warning"); i >= 0 && i+9 < len(t) && (t[i+9] == ':' || t[i+9] == ' ') {
		return clsWarn, false, false
	}
	return clsPlain, false, false
}

// errorInfix finds the error markers compilers and make print mid-line:
// "x.c:3:5: error:", "a.ts(1,2): error TS2345", "make[1]: ***". One pass per
// occurrence of "error" instead of one strings.Contains per pattern.
func errorInfix(t string) bool {
	for off := 0; ; {
		i := strings.Index(t[off:], "error")
		if i < 0 {
			break
		}
		i += off
		before, after := t[:i], t[i+5:]
		switch {
		case strings.HasSuffix(before, ": ") && (strings.HasPrefix(after, ":") || strings.HasPrefix(after, " ")),
			strings.HasSuffix(before, ": fatal ") && strings.HasPrefix(after, ":"),
			strings.HasSuffix(before, "): ") && strings.HasPrefix(after, " "),
			strings.HasSuffix(before, " ") && strings.HasPrefix(after, " TS"):
			return true
		}
		off = i + 5
	}
	if i := strings.Index(t, "]: ***"); i > 4 && strings.Contains(t[:i], "make[") {
		return true
	}
	return false
}

// hasAnyPrefix reports whether t starts with one of list; comparing the
// first byte inline skips most calls (classify runs on every line).
func hasAnyPrefix(t string, list []string) bool {
	if t == "" {
		return false
	}
	for _, p := range list {
		if p[0] == t[0] && strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// trimBlank drops leading spaces and tabs.
func trimBlank(s string) string {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return s[i:]
}

var errorPrefixes = [...]string{
	"error:", "error[", "Error:", "ERROR:", "ERROR ", "fatal:", "fatal error:",
	"Fatal error:", "FATAL:", "FATAL ", "panic:", "PANIC:", "Traceback (most recent call last)",
	"Exception in thread", "Caused by:", "--- FAIL", "FAIL:", "FAIL\t", "FAIL ", "FAILED",
	"npm ERR!", "make: ***", "E   ", "error TS", "Uncaught ", "Unhandled ", "Segmentation fault",
	"FAILURES!", "BUILD FAILED", "BUILD FAILURE",
}

var warnPrefixes = [...]string{
	"warning:", "warning[", "Warning:", "WARNING:", "WARN:", "WARN ", "npm WARN", "npm warn",
}

// isFailTest reports whether t names a failing test.
func isFailTest(t string) bool {
	switch {
	case strings.HasPrefix(t, "--- FAIL:"), // go test
		strings.HasPrefix(t, "FAIL: "), strings.HasPrefix(t, "ERROR: "), // unittest
		strings.HasPrefix(t, "✕ "), strings.HasPrefix(t, "✗ "), strings.HasPrefix(t, "× "), // jest, mocha
		strings.HasPrefix(t, "● "): // jest failure header
		return true
	case strings.HasPrefix(t, "FAILED ") || strings.HasPrefix(t, "ERROR "):
		return strings.Contains(t, "::") || strings.Contains(t, "test") // pytest short summary
	case strings.HasPrefix(t, "FAIL ") && len(t) > 5 && t[5] != ' ':
		return true // jest "FAIL src/a.test.js"
	case strings.HasSuffix(t, " ... FAILED"), strings.HasSuffix(t, " ... FAIL"), strings.HasSuffix(t, " ... ERROR"):
		return true // cargo test, unittest -v
	case strings.Contains(t, "::") && (strings.HasSuffix(t, " FAILED") || strings.Contains(t, " FAILED ")):
		return true // pytest -v
	}
	return false
}

// diagnostic recognises compiler output "path.ext:line:col: msg" (and Go
// test failures "x_test.go:12: msg"); grep -n output has no column, so it
// does not match.
func diagnostic(t string) (bool, lineClass) {
	sp := strings.IndexByte(t, ' ')
	if sp < 0 {
		return false, 0
	}
	tok := t[:sp]
	if len(tok) < 4 || tok[len(tok)-1] != ':' {
		return false, 0
	}
	parts := strings.Split(tok[:len(tok)-1], ":")
	nums := 0
	for k := len(parts) - 1; k > 0 && isDigits(parts[k]); k-- {
		nums++
	}
	file := strings.Join(parts[:len(parts)-nums], ":")
	if strings.IndexByte(file, '.') < 0 {
		return false, 0
	}
	rest := t[sp+1:]
	switch {
	case strings.HasPrefix(rest, "warning"):
		return nums >= 1, clsWarn
	case nums >= 2, nums == 1 && strings.HasSuffix(file, "_test.go"):
		return true, clsError
	}
	return false, 0
}

// strongSummary recognises verdict lines of test runners and build tools.
func strongSummary(t string) bool {
	switch t {
	case "PASS", "FAIL", "OK", "FAILED", "FAILURES!":
		return true
	}
	if hasAnyPrefix(t, summaryPrefixes[:]) {
		return true
	}
	// tsc "Found 3 errors.", unittest "Ran 25 tests in 0.003s".
	for _, p := range [...]string{"Found ", "Ran "} {
		if strings.HasPrefix(t, p) && len(t) > len(p) && t[len(p)] >= '0' && t[len(p)] <= '9' {
			return true
		}
	}
	if len(t) > 4 && t[0] == '=' && (strings.Contains(t, " passed") || strings.Contains(t, " failed") ||
		strings.Contains(t, " error") || strings.Contains(t, "no tests ran") || strings.Contains(t, "short test summary")) {
		return true // pytest "==== 1 failed, 2 passed in 0.1s ===="
	}
	return false
}

var summaryPrefixes = [...]string{
	"FAIL\t", "BUILD SUCCESS", "BUILD FAILURE", "BUILD FAILED", "Tests run:", "Test Suites:",
	"Tests:", "test result:", "OK (", "FAILED (", "error: could not compile", "error: aborting due to",
	"make: ***", "npm ERR! code",
}

// countSummary recognises tallies such as "3 failed, 10 passed in 0.2s" or
// "1 error generated.": two count phrases anywhere, or one that opens the
// line. A single count inside a message ("pid 445 failed to act") is not a
// summary.
func countSummary(t string) bool {
	if len(t) > 200 {
		return false // verdict lines are short; do not scan long lines for digits
	}
	lead := strings.TrimLeft(t, "=-*_ ")
	found := 0
	for i := 0; i < len(t); i++ {
		if t[i] < '0' || t[i] > '9' || i > 0 && t[i-1] >= '0' && t[i-1] <= '9' {
			continue
		}
		j := i
		for j < len(t) && t[j] >= '0' && t[j] <= '9' {
			j++
		}
		if j >= len(t) || t[j] != ' ' {
			continue
		}
		switch strings.TrimRight(firstWord(t[j+1:min(len(t), j+13)]), ",;.") {
		case "passed", "failed", "errors", "error", "warnings", "warning", "skipped",
			"failures", "xfailed", "xpassed", "deselected", "succeeded":
			if found++; found >= 2 || len(t)-i == len(lead) {
				return true
			}
		}
		i = j
	}
	return false
}

// runnerLine reports whether t is a line only a test runner or build tool
// prints; one such line makes a text a transcript.
func runnerLine(t string) bool {
	if hasAnyPrefix(t, runnerPrefixes[:]) {
		return true
	}
	return t != "" && t[0] == '=' && strings.Contains(t, "test session starts") || strings.HasPrefix(t, "ok  \t")
}

var runnerPrefixes = [...]string{
	"=== RUN", "--- PASS:", "--- FAIL:", "--- SKIP:", "FAIL\t", "Test Suites:", "test result:",
	"Compiling ", "Finished ", "BUILD SUCCESS", "BUILD FAILURE", "BUILD FAILED", "> Task :",
	"npm ERR!", "make: ***", "make[1]:", "Tests run:", "collected ", "[INFO] Building ",
}

// firstWord returns the leading run of identifier bytes and dots.
func firstWord(t string) string {
	i := 0
	for i < len(t) && (isWordByte(t[i]) || t[i] == '.') {
		i++
	}
	return t[:i]
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 'a' && s[i] <= 'z' {
			return false
		}
	}
	return true
}
