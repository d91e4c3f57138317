package squash

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// goLines returns n lines shaped like Go source, numbered like cat -n when
// numbered, starting at file line first.
func goLines(n, first int, numbered bool) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		line := fmt.Sprintf("\treturn handle%d(ctx, req) // line %d of the handler table", i, first+i)
		if i%7 == 0 {
			line = "" // blank lines: nl leaves them unnumbered
		}
		switch {
		case numbered && line != "":
			fmt.Fprintf(&b, "%6d\t%s\n", first+i, line)
		case numbered:
			b.WriteString("      \n")
		default:
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// splitCut checks that out is in with one run of body lines (after the
// first start bytes) replaced by a marker line, and returns the marker and
// the omitted body lines, 1-based.
func splitCut(t *testing.T, in, out string, start int) (marker string, a, z int) {
	t.Helper()
	inLines := strings.SplitAfter(in[start:], "\n")
	outLines := strings.SplitAfter(out[start:], "\n")
	if in[:start] != out[:start] {
		t.Fatalf("the wrapper before the output changed")
	}
	h := 0
	for h < len(outLines) && h < len(inLines) && outLines[h] == inLines[h] {
		h++
	}
	if h >= len(outLines) || !strings.HasPrefix(outLines[h], "[lines ") {
		t.Fatalf("no marker after the %d kept head lines: %.200q", h, strings.Join(outLines[h:], ""))
	}
	tail := outLines[h+1:]
	omitted := len(inLines) - h - len(tail)
	if omitted <= 0 || strings.Join(inLines[len(inLines)-len(tail):], "") != strings.Join(tail, "") {
		t.Fatalf("the lines after the marker are not the input's last %d lines", len(tail))
	}
	return strings.TrimSuffix(outLines[h], "\n"), h + 1, h + omitted
}

func TestCutReadMarkers(t *testing.T) {
	const limit = 16 << 10
	wrapper := "<returncode>0</returncode>\n<output>\n"
	tests := []struct {
		rule   string
		rd     fileRead
		in     string
		start  int                   // bytes of wrapper before the command's output
		marker func(a, z int) string // the marker, given the omitted output lines
	}{
		{"a whole file names the file's missing lines and the sed that prints them",
			fileRead{file: "server.go", first: 1}, goLines(1200, 1, false), 0,
			func(a, z int) string {
				return fmt.Sprintf("[lines %d-%d of server.go omitted; sed -n '%d,%dp' server.go]", a, z, a, z)
			}},
		{"a sed range counts from its first line",
			fileRead{file: "tests/test_x.py", first: 774}, goLines(1200, 774, false), 0,
			func(a, z int) string {
				return fmt.Sprintf("[lines %d-%d of tests/test_x.py omitted; sed -n '%d,%dp' tests/test_x.py]", a+773, z+773, a+773, z+773)
			}},
		{"a numbered listing is read by its numbers, blank unnumbered lines too",
			fileRead{file: "a b.py", numbered: true}, goLines(1200, 301, true), 0,
			func(a, z int) string {
				return fmt.Sprintf("[lines %d-%d of a b.py omitted; sed -n '%d,%dp' 'a b.py']", a+300, z+300, a+300, z+300)
			}},
		{"a tail names the output's lines and the command that prints them again",
			fileRead{file: "a.log", redo: "tail -n 5000 a.log"}, goLines(1200, 1, false), 0,
			func(a, z int) string {
				return fmt.Sprintf("[lines %d-%d of this output omitted; tail -n 5000 a.log | sed -n '%d,%dp']", a, z, a, z)
			}},
		{"several files: the output's lines",
			fileRead{}, goLines(1200, 1, false), 0,
			func(a, z int) string { return fmt.Sprintf("[lines %d-%d of this output omitted]", a, z) }},
		{"mini-swe-agent's wrapper is not counted",
			fileRead{file: "a.py", first: 1}, wrapper + goLines(1200, 1, false) + "</output>", len(wrapper),
			func(a, z int) string {
				return fmt.Sprintf("[lines %d-%d of a.py omitted; sed -n '%d,%dp' a.py]", a, z, a, z)
			}},
	}
	for _, tt := range tests {
		out := cutRead(tt.in, tt.rd, limit, nil)
		if len(out) > limit {
			t.Errorf("%s: %d bytes, over the %d cap", tt.rule, len(out), limit)
		}
		marker, a, z := splitCut(t, tt.in, out, tt.start)
		if want := tt.marker(a, z); marker != want {
			t.Errorf("%s:\n got %s\nwant %s", tt.rule, marker, want)
		}
		if a < 100 || z-a < 100 {
			t.Errorf("%s: kept %d head lines and omitted %d: the cut is not where it should be", tt.rule, a-1, z-a+1)
		}
	}
}

// A read within the cap, and one the agent already cut, are kept whole; a
// few huge lines lose their middles and stay in the cap.
func TestCutReadKeeps(t *testing.T) {
	small := goLines(100, 1, false)
	if out := cutRead(small, fileRead{file: "a.go", first: 1}, 64<<10, nil); out != small {
		t.Error("a read under the cap was changed")
	}
	elided := "<returncode>0</returncode>\n<warning>\ntoo long\n</warning><output_head>\n" + goLines(1200, 1, false) +
		"</output_head>\n<elided_chars>\n9000 characters elided\n</elided_chars>\n<output_tail>\nx\n</output_tail>"
	if out := cutRead(elided, fileRead{file: "a.go", first: 1}, 16<<10, nil); out != elided {
		t.Error("an output mini-swe-agent already cut was cut again")
	}
	huge := strings.Repeat("x", 100000) + "\n" + strings.Repeat("y", 100000)
	out := cutRead(huge, fileRead{file: "min.js", first: 1}, 16<<10, nil)
	if len(out) > 16<<10 || !strings.Contains(out, "chars]") {
		t.Errorf("two huge lines: %d bytes, %.100q", len(out), out)
	}
}

// Shell reads come back byte-identical up to the cap; cat server.go (Go's
// net/http, 131 KB), over it, keeps its head and tail and names the lines
// left out, which used to be 21 lines around "[4053 lines omitted]".
func TestShellFileReadIsNeverSquashed(t *testing.T) {
	s := New(Config{})
	small := goLines(400, 1, false)
	for _, cmd := range []string{"sed -n '774,1173p' tests/test_x.py", "cat -n a.go | sed -n '1,400p'", "bash -lc 'cd /w && head -n 400 a.go'"} {
		if r := s.ApplyCall(Call{Tool: "bash", Args: commandArgs(cmd)}, small); r.Squashed || r.Text != small || r.Shape != "" {
			t.Errorf("%s: a %d B read was changed (%s)", cmd, len(small), r.StatsLine())
		}
	}
	data, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "src", "net", "http", "server.go"))
	if err != nil {
		t.Skipf("Go source not available: %v", err)
	}
	r := s.ApplyCall(Call{Tool: "bash", Args: commandArgs("cat server.go")}, string(data))
	marker, a, z := splitCut(t, string(data), r.Text, 0)
	if want := fmt.Sprintf("[lines %d-%d of server.go omitted; sed -n '%d,%dp' server.go]", a, z, a, z); marker != want || r.Shape != ShapeRead {
		t.Errorf("cat server.go: %s marker %s, want %s", r.Shape, marker, want)
	}
}
