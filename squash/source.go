package squash

import "strings"

// Source code by shape. A file's content reaches an agent through many
// tools besides the shell reads and the exempt read tools (git show,
// python -c 'print(inspect.getsource(f))', an MCP server's fetch), and a
// squashed one is as useless: the agent edits by exact match. Detect calls
// a text source when most of its lines end or begin the way code does, some
// begin with a keyword, many are indented, and almost none are what logs,
// test runs, tracebacks and diffs print.

// sourceKeywords are the first words of code lines in common languages.
var sourceKeywords = map[string]bool{
	"def": true, "class": true, "import": true, "from": true, "return": true, "if": true, "elif": true,
	"else": true, "for": true, "while": true, "try": true, "except": true, "finally": true, "with": true,
	"raise": true, "yield": true, "async": true, "await": true, "pass": true, "break": true,
	"continue": true, "lambda": true, "assert": true, "global": true, "del": true,
	"func": true, "package": true, "type": true, "var": true, "const": true, "let": true, "fn": true,
	"pub": true, "use": true, "mod": true, "impl": true, "struct": true, "enum": true, "trait": true,
	"match": true, "public": true, "private": true, "protected": true, "static": true, "final": true,
	"void": true, "int": true, "char": true, "namespace": true, "template": true, "using": true,
	"interface": true, "export": true, "module": true, "function": true, "switch": true, "case": true,
	"default": true, "do": true, "then": true, "fi": true, "end": true, "local": true, "go": true,
	"defer": true, "select": true, "throw": true, "new": true, "#include": true, "#define": true,
	"long": true, "unsigned": true, "double": true, "float": true, "bool": true, "goto": true, "typedef": true,
	"#if": true, "#ifdef": true, "#ifndef": true, "#endif": true, "require": true,
}

// sourceMinLines is the fewest non-blank lines judged: a short text is no
// clear shape.
const sourceMinLines = 8

// isSource implements the source rule of Detect on classified lines:
// at least 8 non-blank lines, of which 60% look like code (docstrings and
// block comments count as code), 5% start with a keyword and 20% are
// indented, while under 5% are log, test-runner, traceback or compiler
// lines and under 20% diff lines. A test run or build transcript (one
// runner line) is never source: it shows code, it is not code.
func (tl *textLines) isSource() bool {
	nonBlank := 0
	for _, li := range tl.infos {
		if !li.blank {
			nonBlank++
		}
	}
	if nonBlank < sourceMinLines {
		return false
	}
	numbered := tl.numberedListing()
	var lines, code, inDoc, beforeFence, keyword, indented, noise, diff int
	// Inside a docstring or not, read both as if the text started outside
	// one and as if it started inside one (a sed -n range can): the second
	// reading counts the lines before its first fence only once one is seen.
	doc := [2]bool{false, true}
	fenced := false
	for i, li := range tl.infos {
		if li.runner {
			return false
		}
		if li.blank {
			continue
		}
		lines++
		if li.leveled || li.frame || li.summary || li.failTest || li.diag || li.cls >= clsWarn {
			if noise++; 20*noise >= nonBlank {
				return false // a log: no need to read on
			}
		}
		l := tl.line(i)
		if numbered {
			l = dropLineNumber(l)
		}
		t := strings.TrimSpace(l)
		if t == "" {
			continue
		}
		if l[0] == ' ' || l[0] == '\t' {
			indented++
		}
		if l[0] == '+' || l[0] == '-' || strings.HasPrefix(l, "@@ ") || strings.HasPrefix(l, "diff --git") {
			diff++
		}
		isCode, isKeyword := codeLine(t)
		fence := docFences(t)
		switch {
		case isCode || doc[0] || fence:
			code++
		}
		switch {
		case isCode || fence || doc[1] && fenced:
			inDoc++
		case doc[1]:
			beforeFence++
		}
		if fence {
			doc[0], doc[1], fenced = !doc[0], !doc[1], true
		}
		if isKeyword {
			keyword++
		}
	}
	if fenced {
		code = max(code, inDoc+beforeFence)
	}
	// Few keywords are fine when nearly every line is code and most are
	// indented: decompiled C names its types undefined8 and basic_string.
	// None is not: pretty-printed JSON ends its lines in , { and } too.
	keywords := 20*keyword >= lines || keyword > 0 && 5*code >= 4*lines && 2*indented >= lines
	return lines >= sourceMinLines && 10*code >= 6*lines && keywords && 5*indented >= lines &&
		20*noise < lines && 5*diff < lines
}

// docFences reports whether a line opens or closes a docstring or block
// comment (an odd number of """, or one of /* and */ without the other).
func docFences(t string) bool {
	if strings.Count(t, `"""`)%2 == 1 || strings.Count(t, "'''")%2 == 1 {
		return true
	}
	return strings.Contains(t, "/*") != strings.Contains(t, "*/")
}

// codeLine reports whether a trimmed line looks like code, and whether it
// starts with a keyword.
func codeLine(t string) (code, keyword bool) {
	w := t
	if i := strings.IndexAny(w, " \t(:{<"); i >= 0 {
		w = w[:i]
	}
	if sourceKeywords[w] {
		return true, true
	}
	switch {
	case strings.HasPrefix(t, "#"), strings.HasPrefix(t, "//"), strings.HasPrefix(t, "/*"),
		strings.HasPrefix(t, "*"), strings.HasPrefix(t, `"""`), strings.HasPrefix(t, "'''"):
		return true, false // comments and docstring fences
	case t[0] == '@' && len(t) > 1 && isWordByte(t[1]):
		return true, false // decorators, annotations
	case t[0] == '[' && t[len(t)-1] == ']', t[0] == '(' && t[len(t)-1] == ')':
		return false, false // a bracketed note: "[File: a.py (12 lines)]", "(3 more lines)"
	case strings.IndexByte("{}[]();:,\\", t[len(t)-1]) >= 0:
		return true, false
	}
	return isAssignmentLine(t), false
}

// isAssignmentLine reports whether t starts with "name = ", "a.b += ",
// "x[i] = " or "name := ".
func isAssignmentLine(t string) bool {
	i := 0
	for i < len(t) && (isWordByte(t[i]) || strings.IndexByte(".[]'\"", t[i]) >= 0) {
		i++
	}
	if i == 0 {
		return false
	}
	rest := strings.TrimLeft(t[i:], " ")
	for _, op := range [...]string{"= ", ":= ", "+= ", "-= ", "|= ", "*= "} {
		if strings.HasPrefix(rest, op) {
			return true
		}
	}
	return false
}

// numberedListing reports whether half the non-blank lines or more start
// with a line number (cat -n, nl, SWE-agent's "12:" viewer, OpenHands'
// "12|").
func (tl *textLines) numberedListing() bool {
	lines, numbered := 0, 0
	for i, li := range tl.infos {
		if li.blank {
			continue
		}
		lines++
		if _, ok := leadingNumber(tl.line(i)); ok {
			numbered++
		}
	}
	return lines > 0 && 2*numbered >= lines
}

// dropLineNumber removes a listing's line number and its separator.
func dropLineNumber(l string) string {
	i := skipBlanks(l, 0)
	_, j := digitsAt(l, i)
	if j < len(l) && strings.IndexByte("\t:|", l[j]) >= 0 {
		j++
	} else if j < len(l) && l[j] == ' ' {
		j++
	}
	if j < len(l) && l[j] == ' ' && l[j-1] == ':' {
		j++
	}
	return l[j:]
}
