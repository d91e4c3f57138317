package squash

import (
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Distinctive tokens, for the fidelity benchmark (fidelity_test.go): the
// words of an agent's next step that name one thing in a tool output, so
// that the step could only have taken them from what it read.
//
// distinctiveTokens chooses them so:
//
//  1. Words are the maximal runs of [A-Za-z0-9_./~:@-]; every other byte
//     (space, quote, bracket, comma, =, $, *, +, backslash, non-ASCII)
//     separates words: `sed -n '120,180p' a.py` has the words sed, -n, 120,
//     180p and a.py.
//  2. A word is trimmed of trailing . : - @ ~ / and of leading : - @
//     ("see a.py." is a.py, "--cov_report" is cov_report; ./x and ~/x keep
//     their head).
//  3. A word FILE:N or FILE:N:M whose FILE holds a '.' or a '/' and no ':'
//     is one file:line token FILE:N (the column is dropped): parse.go:41,
//     src/a.py:12.
//  4. Any other word is cut at ':' (a.py::test_x is a.py and test_x), and
//     each part, trimmed again as in 2, is at most one token, the first of:
//     - a path: only [A-Za-z0-9_.@~/-], at least two non-empty segments
//     between '/', one of them two or more bytes long with a letter
//     (tests/test_x.py, /usr/lib/python3, ./tests; not /a, and/or, 1/2);
//     - a dotted name: [A-Za-z_][A-Za-z0-9_-]* segments joined by '.', one
//     of them two or more bytes long (item._store.get, os.path, setup.py;
//     not e.g);
//     - an identifier: [A-Za-z_][A-Za-z0-9_]* of three bytes or more with a
//     letter, and a '_' or an upper-case letter after its first byte beside
//     a lower-case one anywhere (evaluate_xfail_marks, __init__,
//     TestParseDate, getValue; not Error, HTTP, mM);
//     - a number: three digits or more, with letters after them dropped
//     (1474; 180p is 180, 100ms is 100; not 0x1f, 3.14159, 12);
//     - failing all four, a part with a '-' is cut at '-' and each piece
//     that is an identifier or a number is a token (foo_bar-baz gives
//     foo_bar).
//
// A token appears in a text (containsToken) when it occurs there with no
// letter, digit or '_' directly before or after it: as a whole token, never
// inside a longer word. parse.go:41 appears in "parse.go:41:5: x", 180 in
// "  180\tdef f():", tests/a.py in "/repo/tests/a.py", os.path in
// "os.path.join"; TestParse does not appear in "TestParseDate", nor 41 in
// "412".

// The rules' regular expressions; words (rule 1) are split by hand, and
// the others are only tried on words that hold the byte they need, because
// the next steps hold whole scripts and Go's regexp is slow on every word.
var (
	fidFileLineRE = regexp.MustCompile(`^([^:]*[./][^:]*):([0-9]+)(?::[0-9]+)?$`)
	fidPathRE     = regexp.MustCompile(`^[A-Za-z0-9_.@~/-]*/[A-Za-z0-9_.@~/-]*$`)
	fidDottedRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)+$`)
	fidIdentRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{2,}$`)
	fidNumberRE   = regexp.MustCompile(`^([0-9]{3,})[A-Za-z]*$`)
)

// distinctiveTokens returns the distinctive tokens of text (see above),
// sorted, each once.
func distinctiveTokens(text string) []string {
	set := map[string]bool{}
	for _, w := range words(text) {
		w = trimWord(w)
		if strings.Contains(w, ":") {
			if m := fidFileLineRE.FindStringSubmatch(w); m != nil {
				set[m[1]+":"+m[2]] = true
				continue
			}
		}
		for _, part := range strings.Split(w, ":") {
			if tok := partToken(trimWord(part)); tok != "" {
				set[tok] = true
				continue
			}
			if !strings.Contains(part, "-") {
				continue
			}
			for _, piece := range strings.Split(part, "-") {
				if isDistinctiveIdent(piece) {
					set[piece] = true
				} else if piece != "" && piece[0] >= '0' && piece[0] <= '9' {
					if m := fidNumberRE.FindStringSubmatch(piece); m != nil {
						set[m[1]] = true
					}
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for tok := range set {
		out = append(out, tok)
	}
	sort.Strings(out)
	return out
}

// words returns the maximal runs of [A-Za-z0-9_./~:@-] of text (rule 1).
func words(text string) []string {
	var out []string
	start := -1
	for i := 0; i <= len(text); i++ {
		if i < len(text) && (isWordByte(text[i]) || strings.IndexByte("./~:@-", text[i]) >= 0) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			out = append(out, text[start:i])
			start = -1
		}
	}
	return out
}

// trimWord drops the punctuation around a word that belongs to the prose
// around it (rule 2).
func trimWord(w string) string {
	return strings.TrimLeft(strings.TrimRight(w, ".:-@~/"), ":-@")
}

// partToken returns the token a part of a word is (rule 4), or "".
func partToken(p string) string {
	switch {
	case p == "":
		return ""
	case strings.Contains(p, "/"):
		if isPathToken(p) {
			return p
		}
	case strings.Contains(p, "."):
		if fidDottedRE.MatchString(p) && hasLongSegment(strings.Split(p, "."), false) {
			return p
		}
	case isDistinctiveIdent(p):
		return p
	}
	if p[0] >= '0' && p[0] <= '9' {
		if m := fidNumberRE.FindStringSubmatch(p); m != nil {
			return m[1]
		}
	}
	return ""
}

func isPathToken(p string) bool {
	if !fidPathRE.MatchString(p) {
		return false
	}
	var segs []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			segs = append(segs, s)
		}
	}
	return len(segs) >= 2 && hasLongSegment(segs, true)
}

// hasLongSegment reports whether one of segs is two bytes or more (and,
// with letter, holds an ASCII letter).
func hasLongSegment(segs []string, letter bool) bool {
	for _, s := range segs {
		if len(s) >= 2 && (!letter || strings.IndexFunc(s, isASCIILetter) >= 0) {
			return true
		}
	}
	return false
}

func isASCIILetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }

// isDistinctiveIdent reports whether p is an identifier with a '_' or an
// inner capital (rule 4).
func isDistinctiveIdent(p string) bool {
	if len(p) < 3 || !strings.Contains(p, "_") && !strings.ContainsAny(p[1:], "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
		return false // the fast no
	}
	if !fidIdentRE.MatchString(p) || strings.IndexFunc(p, isASCIILetter) < 0 {
		return false
	}
	if strings.Contains(p, "_") {
		return true
	}
	return strings.ContainsAny(p[1:], "ABCDEFGHIJKLMNOPQRSTUVWXYZ") && strings.ContainsAny(p, "abcdefghijklmnopqrstuvwxyz")
}

// containsToken reports whether tok appears in text as a whole token: an
// occurrence with no letter, digit or '_' directly before or after it.
func containsToken(text, tok string) bool {
	if tok == "" {
		return false
	}
	for from := 0; ; {
		i := strings.Index(text[from:], tok)
		if i < 0 {
			return false
		}
		start, end := from+i, from+i+len(tok)
		if (start == 0 || !isWordByte(text[start-1])) && (end == len(text) || !isWordByte(text[end])) {
			return true
		}
		from = start + 1
	}
}

// tokenKind names the rule a token was chosen by, for the figures by kind.
func tokenKind(tok string) string {
	switch {
	case fidFileLineRE.MatchString(tok):
		return "file:line"
	case strings.Contains(tok, "/"):
		return "path"
	case strings.Contains(tok, "."):
		return "dotted"
	case tok[0] >= '0' && tok[0] <= '9':
		return "number"
	}
	return "identifier"
}

// tokenKinds is the order the figures by kind are printed in.
var tokenKinds = []string{"identifier", "dotted", "path", "file:line", "number"}

func TestDistinctiveTokens(t *testing.T) {
	tests := []struct {
		name, text string
		want       []string
	}{
		{"a sed range gives its line numbers, with the p dropped",
			`sed -n '1195,1215p' lib/matplotlib/axes/_base.py`,
			[]string{"1195", "1215", "lib/matplotlib/axes/_base.py"}},
		{"identifiers with an underscore and dotted names from a traceback",
			"The fixture calls `evaluate_xfail_marks(item)` and reads item._store.get(xfailed_key).",
			[]string{"evaluate_xfail_marks", "item._store.get", "xfailed_key"}},
		{"inner capitals make an identifier; capitalised words and acronyms do not",
			"TestParseDate fails with a JSONDecoder Error over HTTP in getValue",
			[]string{"JSONDecoder", "TestParseDate", "getValue"}},
		{"file:line keeps the line and drops the column",
			"lib/ctx/parse.go:41:5: undefined: tokenAt",
			[]string{"lib/ctx/parse.go:41", "tokenAt"}},
		{"a pytest node id is a path and a test name",
			"pytest testing/test_collection.py::Test_getinitialnodes -x",
			[]string{"Test_getinitialnodes", "testing/test_collection.py"}},
		{"a traceback frame gives its file, not its short line number",
			`File "/testbed/django/db/models/lookups.py", line 27, in __init__`,
			[]string{"/testbed/django/db/models/lookups.py", "__init__"}},
		{"prose punctuation is trimmed, leading ./ is kept",
			"Let me look at ./tests/test_x.py, then os.path.",
			[]string{"./tests/test_x.py", "os.path"}},
		{"HTML closing tags, fractions and e.g are not paths or names; and/or is a path",
			"</a></li> 1/l and/or e.g. i.e. a/b",
			[]string{"and/or"}},
		{"hex, decimals and short numbers are not numbers; units are dropped",
			"0x1f 3.14159 12 took 100ms, exit 404s, id 1364650861",
			[]string{"100", "1364650861", "404"}},
		{"an option glued to an identifier by a dash gives the identifier",
			"--cov_report-xml foo_bar-baz 2021-03-04",
			[]string{"2021", "cov_report", "foo_bar"}},
		{"decompiler names are identifiers",
			"undefined8 FUN_004015dc(long param_1) { local_98 = 0; }",
			[]string{"FUN_004015dc", "local_98", "param_1"}},
		{"a URL's host and path is a path",
			"curl https://github.com/pytest-dev/pytest/issues",
			[]string{"//github.com/pytest-dev/pytest/issues"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := distinctiveTokens(tt.text)
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("distinctiveTokens(%q)\n got %q\nwant %q", tt.text, got, tt.want)
			}
		})
	}
}

func TestContainsToken(t *testing.T) {
	tests := []struct {
		name, text, tok string
		want            bool
	}{
		{"a file:line inside a compiler diagnostic", "parse.go:41:5: undefined: x", "parse.go:41", true},
		{"a line number of nl -ba output", "   180\tdef f():", "180", true},
		{"a line number of grep -n output", "src/a.py:180:    return x", "180", true},
		{"a relative path inside an absolute one", "/repo/tests/a.py:3: in test_a", "tests/a.py", true},
		{"a dotted name before a longer chain", "x = os.path.join(a, b)", "os.path", true},
		{"not a prefix of a longer identifier", "def TestParseDate(t):", "TestParse", false},
		{"not the head of a longer number", "line 412", "41", false},
		{"not the tail of a longer number", "line 1180", "180", false},
		{"not inside a name with an underscore", "my_parse.go", "parse.go", false},
		{"found past an occurrence that is not whole", "TestParseDate, TestParse", "TestParse", true},
		{"at the very end of the text", "see item._store", "item._store", true},
	}
	for _, tt := range tests {
		if got := containsToken(tt.text, tt.tok); got != tt.want {
			t.Errorf("%s: containsToken(%q, %q) = %v, want %v", tt.name, tt.text, tt.tok, got, tt.want)
		}
	}
}

func TestTokenKind(t *testing.T) {
	for tok, want := range map[string]string{
		"parse.go:41": "file:line", "tests/a.py": "path", "os.path": "dotted",
		"1474": "number", "evaluate_xfail_marks": "identifier", "TestParseDate": "identifier",
	} {
		if got := tokenKind(tok); got != want {
			t.Errorf("tokenKind(%q) = %q, want %q", tok, got, want)
		}
	}
}
