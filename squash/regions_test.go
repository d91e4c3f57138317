package squash

import (
	"fmt"
	"strings"
	"testing"
)

// pytestRun is a pytest run with two failures of one parametrized test and
// one of another, the way pytest prints them (long style for the test,
// short style for the frames between, a library frame last).
func pytestRun() string {
	var b strings.Builder
	b.WriteString("============================= test session starts ==============================\n")
	b.WriteString("platform linux -- Python 3.9.20, pytest-7.4.0, pluggy-1.3.0\nrootdir: /testbed\ncollected 40 items\n\n")
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&b, "tests/test_parse.py::test_case_%02d PASSED%s [ %d%%]\n", i, strings.Repeat(" ", 20), i*2)
	}
	b.WriteString("\n=================================== FAILURES ===================================\n")
	b.WriteString("______________________________ test_parse_week[1] ______________________________\n\n")
	b.WriteString("    def test_parse_week(n):\n        parsed = dateparse.parse_iso_week(sample_weeks[n])\n")
	b.WriteString(">       assert parsed.isoweek == expected_weeks[n]\n")
	b.WriteString("E       AssertionError: assert 52 == 53\n\ntests/test_parse.py:41: AssertionError\n")
	b.WriteString("______________________________ test_parse_week[2] ______________________________\n\n")
	b.WriteString("    def test_parse_week(n):\n        parsed = dateparse.parse_iso_week(sample_weeks[n])\n")
	b.WriteString(">       assert parsed.isoweek == expected_weeks[n]\n")
	b.WriteString("E       AssertionError: assert 52 == 53\n\ntests/test_parse.py:41: AssertionError\n")
	b.WriteString("_________________________________ test_tz_shift _________________________________\n\n")
	b.WriteString("    def test_tz_shift():\n        zone = build_zone_table('Europe/Paris')\n>       shifted = zone.shift_local(stamp_values)\n\n")
	b.WriteString("tests/test_parse.py:77: \n_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ \n")
	b.WriteString("dateparse/zones.py:118: in shift_local\n    return self._apply_offsets(values, self.offset_table)\n")
	b.WriteString("_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ \n\n")
	for i := 0; i < 25; i++ {
		fmt.Fprintf(&b, "    # library internals line %d of the numpy frame, with nothing of the agent's\n", i)
	}
	b.WriteString(">   ???\nE   TypeError: unsupported operand type(s) for +: 'NoneType' and 'int'\n\n")
	b.WriteString("/opt/conda/lib/python3.9/site-packages/numpy/core/fromnumeric.py:57: TypeError\n")
	b.WriteString("=========================== short test summary info ============================\n")
	b.WriteString("FAILED tests/test_parse.py::test_parse_week[1] - AssertionError: assert 52 == 53\n")
	b.WriteString("FAILED tests/test_parse.py::test_parse_week[2] - AssertionError: assert 52 == 53\n")
	b.WriteString("FAILED tests/test_parse.py::test_tz_shift - TypeError: unsupported operand\n")
	b.WriteString("========================= 3 failed, 37 passed in 1.21s =========================\n")
	return b.String()
}

func TestPytestFailureKeepsTheFailingTestsCode(t *testing.T) {
	out := New(Config{Budget: 1500}).ApplyCall(Call{Tool: "bash", Args: `{"command":"pytest tests"}`}, pytestRun())
	if !out.Squashed {
		t.Fatal("not squashed")
	}
	for _, want := range []string{
		"dateparse.parse_iso_week(sample_weeks[n])",             // the failing test's own code
		"zone = build_zone_table('Europe/Paris')",               // the other test's
		"return self._apply_offsets(values, self.offset_table)", // a project frame's code
		"tests/test_parse.py:77: ",
		"dateparse/zones.py:118: in shift_local",
		"E   TypeError: unsupported operand type(s)",
		"test_parse_week[2]", // a repeat keeps its header
		"3 failed, 37 passed",
	} {
		if !strings.Contains(out.Text, want) {
			t.Errorf("lost %q:\n%s", want, out.Text)
		}
	}
	// The repeat of test_parse_week shows its header, not its code again;
	// the library frame's 25 lines fold.
	if n := strings.Count(out.Text, "parsed = dateparse.parse_iso_week"); n != 1 {
		t.Errorf("the parametrized failure's code is shown %d times, want once:\n%s", n, out.Text)
	}
	if strings.Contains(out.Text, "library internals line 12") {
		t.Errorf("library frame not folded:\n%s", out.Text)
	}
}

// traceback is a Python traceback through project and library frames.
func pythonTraceback(libFrames int) string {
	var b strings.Builder
	b.WriteString("Starting the import of 120 rows\nTraceback (most recent call last):\n")
	b.WriteString("  File \"/repo/tools/import_rows.py\", line 88, in <module>\n    main(sys.argv[1:])\n")
	b.WriteString("  File \"/repo/tools/import_rows.py\", line 61, in main\n    rows = load_rows(path, dialect=opts.dialect)\n")
	for i := 0; i < libFrames; i++ {
		fmt.Fprintf(&b, "  File \"/usr/lib/python3.11/site-packages/csvkit/reader_%d.py\", line %d, in read_chunk\n", i, 100+i)
		b.WriteString("    return self._inner.read_chunk(size, strict=self.strict)\n           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n")
	}
	b.WriteString("  File \"/repo/rows/parse.py\", line 203, in parse_header\n    width = header.column_widths[index]\n")
	b.WriteString("KeyError: 'column_widths'\n")
	return b.String()
}

func TestTracebackKeepsProjectFramesAndFoldsLibraryFramesFirst(t *testing.T) {
	in := pythonTraceback(40)
	out := New(Config{Budget: 1200}).Apply("bash", in)
	if !out.Squashed {
		t.Fatal("not squashed")
	}
	for _, want := range []string{
		`File "/repo/tools/import_rows.py", line 88, in <module>`, "main(sys.argv[1:])",
		`File "/repo/tools/import_rows.py", line 61, in main`, "rows = load_rows(path, dialect=opts.dialect)",
		`File "/repo/rows/parse.py", line 203, in parse_header`, "width = header.column_widths[index]",
		"KeyError: 'column_widths'",
	} {
		if !strings.Contains(out.Text, want) {
			t.Errorf("lost %q:\n%s", want, out.Text)
		}
	}
	if strings.Contains(out.Text, "^^^^") {
		t.Errorf("caret lines kept:\n%s", out.Text)
	}
	if strings.Count(out.Text, "csvkit/reader_") > 20 {
		t.Errorf("library frames not folded:\n%s", out.Text)
	}
}

func TestChainedTracebacksShowASharedFrameOnce(t *testing.T) {
	frame := "  File \"/repo/db/cursor.py\", line 84, in _execute\n    return self.cursor.execute(sql, params)\n"
	var b strings.Builder
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&b, "query %d planned with index scan on orders_by_customer\n", i)
	}
	b.WriteString("Traceback (most recent call last):\n" + frame + "sqlite3.InterfaceError: Error binding parameter 0\n\n")
	b.WriteString("The above exception was the direct cause of the following exception:\n\n")
	b.WriteString("Traceback (most recent call last):\n  File \"/repo/app/views.py\", line 12, in show_offer\n    offer = lookup_offer(slug=offer_slug)\n")
	b.WriteString(frame + "db.utils.InterfaceError: Error binding parameter 0\n")
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&b, "rolled back transaction %d of the batch\n", i)
	}
	out := New(Config{Budget: 500}).Apply("bash", b.String())
	if !out.Squashed {
		t.Fatal("not squashed")
	}
	if n := strings.Count(out.Text, "return self.cursor.execute(sql, params)"); n != 1 {
		t.Errorf("the shared frame is shown %d times, want once:\n%s", n, out.Text)
	}
	for _, want := range []string{"offer = lookup_offer(slug=offer_slug)", "db.utils.InterfaceError", "sqlite3.InterfaceError"} {
		if !strings.Contains(out.Text, want) {
			t.Errorf("lost %q:\n%s", want, out.Text)
		}
	}
}

func TestDiffAndListingKeepTheirStructure(t *testing.T) {
	var diff, ls strings.Builder
	for f := 0; f < 8; f++ {
		fmt.Fprintf(&diff, "diff --git a/pkg/mod_%d.py b/pkg/mod_%d.py\nindex 1a2b3c%d..4d5e6f%d 100644\n--- a/pkg/mod_%d.py\n+++ b/pkg/mod_%d.py\n@@ -%d,7 +%d,8 @@ def handler_%d(request):\n", f, f, f, f, f, f, 10*f, 10*f, f)
		for i := 0; i < 12; i++ {
			fmt.Fprintf(&diff, "     unchanged context line %d of file %d\n", i, f)
		}
		fmt.Fprintf(&ls, "./pkg/sub_%d:\n", f)
		for i := 0; i < 12; i++ {
			fmt.Fprintf(&ls, "module_file_%d_%d.py\n", f, i)
		}
		ls.WriteString("\n")
	}
	sq := New(Config{})
	d := sq.Apply("bash", diff.String())
	l := sq.Apply("bash", ls.String())
	if !d.Squashed || !l.Squashed {
		t.Fatal("not squashed")
	}
	for f := 0; f < 8; f++ {
		for _, want := range []string{fmt.Sprintf("diff --git a/pkg/mod_%d.py b/pkg/mod_%d.py", f, f), fmt.Sprintf("@@ -%d,7 +%d,8 @@ def handler_%d", 10*f, 10*f, f)} {
			if !strings.Contains(d.Text, want) {
				t.Errorf("diff lost %q", want)
			}
		}
		if want := fmt.Sprintf("./pkg/sub_%d:", f); !strings.Contains(l.Text, want) {
			t.Errorf("listing lost %q", want)
		}
	}
}

func TestGapMarkersNameTheLinesAndHowToGetThemBack(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 400; i++ {
		fmt.Fprintf(&b, "processed record %d of the nightly batch\n", i)
	}
	in := b.String()
	shell := New(Config{}).ApplyCall(Call{Tool: "bash", Args: `{"command":"./nightly.sh"}`}, in)
	other := New(Config{}).ApplyCall(Call{Tool: "fetch_report"}, in)
	if !strings.Contains(shell.Text, "\n[lines 11-390 omitted; rerun narrowed (grep -n, sed -n, tail) to see them]\n") {
		t.Errorf("shell output's marker:\n%s", shell.Text)
	}
	if !strings.Contains(other.Text, "\n[lines 11-390 omitted]\n") {
		t.Errorf("another tool's marker:\n%s", other.Text)
	}
}

func TestPytestLocation(t *testing.T) {
	for _, tc := range []struct {
		line, path string
		inFunc     bool
	}{
		{"astropy/utils/iers/iers.py:271: TypeError", "astropy/utils/iers/iers.py", false},
		{"astropy/coordinates/baseframe.py:1202: in transform_to", "astropy/coordinates/baseframe.py", true},
		{"tests/test_x.py:49: ", "tests/test_x.py", false},
		{"/opt/conda/lib/python3.9/contextlib.py:79: AssertionError", "/opt/conda/lib/python3.9/contextlib.py", false},
		{"    return x:1: y", "", false},         // indented: code
		{"E       a.py:3: nope", "", false},      // an error line
		{"http://host:8080: refused", "", false}, // a port is not a line
		{"a.py:x: y", "", false},
	} {
		p, in := pytestLocation(tc.line)
		if p != tc.path || in != tc.inFunc {
			t.Errorf("pytestLocation(%q) = %q, %v; want %q, %v", tc.line, p, in, tc.path, tc.inFunc)
		}
	}
}

func TestPytestBlockName(t *testing.T) {
	for line, want := range map[string]string{
		"________________________________ test_icrs_cirs ________________________________": "test_icrs_cirs",
		"____________________ test_gcrs_altaz_bothroutes[testframe0] ____________________": "test_gcrs_altaz_bothroutes[testframe0]",
		"_____________ ERROR collecting tests/test_a.py _____________":                     "ERROR collecting tests/test_a.py",
		"_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _":                                "",
		"__init__.py":       "",
		"____________":      "",
		"___ a  spaced ___": "",
	} {
		if got := pytestBlockName(line); got != want {
			t.Errorf("pytestBlockName(%q) = %q, want %q", line, got, want)
		}
	}
}

func TestIsLibraryPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/opt/miniconda3/envs/testbed/lib/python3.9/contextlib.py": true,
		"/usr/local/lib/python3.11/site-packages/requests/api.py":  true,
		"node_modules/jest-circus/build/run.js":                    true,
		"<frozen importlib._bootstrap>":                            true,
		"/usr/local/go/src/testing/testing.go":                     true,
		"/testbed/django/db/models/query.py":                       false,
		"astropy/utils/iers/iers.py":                               false,
		"reproduce_issue.py":                                       false,
	} {
		if got := isLibraryPath(p); got != want {
			t.Errorf("isLibraryPath(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestStructural(t *testing.T) {
	for l, want := range map[string]bool{
		"diff --git a/tox.ini b/tox.ini":      true,
		"index 3f1a2b9..8c4d5e6 100644":       true,
		"--- a/tox.ini":                       true,
		"+++ b/tox.ini":                       true,
		"@@ -12,7 +12,8 @@ commands =":        true,
		"./astropy/coordinates:":              true,
		"astropy/coordinates/builtin_frames:": true,
		"--- removed line in a diff":          false,
		"index.html":                          false,
		"note: something to say:":             false,
		"Summary:":                            false,
	} {
		if got := structural(l); got != want {
			t.Errorf("structural(%q) = %v, want %v", l, got, want)
		}
	}
}

func TestDecompiledCodeIsKeptAsSource(t *testing.T) {
	var c, j strings.Builder
	c.WriteString("Decompilation Found!\n\nundefined4 FUN_004017e6(long param_1)\n\n{\n  char cVar1;\n  int local_1c;\n  \n  local_1c = 0;\n  do {\n")
	j.WriteString("Command google returned: [\n")
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&c, "    uVar%d = std::basic_string<char,std::char_traits<char>>::length();\n    FUN_0040%04x(local_48,local_98);\n", i, i)
		fmt.Fprintf(&j, "    {\n        \"title\": \"Result %d of the search\",\n        \"href\": \"https://example.com/%d\",\n    },\n", i, i)
	}
	c.WriteString("  } while (local_1c < 0x1e);\n  return 0;\n}\n")
	j.WriteString("]\n")
	if got := Detect(c.String()); got != ShapeSource {
		t.Errorf("decompiled C detected as %s, want source", got)
	}
	if got := Detect(j.String()); got == ShapeSource {
		t.Errorf("pretty-printed JSON behind a prefix detected as source")
	}
}
