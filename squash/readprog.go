package squash

import (
	"strconv"
	"strings"
)

// readStage is what one read program in a pipeline does to its input (a
// file, or the pipe): it prints lines of it unchanged, maybe numbered.
type readStage struct {
	files   []string // file operands; empty when it reads stdin
	dynamic bool     // some file operand's name is not known ($F, *.py)
	first   int      // input line number of its first output line, when its output is consecutive input lines; else 0
	numbers bool     // prefixes each line with its input line number
}

// after is what is known of a pipeline's output once this stage filters
// in, the output of the stages before it.
func (st readStage) after(in fileRead) fileRead {
	out := in
	if st.numbers {
		out.numbered = in.first == 1 && in.file != "" // it counts the pipe's lines
	}
	if in.first > 0 && st.first > 0 {
		out.first = in.first + st.first - 1
	} else {
		out.first = 0
	}
	return out
}

// readRule reports whether a read program, given args, prints lines of its
// input unchanged (sed -i, sed 's/…/', awk '{print $2}' do not), and how.
type readRule func(args []shWord) (readStage, bool)

var readRules = map[string]readRule{
	"cat": catRule, "head": headRule, "tail": tailRule, "nl": nlRule,
	"sed": sedRule, "awk": awkRule, "gawk": awkRule, "mawk": awkRule, "nawk": awkRule,
	"bat": batRule, "batcat": batRule, "less": lessRule, "more": moreRule,
}

// opt is one option of a command line, with its value.
type opt struct {
	name    string // "n" for -n, "lines" for --lines
	value   string
	dynamic bool
}

// scanOpts splits args as getopt does: clustered short options (-ba),
// values attached or in the next word (-n5, -n 5, --lines=5, --lines 5),
// "--" ending the options, a lone "-" an operand. shortValue lists the
// short options that take a value, longValue the long ones.
func scanOpts(args []shWord, shortValue string, longValue ...string) (opts []opt, operands []shWord) {
	for i := 0; i < len(args); i++ {
		w := args[i]
		t := w.text
		switch {
		case t == "--":
			return opts, append(operands, args[i+1:]...)
		case strings.HasPrefix(t, "--"):
			name, value, has := strings.Cut(t[2:], "=")
			if !has && contains(longValue, name) && i+1 < len(args) {
				i++
				value, w.dynamic = args[i].text, args[i].dynamic
			}
			opts = append(opts, opt{name: name, value: value, dynamic: w.dynamic})
		case len(t) > 1 && t[0] == '-':
			if isDigits(t[1:]) { // head -50, tail -20
				opts = append(opts, opt{name: "#", value: t[1:]})
				continue
			}
			for k := 1; k < len(t); k++ {
				name := t[k : k+1]
				if strings.IndexByte(shortValue, t[k]) < 0 {
					opts = append(opts, opt{name: name})
					continue
				}
				value, dyn := t[k+1:], false
				if value == "" && i+1 < len(args) {
					i++
					value, dyn = args[i].text, args[i].dynamic
				}
				opts = append(opts, opt{name: name, value: value, dynamic: dyn})
				break
			}
		default:
			operands = append(operands, w)
		}
	}
	return opts, operands
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// withFiles fills st's files from operands ("-" is stdin).
func withFiles(st readStage, operands []shWord) readStage {
	for _, w := range operands {
		switch {
		case w.dynamic:
			st.dynamic = true
		case w.text != "-":
			st.files = append(st.files, w.text)
		}
	}
	return st
}

// plainReadRule is the rule of a read command without one of its own:
// options are skipped, operands are files, the output is theirs whole.
func plainReadRule(args []shWord) (readStage, bool) {
	_, operands := scanOpts(args, "")
	return withFiles(readStage{first: 1}, operands), true
}

// catRule: cat [-nbsAETv] FILE…; -n and -b number lines, -s drops some.
func catRule(args []shWord) (readStage, bool) {
	opts, operands := scanOpts(args, "")
	st := readStage{first: 1}
	for _, o := range opts {
		switch o.name {
		case "n", "number":
			st.numbers = true
		case "b", "number-nonblank":
			st.numbers = true // blank lines are not numbered, but still counted
		case "s", "squeeze-blank":
			st.first, st.numbers = 0, false
		}
	}
	return withFiles(st, operands), true
}

// headRule: head [-n N | -N | -c N] FILE… prints from the first line.
func headRule(args []shWord) (readStage, bool) {
	_, operands := scanOpts(args, "nc", "lines", "bytes")
	st := withFiles(readStage{first: 1}, operands)
	if len(st.files) > 1 {
		st.first = 0 // "==> f <==" headers between the files
	}
	return st, true
}

// tailRule: tail [-n N | -n +N | -N | -f] FILE…; only -n +N says where the
// output starts.
func tailRule(args []shWord) (readStage, bool) {
	opts, operands := scanOpts(args, "ncs", "lines", "bytes", "pid", "sleep-interval", "max-unchanged-stats")
	st := readStage{}
	for _, o := range opts {
		if (o.name == "n" || o.name == "lines") && strings.HasPrefix(o.value, "+") {
			if n, err := strconv.Atoi(o.value[1:]); err == nil && n >= 0 {
				st.first = max(n, 1)
			}
		}
	}
	var files []shWord
	for _, w := range operands {
		if n, err := strconv.Atoi(strings.TrimPrefix(w.text, "+")); err == nil && strings.HasPrefix(w.text, "+") {
			st.first = max(n, 1) // tail +N, the old form
			continue
		}
		files = append(files, w)
	}
	st = withFiles(st, files)
	if len(st.files) > 1 {
		st.first = 0
	}
	return st, true
}

// nlRule: nl [-ba] [-w N] [-s SEP] FILE… numbers lines from 1 by 1, unless
// -v, -i or -b n say otherwise.
func nlRule(args []shWord) (readStage, bool) {
	opts, operands := scanOpts(args, "bdfhilnsvw", "body-numbering", "section-delimiter", "footer-numbering",
		"header-numbering", "line-increment", "join-blank-lines", "number-format", "number-separator",
		"starting-line-number", "number-width")
	st := readStage{first: 1, numbers: true}
	for _, o := range opts {
		switch o.name {
		case "v", "starting-line-number", "i", "line-increment":
			st.numbers = o.value == "1"
		case "b", "body-numbering":
			st.numbers = st.numbers && o.value != "n"
		case "p", "no-renumber", "d", "section-delimiter":
			st.numbers = false // sections renumber, or may
		}
	}
	return withFiles(st, operands), true
}

// batRule: bat [-r A:B] FILE…; plain (cat-like) when not on a terminal.
func batRule(args []shWord) (readStage, bool) {
	opts, operands := scanOpts(args, "lrHm", "language", "highlight-line", "line-range", "style", "theme",
		"tabs", "wrap", "terminal-width", "color", "italic-text", "decorations", "paging", "pager",
		"map-syntax", "file-name", "diff-context", "ignored-suffix", "squeeze-limit")
	st := readStage{first: 1}
	ranges := 0
	for _, o := range opts {
		if o.name != "r" && o.name != "line-range" {
			continue
		}
		ranges++
		a, _, _ := strings.Cut(o.value, ":")
		n, err := strconv.Atoi(a)
		switch {
		case a == "":
			st.first = 1
		case err == nil && n > 0:
			st.first = n
		default:
			st.first = 0
		}
	}
	if ranges > 1 {
		st.first = 0
	}
	return withFiles(st, operands), true
}

// lessRule: less FILE (a pager writes the file as it is when its output is
// not a terminal); +cmd moves the start somewhere unknown.
func lessRule(args []shWord) (readStage, bool) {
	return pagerRule(args, "bhjkoOpPtTxyz")
}

// moreRule: more [+N] FILE.
func moreRule(args []shWord) (readStage, bool) {
	return pagerRule(args, "n")
}

func pagerRule(args []shWord, shortValue string) (readStage, bool) {
	_, operands := scanOpts(args, shortValue)
	st := readStage{first: 1}
	var files []shWord
	for _, w := range operands {
		if !strings.HasPrefix(w.text, "+") {
			files = append(files, w)
			continue
		}
		st.first = 0
		if n, err := strconv.Atoi(w.text[1:]); err == nil && n > 0 {
			st.first = n
		}
	}
	return withFiles(st, files), true
}
