package squash

import "strings"

// A reader of shell command lines, just enough to tell which program writes
// a command's output: lists (; && || & newline), pipelines, subshells,
// quoting, redirections and here-documents. It never expands anything: a
// word whose value depends on the environment ($VAR, $(…), `…`, a glob) is
// marked dynamic.

// shWord is one word of a simple command.
type shWord struct {
	text    string // quotes removed
	dynamic bool   // holds an expansion or an unquoted glob: its value is not known
}

// shCmd is one simple command of a pipeline.
type shCmd struct {
	words     []shWord
	stdoutOff bool   // stdout is redirected away (> f, >> f, &> f, >&2)
	stdin     string // the file of a "< file" redirection, "" when none
	stdinSet  bool   // stdin is redirected (a file, a here-document, a here-string)
}

// shPipeline is a pipeline of one or more commands, one element of a list.
type shPipeline struct {
	cmds []shCmd
	text string // the pipeline as written, for a command that prints it again
}

// maxShellBytes bounds the command lines parsed: longer ones are not read.
const maxShellBytes = 64 << 10

// parseShell splits a command line into the pipelines of its lists, in
// order; subshells and brace groups are flattened into the list around
// them. It reports false for what it cannot read (an unclosed quote).
func parseShell(s string) ([]shPipeline, bool) {
	if len(s) > maxShellBytes {
		return nil, false
	}
	p := shParser{s: s}
	return p.parse()
}

type shParser struct {
	s         string
	i         int
	list      []shPipeline
	pl        shPipeline
	cur       shCmd
	plStart   int
	heredocs  []heredoc // pending, read at the next newline
	curActive bool      // cur has a word or a redirection
}

type heredoc struct {
	delim     string
	stripTabs bool
}

func (p *shParser) parse() ([]shPipeline, bool) {
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			p.i++
		case c == '\\' && p.i+1 < len(p.s) && p.s[p.i+1] == '\n':
			p.i += 2
		case c == '\n':
			p.endPipeline(p.i)
			p.i++
			p.skipHeredocs()
			p.plStart = p.i
		case c == ';' || c == '(' || c == ')':
			p.endPipeline(p.i)
			p.i++
			p.plStart = p.i
		case c == '&' || c == '|':
			if !p.operator(c) {
				return nil, false
			}
		case c == '#':
			for p.i < len(p.s) && p.s[p.i] != '\n' {
				p.i++
			}
		case c == '<' || c == '>' || c >= '0' && c <= '9' && p.fdRedirect():
			if !p.redirect() {
				return nil, false
			}
		default:
			w, ok := p.word()
			if !ok {
				return nil, false
			}
			if len(p.cur.words) == 0 && !w.dynamic && (w.text == "{" || w.text == "}" || w.text == "!") {
				continue // group and negation words change no output
			}
			p.cur.words = append(p.cur.words, w)
			p.curActive = true
		}
	}
	p.endPipeline(len(p.s))
	return p.list, true
}

// operator reads an operator starting with & or |.
func (p *shParser) operator(c byte) bool {
	next := byte(0)
	if p.i+1 < len(p.s) {
		next = p.s[p.i+1]
	}
	switch {
	case c == '&' && next == '>':
		return p.redirect()
	case c == next: // && or ||
		p.endPipeline(p.i)
		p.i += 2
	case c == '|': // | or |&
		p.endCmd()
		p.i++
		if next == '&' {
			p.i++
		}
		return true
	default: // & (background)
		p.endPipeline(p.i)
		p.i++
	}
	p.plStart = p.i
	return true
}

func (p *shParser) endCmd() {
	if p.curActive {
		p.pl.cmds = append(p.pl.cmds, p.cur)
	}
	p.cur, p.curActive = shCmd{}, false
}

func (p *shParser) endPipeline(end int) {
	p.endCmd()
	if len(p.pl.cmds) > 0 {
		p.pl.text = strings.TrimSpace(p.s[p.plStart:end])
		p.list = append(p.list, p.pl)
	}
	p.pl = shPipeline{}
}

// fdRedirect reports whether the digits at p.i are a file descriptor
// number directly followed by a redirection operator (2>, 1>>).
func (p *shParser) fdRedirect() bool {
	if p.i > 0 && !strings.ContainsRune(" \t\n;&|()", rune(p.s[p.i-1])) {
		return false // part of a word
	}
	j := p.i
	for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
		j++
	}
	return j < len(p.s) && (p.s[j] == '<' || p.s[j] == '>')
}

// redirect reads a redirection and its target, and records what it does to
// stdin and stdout.
func (p *shParser) redirect() bool {
	fd := -1
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		fd = max(fd, 0)*10 + int(p.s[p.i]-'0')
		if fd > 1000 {
			fd = 1000
		}
		p.i++
	}
	op := ""
	for _, o := range [...]string{"&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", "<", ">>", ">|", ">&", ">"} {
		if strings.HasPrefix(p.s[p.i:], o) {
			op = o
			break
		}
	}
	p.i += len(op)
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
	target, ok := p.word()
	if !ok {
		return false
	}
	p.curActive = true
	out := fd == -1 || fd == 1
	switch op {
	case "&>", "&>>":
		p.cur.stdoutOff = true
	case ">", ">>", ">|":
		if out {
			p.cur.stdoutOff = true
		}
	case ">&":
		if out && target.text != "1" {
			p.cur.stdoutOff = true
		}
	case "<":
		if fd == -1 || fd == 0 {
			p.cur.stdin, p.cur.stdinSet = target.text, true
			if target.dynamic {
				p.cur.stdin = ""
			}
		}
	case "<<", "<<-":
		p.cur.stdin, p.cur.stdinSet = "", true
		p.heredocs = append(p.heredocs, heredoc{delim: target.text, stripTabs: op == "<<-"})
	case "<<<":
		p.cur.stdin, p.cur.stdinSet = "", true
	}
	return true
}

// skipHeredocs moves past the bodies of the here-documents opened on the
// line just ended.
func (p *shParser) skipHeredocs() {
	for _, h := range p.heredocs {
		for p.i < len(p.s) {
			end := strings.IndexByte(p.s[p.i:], '\n')
			line := p.s[p.i:]
			if end >= 0 {
				line = p.s[p.i : p.i+end]
				p.i += end + 1
			} else {
				p.i = len(p.s)
			}
			if h.stripTabs {
				line = strings.TrimLeft(line, "\t")
			}
			if strings.TrimSuffix(line, "\r") == h.delim {
				break
			}
		}
	}
	p.heredocs = p.heredocs[:0]
}

// word reads one word, removing quotes. It reports false on an unclosed
// quote or substitution.
func (p *shParser) word() (shWord, bool) {
	var b strings.Builder
	var w shWord
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch c {
		case ' ', '\t', '\r', '\n', ';', '&', '|', '(', ')', '<', '>':
			w.text = b.String()
			return w, true
		case '\'':
			end := strings.IndexByte(p.s[p.i+1:], '\'')
			if end < 0 {
				return w, false
			}
			b.WriteString(p.s[p.i+1 : p.i+1+end])
			p.i += end + 2
		case '"':
			if !p.doubleQuoted(&b, &w) {
				return w, false
			}
		case '\\':
			if p.i+1 < len(p.s) && p.s[p.i+1] != '\n' {
				b.WriteByte(p.s[p.i+1])
			}
			p.i = min(p.i+2, len(p.s))
		case '$', '`':
			w.dynamic = true
			if !p.expansion(&b) {
				return w, false
			}
		case '*', '?', '[':
			w.dynamic = true
			b.WriteByte(c)
			p.i++
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	w.text = b.String()
	return w, true
}

// doubleQuoted reads a "…" string at p.i into b.
func (p *shParser) doubleQuoted(b *strings.Builder, w *shWord) bool {
	p.i++
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return true
		case c == '\\' && p.i+1 < len(p.s) && strings.IndexByte("$`\"\\\n", p.s[p.i+1]) >= 0:
			if p.s[p.i+1] != '\n' {
				b.WriteByte(p.s[p.i+1])
			}
			p.i += 2
		case c == '$' || c == '`':
			w.dynamic = true
			if !p.expansion(b) {
				return false
			}
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	return false
}

// expansion copies a $name, ${…}, $(…), $'…' or `…` at p.i into b as
// written (its value is unknown).
func (p *shParser) expansion(b *strings.Builder) bool {
	start := p.i
	if p.s[p.i] == '`' {
		end := strings.IndexByte(p.s[p.i+1:], '`')
		if end < 0 {
			return false
		}
		p.i += end + 2
		b.WriteString(p.s[start:p.i])
		return true
	}
	p.i++ // the '$'
	if p.i >= len(p.s) {
		b.WriteByte('$')
		return true
	}
	switch p.s[p.i] {
	case '(', '{':
		if !p.balanced(p.s[p.i]) {
			return false
		}
	case '\'':
		end := strings.IndexByte(p.s[p.i+1:], '\'')
		if end < 0 {
			return false
		}
		p.i += end + 2
	default:
		for p.i < len(p.s) && (isWordByte(p.s[p.i]) || p.i == start+1 && strings.IndexByte("@*#?$!-", p.s[p.i]) >= 0) {
			p.i++
		}
	}
	b.WriteString(p.s[start:p.i])
	return true
}

// balanced moves past a (…) or {…} group opening at p.i, skipping quoted
// text inside it.
func (p *shParser) balanced(open byte) bool {
	closer := byte(')')
	if open == '{' {
		closer = '}'
	}
	depth := 0
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch c {
		case open:
			depth++
		case closer:
			depth--
			if depth == 0 {
				p.i++
				return true
			}
		case '\'', '"':
			end := strings.IndexByte(p.s[p.i+1:], c)
			if end < 0 {
				return false
			}
			p.i += end + 1
		case '\\':
			p.i++
		}
		p.i++
	}
	return false
}
