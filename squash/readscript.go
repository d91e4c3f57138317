package squash

import (
	"strconv"
	"strings"
)

// sedRule: sed -n 'A,Bp' FILE, with -e, several p commands and q, or
// sed 'Nq' FILE. sed -i edits files, sed -f runs a script file, sed
// 's/…/…/' changes lines: none of them is a read.
func sedRule(args []shWord) (readStage, bool) {
	quiet := false
	var scripts, operands []shWord
	for i := 0; i < len(args); i++ {
		w, t := args[i], args[i].text
		switch {
		case t == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(t, "--"):
			name, value, has := strings.Cut(t[2:], "=")
			switch name {
			case "quiet", "silent":
				quiet = true
			case "in-place", "file", "null-data", "zero-terminated":
				return readStage{}, false
			case "expression", "line-length":
				dyn := w.dynamic
				if !has {
					if i++; i >= len(args) {
						return readStage{}, false
					}
					value, dyn = args[i].text, args[i].dynamic
				}
				if name == "expression" {
					scripts = append(scripts, shWord{text: value, dynamic: dyn})
				}
			}
		case len(t) > 1 && t[0] == '-':
			for k := 1; k < len(t); k++ {
				switch t[k] {
				case 'n':
					quiet = true
				case 'i', 'f', 'z':
					return readStage{}, false
				case 'e', 'l':
					value, dyn := t[k+1:], w.dynamic
					if value == "" {
						if i++; i >= len(args) {
							return readStage{}, false
						}
						value, dyn = args[i].text, args[i].dynamic
					}
					if t[k] == 'e' {
						scripts = append(scripts, shWord{text: value, dynamic: dyn})
					}
					k = len(t)
				}
			}
		default:
			operands = append(operands, w)
		}
	}
	if len(scripts) == 0 {
		if len(operands) == 0 {
			return readStage{}, false
		}
		scripts, operands = operands[:1], operands[1:]
	}
	texts := make([]string, len(scripts))
	for i, s := range scripts {
		if s.dynamic {
			return readStage{}, false
		}
		texts[i] = s.text
	}
	first, ok := sedPrints(strings.Join(texts, "\n"), quiet)
	if !ok {
		return readStage{}, false
	}
	return withFiles(readStage{first: first}, operands), true
}

// sedAddr is one sed address: kind 0 (none), 'n' (line n), '$' (last
// line), '/' (a regex), '~' (first~step or addr,~N), '+' (addr,+N).
type sedAddr struct {
	kind byte
	n    int
}

// sedPrints reports whether a sed script prints lines of its input
// unchanged: with -n (quiet) only p, q and Q commands, at least one p;
// without it only q, Q and d. first is the input line its output starts
// at, when the output is consecutive lines from there (one p whose first
// address is a line number, or no d); else 0.
func sedPrints(s string, quiet bool) (first int, ok bool) {
	prints, deletes, groups := 0, 0, 0
	i := 0
	for {
		for i < len(s) && strings.IndexByte(" \t\r\n;}", s[i]) >= 0 {
			i++
		}
		if i >= len(s) {
			break
		}
		a1, ok := sedAddress(s, &i, false)
		var a2 sedAddr
		if ok && a1.kind != 0 && i < len(s) && s[i] == ',' {
			i++
			a2, ok = sedAddress(s, &i, true)
			ok = ok && a2.kind != 0
		}
		if !ok {
			return 0, false
		}
		i = skipBlanks(s, i)
		neg := i < len(s) && s[i] == '!'
		if neg {
			i = skipBlanks(s, i+1)
		}
		if i >= len(s) {
			return 0, false
		}
		c := s[i]
		switch c {
		case 'p':
			if prints++; prints == 1 {
				first = sedFirst(a1, neg)
			}
		case 'q', 'Q':
			for i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' {
				i++
			}
		case 'd':
			deletes++
		case '{':
			groups++
		default:
			return 0, false
		}
		i = skipBlanks(s, i+1)
		if c != '{' && i < len(s) && strings.IndexByte(";\r\n}", s[i]) < 0 {
			return 0, false // a command with arguments (s/…/, w file) or two without a separator
		}
	}
	switch {
	case quiet && (prints == 0 || deletes > 0):
		return 0, false
	case quiet && (prints > 1 || groups > 0):
		return 0, true
	case quiet:
		return first, true
	case prints > 0:
		return 0, false // without -n, p prints lines twice
	case deletes > 0 || groups > 0:
		return 0, true
	}
	return 1, true
}

// sedFirst is where the lines a p command prints start, when they are
// consecutive: from its first address, a line number.
func sedFirst(a1 sedAddr, neg bool) int {
	switch {
	case neg:
		return 0
	case a1.kind == 0:
		return 1
	case a1.kind == 'n':
		return max(a1.n, 1) // 0,/re/ starts at line 1
	}
	return 0
}

// sedAddress reads an address at s[*i], if any; second allows the forms
// only a second address has (+N, ~N).
func sedAddress(s string, i *int, second bool) (sedAddr, bool) {
	j := *i
	if j >= len(s) {
		return sedAddr{}, true
	}
	switch c := s[j]; {
	case c >= '0' && c <= '9':
		n, k := digitsAt(s, j)
		a := sedAddr{kind: 'n', n: n}
		if k < len(s) && s[k] == '~' && !second {
			_, k = digitsAt(s, k+1)
			a.kind = '~'
		}
		*i = k
		return a, true
	case c == '$':
		*i = j + 1
		return sedAddr{kind: '$'}, true
	case second && (c == '+' || c == '~'):
		n, k := digitsAt(s, j+1)
		if k == j+1 {
			return sedAddr{}, false
		}
		*i = k
		return sedAddr{kind: c, n: n}, true
	case c == '/' || c == '\\':
		delim, k := byte('/'), j+1
		if c == '\\' {
			if k >= len(s) {
				return sedAddr{}, false
			}
			delim, k = s[k], k+1
		}
		for ; k < len(s) && s[k] != delim; k++ {
			if s[k] == '\\' {
				k++
			}
		}
		if k >= len(s) {
			return sedAddr{}, false
		}
		k++
		for k < len(s) && (s[k] == 'I' || s[k] == 'M') {
			k++
		}
		*i = k
		return sedAddr{kind: '/'}, true
	}
	return sedAddr{}, true
}

// digitsAt reads the decimal number at s[j:] (capped, never overflowing)
// and returns it with the offset after it.
func digitsAt(s string, j int) (int, int) {
	n := 0
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		n = min(n*10+int(s[j]-'0'), 1<<30)
		j++
	}
	return n, j
}

func skipBlanks(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// awkRule: awk 'NR>=10 && NR<=40' FILE, awk '{print NR": "$0}' FILE: a
// program that prints whole lines, chosen by line number only. Printing
// fields (awk '{print $2}') or matching text (awk '/re/') is not a read.
func awkRule(args []shWord) (readStage, bool) {
	opts, operands := scanOpts(args, "Fvfe", "field-separator", "assign", "file", "source", "exec")
	for _, o := range opts {
		switch o.name {
		case "f", "e", "file", "source", "exec":
			return readStage{}, false
		}
	}
	if len(operands) == 0 || operands[0].dynamic {
		return readStage{}, false
	}
	first, numbers, ok := awkPrints(operands[0].text)
	if !ok {
		return readStage{}, false
	}
	var files []shWord
	for _, w := range operands[1:] {
		if !isAssignment(w.text) { // var=value operands are not files
			files = append(files, w)
		}
	}
	return withFiles(readStage{first: first, numbers: numbers}, files), true
}

// awkRuleText is one pattern { action } of an awk program.
type awkRuleText struct {
	pattern, action string
	hasAction       bool
}

// awkPrints reports whether an awk program prints whole input lines chosen
// by NR alone, whether it prefixes them with NR, and the line its output
// starts at (0 when not known).
func awkPrints(prog string) (first int, numbers, ok bool) {
	rules, ok := splitAwk(prog)
	if !ok || len(rules) == 0 {
		return 0, false, false
	}
	printing := 0
	for _, r := range rules {
		pat := strings.TrimSpace(r.pattern)
		if !awkLinePattern(pat) {
			return 0, false, false
		}
		prints, num := true, false
		if r.hasAction {
			if prints, num, ok = awkAction(r.action); !ok {
				return 0, false, false
			}
		}
		if prints {
			printing++
			numbers = numbers || num
			first = awkLower(pat)
		}
	}
	switch printing {
	case 0:
		return 0, false, false
	case 1:
		return first, numbers, true
	}
	return 0, numbers, true
}

// splitAwk splits an awk program into its rules.
func splitAwk(prog string) ([]awkRuleText, bool) {
	var rules []awkRuleText
	var cur awkRuleText
	start := 0
	for i := 0; i < len(prog); i++ {
		switch prog[i] {
		case ';', '\n':
			if p := strings.TrimSpace(prog[start:i]); p != "" {
				rules = append(rules, awkRuleText{pattern: p})
			}
			start = i + 1
		case '{':
			cur.pattern = prog[start:i]
			end, ok := awkBlockEnd(prog, i)
			if !ok {
				return nil, false
			}
			cur.action, cur.hasAction = prog[i+1:end], true
			rules = append(rules, cur)
			cur = awkRuleText{}
			i, start = end, end+1
		case '"', '/':
			return nil, false // strings and regexes belong in actions, not in line-number patterns
		}
	}
	if p := strings.TrimSpace(prog[start:]); p != "" {
		rules = append(rules, awkRuleText{pattern: p})
	}
	return rules, true
}

// awkBlockEnd returns the index of the '}' closing the block at prog[open].
func awkBlockEnd(prog string, open int) (int, bool) {
	depth := 0
	for i := open; i < len(prog); i++ {
		switch prog[i] {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return i, true
			}
		case '"':
			for i++; i < len(prog) && prog[i] != '"'; i++ {
				if prog[i] == '\\' {
					i++
				}
			}
		}
	}
	return 0, false
}

// awkLinePattern reports whether pat selects lines by NR or FNR only
// (comparisons, &&, ||, !, ranges), or is empty.
func awkLinePattern(pat string) bool {
	for i := 0; i < len(pat); {
		switch {
		case strings.HasPrefix(pat[i:], "FNR"):
			i += 3
		case strings.HasPrefix(pat[i:], "NR"):
			i += 2
		case pat[i] >= '0' && pat[i] <= '9' || strings.IndexByte(" \t=<>!&|(),", pat[i]) >= 0:
			i++
		default:
			return false
		}
	}
	return true
}

// awkLower is the first line a line-number pattern selects, when it selects
// consecutive lines: the largest lower bound of a conjunction of
// comparisons (before a range's comma). 0 when not known.
func awkLower(pat string) int {
	if pat == "" {
		return 1
	}
	if strings.Contains(pat, "||") || strings.Contains(pat, "!") {
		return 0
	}
	pat, _, _ = strings.Cut(pat, ",")
	lower := 1
	for _, term := range strings.Split(pat, "&&") {
		term = strings.Trim(strings.TrimSpace(term), "() \t")
		if isDigits(term) {
			continue // a constant true
		}
		lo, ok := nrBound(term)
		if !ok {
			return 0
		}
		lower = max(lower, lo)
	}
	return lower
}

// nrBound reads "NR op N" or "N op NR" and returns the lower bound it sets
// on NR (1 for an upper bound).
func nrBound(term string) (int, bool) {
	for _, op := range [...]string{"==", ">=", "<=", ">", "<"} {
		l, r, found := strings.Cut(term, op)
		if !found {
			continue
		}
		l, r = strings.TrimSpace(l), strings.TrimSpace(r)
		if l != "NR" && l != "FNR" {
			l, r = r, l
			op = map[string]string{"==": "==", ">=": "<=", "<=": ">=", ">": "<", "<": ">"}[op]
		}
		n, err := strconv.Atoi(r)
		if (l != "NR" && l != "FNR") || err != nil {
			return 0, false
		}
		switch op {
		case "==", ">=":
			return n, true
		case ">":
			return n + 1, true
		}
		return 1, true
	}
	return 0, false
}

// awkAction reports whether an action only prints the whole line (print,
// print $0, print NR": "$0, print NR, $0) or stops (exit, next), and
// whether the lines it prints carry NR.
func awkAction(action string) (prints, numbers, ok bool) {
	for _, stmt := range strings.FieldsFunc(action, func(r rune) bool { return r == ';' || r == '\n' }) {
		stmt = strings.TrimSpace(stmt)
		switch {
		case stmt == "" || stmt == "next" || stmt == "exit" || strings.HasPrefix(stmt, "exit "):
		case stmt == "print" || stmt == "print $0":
			prints = true
		case strings.HasPrefix(stmt, "print ") && strings.HasSuffix(stmt, "$0"):
			prefix := strings.TrimSpace(strings.TrimSuffix(stmt[len("print "):], "$0"))
			if !numberPrefix(prefix) {
				return false, false, false
			}
			prints, numbers = true, true
		default:
			return false, false, false
		}
	}
	return prints, numbers, true
}

// numberPrefix reports whether an awk print prefix is NR or FNR followed by
// a separator: a comma, or a string literal ("NR\": \"", `NR "\t"`).
func numberPrefix(p string) bool {
	rest, found := strings.CutPrefix(p, "FNR")
	if !found {
		rest, found = strings.CutPrefix(p, "NR")
	}
	if !found {
		return false
	}
	rest = strings.TrimSpace(rest)
	rest = strings.TrimSpace(strings.TrimSuffix(rest, ","))
	if rest == "" {
		return true
	}
	return len(rest) >= 2 && rest[0] == '"' && rest[len(rest)-1] == '"' && !strings.Contains(rest[1:len(rest)-1], `"`)
}
