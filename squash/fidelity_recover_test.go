package squash

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/expand"
)

// "Recoverable": a used token the squashed output no longer has is one
// retrieval away when a marker in that output names where it is. The
// markers are read from the squashed text, so the measure follows what
// squash writes:
//
//   - a way back to the kept original (expand.Ways.Back: sed -n 'A,Bp'
//     DIR/REF.txt, cat DIR/REF.txt, ctxpress_expand {"ref":…,"lines":…},
//     curl …/ctxpress/expand/REF?lines=…, "original kept by ctxpress as
//     ref REF") names lines A-B of the original whose reference is REF, or
//     all of it without lines. The original is the text whose expand.Ref
//     is REF: the output, or a string inside it when it is JSON; a
//     reference that is neither names nothing (brokenRefs).
//   - "[lines A-B omitted…]" names lines A-B of the output (of each
//     multi-line string of a JSON output: that is where squash writes it);
//     "[lines A-B of this output omitted…]" lines A-B of a read's output
//     after its wrapper (bodyStart); "[lines A-B of FILE omitted…]" file
//     lines A-B, found in the output by the line numbers it printed or the
//     first line it started at (fileRead).
//   - "[N more items]" and "…[N chars]" name nothing by themselves.
//
// A token is recoverable when it is kept or appears in what some marker of
// its output names.

// namedText is what a squashed output's markers name of its original.
type namedText struct {
	// byRef are the parts ways back to a kept original name, ranges the
	// parts gap markers name by their lines alone.
	byRef, ranges []string
	// brokenRefs are the references of ways back that name no text of the
	// output: a marker that offers what a retrieval would not return.
	brokenRefs []string
}

// contains reports whether tok appears in a named part.
func (n namedText) contains(tok string) bool {
	return n.containsByRef(tok) || anyContains(n.ranges, tok)
}

// containsByRef reports whether tok appears in a part a way back to a kept
// original names.
func (n namedText) containsByRef(tok string) bool { return anyContains(n.byRef, tok) }

func anyContains(parts []string, tok string) bool {
	for _, p := range parts {
		if containsToken(p, tok) {
			return true
		}
	}
	return false
}

var (
	// linesMarkerRE is squash's gap marker: "[lines A-B omitted…]", "[lines
	// A-B of this output omitted…]", "[lines A-B of FILE omitted…]".
	linesMarkerRE = regexp.MustCompile(`\[lines (\d+)-(\d+)(?: of (this output|[^\]\n]*?))? omitted`)
	// The ways back of expand.Ways.Back, each with the reference and the
	// lines it names.
	sedWayRE  = regexp.MustCompile(`sed -n '(\d+)(?:,(\d+|\$))?p' (?:'[^']*?|[^'\s\]]*?)\b([0-9a-f]{12})\.txt`)
	catWayRE  = regexp.MustCompile(`\bcat (?:'[^']*?|[^'\s\]]*?)\b([0-9a-f]{12})\.txt`)
	toolWayRE = regexp.MustCompile(regexp.QuoteMeta(expand.ToolName) + ` \{"ref":"([0-9a-f]{12})"(?:,"lines":"([0-9,-]+)")?\}`)
	urlWayRE  = regexp.MustCompile(`/ctxpress/expand/([0-9a-f]{12})(?:\?lines=([0-9,-]+))?`)
	refWayRE  = regexp.MustCompile(`original kept by ctxpress as ref ([0-9a-f]{12})`)
)

// markerNames reads the markers of squashed, the forwarded text of output
// (produced by call; sq knows its reads), and returns what they name.
func markerNames(sq *Squasher, call Call, output, squashed string) namedText {
	var n namedText
	ways := func(re *regexp.Regexp, lines func(m []string) expand.Lines, ref int) {
		for _, m := range re.FindAllStringSubmatch(squashed, -1) {
			base, ok := originalOf(output, m[ref])
			if !ok {
				n.brokenRefs = append(n.brokenRefs, m[ref])
				continue
			}
			n.byRef = append(n.byRef, expand.Slice(base, lines(m)))
		}
	}
	ways(sedWayRE, func(m []string) expand.Lines {
		from, _ := strconv.Atoi(m[1])
		switch m[2] {
		case "":
			return expand.Lines{From: from, To: from}
		case "$":
			return expand.Lines{From: from}
		}
		to, _ := strconv.Atoi(m[2])
		return expand.Lines{From: from, To: to}
	}, 3)
	whole := func([]string) expand.Lines { return expand.Lines{} }
	ranged := func(m []string) expand.Lines {
		l, err := expand.ParseLines(m[2])
		if err != nil {
			return expand.Lines{From: -1, To: -1} // names nothing
		}
		return l
	}
	ways(catWayRE, whole, 1)
	ways(refWayRE, whole, 1)
	ways(toolWayRE, ranged, 1)
	ways(urlWayRE, ranged, 1)

	for _, m := range linesMarkerRE.FindAllStringSubmatch(squashed, -1) {
		a, _ := strconv.Atoi(m[1])
		b, _ := strconv.Atoi(m[2])
		l := expand.Lines{From: a, To: b}
		switch m[3] {
		case "":
			n.ranges = append(n.ranges, expand.Slice(output, l))
			for _, s := range jsonTexts(output) {
				n.ranges = append(n.ranges, expand.Slice(s, l))
			}
		case "this output":
			n.ranges = append(n.ranges, expand.Slice(output[bodyStart(output):], l))
		default:
			n.ranges = append(n.ranges, fileLines(sq, call, output, l))
		}
	}
	return n
}

// originalOf is the text of output whose reference is ref: the output
// itself, or one of the strings of a JSON output.
func originalOf(output, ref string) (string, bool) {
	if expand.Ref(output) == ref {
		return output, true
	}
	for _, s := range jsonTexts(output) {
		if expand.Ref(s) == ref {
			return s, true
		}
	}
	return "", false
}

// jsonTexts are the string values of a JSON output that span lines (where
// squash squashes a text wrapped in JSON); none for any other output.
func jsonTexts(output string) []string {
	if !strings.HasPrefix(strings.TrimSpace(output), "{") && !strings.HasPrefix(strings.TrimSpace(output), "[") {
		return nil
	}
	var v any
	if json.Unmarshal([]byte(output), &v) != nil {
		return nil
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			if strings.Contains(v, "\n") {
				out = append(out, v)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// fileLines is the part of a read's output that holds lines l of the file
// it printed: the lines numbered within l (cat -n, nl), or the lines from
// the read's first line on; "" when the output says neither.
func fileLines(sq *Squasher, call Call, output string, l expand.Lines) string {
	rd, ok := sq.shellRead(call)
	if !ok {
		return ""
	}
	body := output[bodyStart(output):]
	switch {
	case rd.numbered:
		var b strings.Builder
		for _, line := range strings.SplitAfter(body, "\n") {
			num := strings.TrimLeft(line, " \t")
			end := strings.IndexFunc(num, func(r rune) bool { return r < '0' || r > '9' })
			if end <= 0 {
				continue
			}
			if k, err := strconv.Atoi(num[:end]); err == nil && k >= l.From && k <= l.To {
				b.WriteString(line)
			}
		}
		return b.String()
	case rd.first > 0:
		return expand.Slice(body, expand.Lines{From: l.From - rd.first + 1, To: l.To - rd.first + 1})
	}
	return ""
}

func TestMarkerNames(t *testing.T) {
	var log strings.Builder
	for i := 1; i <= 40; i++ {
		log.WriteString("line " + strconv.Itoa(i) + " token_" + strconv.Itoa(i) + "\n")
	}
	out := log.String()
	ref := expand.Ref(out)
	sq := New(Config{})
	bash := func(cmd string) Call { return Call{Tool: "bash", Args: `{"command":` + strconv.Quote(cmd) + `}`} }
	tests := []struct {
		name, squashed string
		call           Call
		output         string
		named, not     []string
		withRef        bool
		broken         int
	}{
		{"a gap marker of today names its lines of the output", "line 1 token_1\n[lines 2-9 omitted; rerun narrowed (grep -n, sed -n, tail) to see them]\nline 10 token_10\n",
			bash("./run.sh"), out, []string{"token_2", "token_9"}, []string{"token_1", "token_10", "token_11"}, false, 0},
		{"a way back to the original names its lines", "[lines 2-3 omitted; original intact: sed -n '2,3p' /tmp/x/" + ref + ".txt]",
			bash("./run.sh"), out, []string{"token_2", "token_3"}, []string{"token_4"}, true, 0},
		{"one line", "original intact: sed -n '7p' '/tmp/a b/" + ref + ".txt'", bash("./run.sh"), out, []string{"token_7"}, []string{"token_8"}, true, 0},
		{"cat names the whole original", "[3 more items; original intact: cat /tmp/x/" + ref + ".txt]", bash("./run.sh"), out, []string{"token_1", "token_40"}, nil, true, 0},
		{"the tool and the URL", `ctxpress_expand {"ref":"` + ref + `","lines":"5-6"} or curl -s 'http://h:1/ctxpress/expand/` + ref + `?lines=30-31'`,
			bash("./run.sh"), out, []string{"token_5", "token_6", "token_30", "token_31"}, []string{"token_7", "token_29"}, true, 0},
		{"a reference alone names the whole original", "…[900 chars; original kept by ctxpress as ref " + ref + "]", bash("./run.sh"), out, []string{"token_20"}, nil, true, 0},
		{"a reference to another text names nothing", "original intact: sed -n '2,3p' /tmp/x/0123456789ab.txt", bash("./run.sh"), out, nil, []string{"token_2"}, false, 1},
		{"items and chars name nothing", `["a","[37 more items]"] …[200 chars]`, bash("./run.sh"), out, nil, []string{"token_1"}, false, 0},
		{"a read's marker names file lines by the numbers printed", "[lines 12-13 of a.go omitted; sed -n '12,13p' a.go]",
			bash("cat -n a.go"), "    11\tfunc_11\n    12\tfunc_12\n    13\tfunc_13\n    14\tfunc_14\n", []string{"func_12", "func_13"}, []string{"func_11", "func_14"}, false, 0},
		{"a read's marker names file lines from its first line", "[lines 102-103 of a.go omitted; sed -n '102,103p' a.go]",
			bash("sed -n '100,200p' a.go"), "f_100\nf_101\nf_102\nf_103\nf_104\n", []string{"f_102", "f_103"}, []string{"f_101", "f_104"}, false, 0},
		{"a gap marker inside a JSON string names the string's lines", `{"output":"a\n[lines 2-2 omitted]\nc"}`,
			bash("./run.sh"), `{"output":"a\nb_token\nc","metadata":{"exit_code":0}}`, []string{"b_token"}, nil, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := markerNames(sq, tt.call, tt.output, tt.squashed)
			for _, tok := range tt.named {
				if !n.contains(tok) {
					t.Errorf("%s is not named", tok)
				}
			}
			for _, tok := range tt.not {
				if n.contains(tok) {
					t.Errorf("%s is named", tok)
				}
			}
			if (len(n.byRef) > 0) != tt.withRef || len(n.brokenRefs) != tt.broken {
				t.Errorf("named by a reference %d, broken %q; want %v, %d", len(n.byRef), n.brokenRefs, tt.withRef, tt.broken)
			}
			for _, tok := range tt.named {
				if n.containsByRef(tok) != tt.withRef {
					t.Errorf("%s named by a reference: %v, want %v", tok, n.containsByRef(tok), tt.withRef)
				}
			}
		})
	}
}

// The recoverable measure reads "[lines A-B omitted]" as lines A-B of the
// output: over the corpus, squashed as in production, the kept lines
// around every such marker are lines A-1 and B+1 of the output (or of a
// read's output after its wrapper), so the lines a marker names are the
// ones it stands for.
func TestCorpusMarkersNameTheirGap(t *testing.T) {
	cases, _ := corpusFidelityCases(t)
	sq := New(Config{})
	markers := 0
	for _, c := range cases {
		text := sq.ApplyCall(c.Call, c.Output).Text
		if text == c.Output || jsonTexts(c.Output) != nil {
			continue
		}
		lines := strings.Split(text, "\n")
		for i, l := range lines {
			m := linesMarkerRE.FindStringSubmatch(l)
			if m == nil || m[3] != "" && m[3] != "this output" {
				continue
			}
			markers++
			base := c.Output
			if m[3] != "" {
				base = base[bodyStart(base):]
			}
			a, _ := strconv.Atoi(m[1])
			b, _ := strconv.Atoi(m[2])
			if i > 0 && a > 1 && !strings.HasPrefix(expand.Slice(base, expand.Lines{From: a - 1, To: a - 1}), keptPrefix(lines[i-1])) ||
				i < len(lines)-1 && !strings.HasPrefix(expand.Slice(base, expand.Lines{From: b + 1, To: b + 1}), keptPrefix(lines[i+1])) {
				t.Errorf("%s #%d: %q is not between lines %d and %d of the output", c.Trace, c.Index, l, a-1, b+1)
			}
		}
	}
	if markers == 0 {
		t.Fatal("no gap marker in the corpus's squashed outputs")
	}
}

// keptPrefix is the part of a kept line squash writes as it was: before a
// repeat count or a cut.
func keptPrefix(line string) string {
	if i := strings.LastIndex(line, " [x"); i >= 0 {
		line = line[:i]
	}
	if i := strings.Index(line, "…["); i >= 0 {
		line = line[:i]
	}
	return line
}
