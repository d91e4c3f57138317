package squash

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ctxpress/ctxpress/expand"
)

// FuzzApply checks the promises that hold for every input: no panic, never
// longer, deterministic, valid UTF-8 stays valid, JSON stays JSON. A small
// floor and budget make the compressors run on short inputs too. Seeds are
// the golden inputs plus the cases below, so `go test` runs them all.
func FuzzApply(f *testing.F) {
	for _, seed := range []string{
		"",
		"{}",
		`{"a":"` + strings.Repeat("x", 300) + `","b":[1,2,3,4,5,6,7,8,9,10]}`,
		`["\ud83d\ude00` + strings.Repeat(`\ud83d\ude00`, 40) + `"]`,
		strings.Repeat("ERROR boom\n", 50),
		"E   assert 1 == 2\nFAILED a.py::t\n=== 1 failed in 0.1s ===\n",
		strings.Repeat("é", 500),
		"\xff\xfe" + strings.Repeat("a\n", 100),
		"line\r\n" + strings.Repeat("x y z\r\n", 80),
	} {
		f.Add("bash", seed)
	}
	inputs, _ := filepath.Glob("testdata/*.input")
	for _, in := range inputs {
		data, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(goldenTool(filepath.Base(in)), string(data))
	}
	s := New(Config{MinBytes: 1, Budget: 400})
	kept := New(Config{MinBytes: 1, Budget: 400, Ways: &expand.Ways{Dir: "/tmp/o", Tool: true}})
	f.Fuzz(func(t *testing.T, tool, in string) {
		checkKept(t, kept.Apply(tool, in), in)
		r := s.Apply(tool, in)
		if len(r.Text) > len(in) {
			t.Fatalf("output %d bytes > input %d", len(r.Text), len(in))
		}
		if r2 := s.Apply(tool, in); !reflect.DeepEqual(r2, r) {
			t.Fatal("not deterministic")
		}
		if !r.Squashed && r.Text != in {
			t.Fatal("Squashed=false but text changed")
		}
		if utf8.ValidString(in) && !utf8.ValidString(r.Text) {
			t.Fatalf("invalid UTF-8 out of valid input: %q", r.Text)
		}
		if json.Valid([]byte(in)) && !json.Valid([]byte(r.Text)) {
			t.Fatalf("JSON in, not JSON out: %q", r.Text)
		}
	})
}

// FuzzApplyCall checks ApplyCall with a shell call's command: no panic,
// never longer, deterministic, valid UTF-8 stays valid, and a read within
// the cap is never changed. A small floor, budget and read cap make cuts
// happen on short inputs.
func FuzzApplyCall(f *testing.F) {
	for _, seed := range []struct{ cmd, out string }{
		{"sed -n '774,810p' tests/test_x.py", goLines(40, 774, false)},
		{"nl -ba a.py | sed -n '10,40p'", goLines(30, 10, true)},
		{"cd /w && cat server.go", goLines(60, 1, false)},
		{`bash -lc 'tail -n 5000 a.log'`, strings.Repeat("ERROR boom\n", 50)},
		{"cat <<'EOF' > a.py\nprint(1)\nEOF\npython a.py", "Traceback (most recent call last):\n  File \"a.py\", line 1\nValueError: x\n"},
		{"awk 'NR>=10 && NR<=20 {print NR\": \"$0}' a.py", goLines(11, 10, true)},
		{"sed -n '/a/,/b/{p;q}' f; echo \"$(cat g)\" | more +3", "é\n" + strings.Repeat("x y z\n", 80)},
		{"timeout -s KILL 10 env A=1 sudo -u x cat a b", "<returncode>0</returncode>\n<output>\n" + goLines(50, 1, false) + "</output>"},
	} {
		f.Add(seed.cmd, seed.out)
	}
	s := New(Config{MinBytes: 1, Budget: 400, ReadMaxBytes: 300})
	f.Fuzz(func(t *testing.T, cmd, in string) {
		c := Call{Tool: "bash", Args: commandArgs(cmd)}
		r := s.ApplyCall(c, in)
		if len(r.Text) > len(in) {
			t.Fatalf("output %d bytes > input %d", len(r.Text), len(in))
		}
		if r2 := s.ApplyCall(c, in); !reflect.DeepEqual(r2, r) {
			t.Fatal("not deterministic")
		}
		if utf8.ValidString(in) && !utf8.ValidString(r.Text) {
			t.Fatalf("invalid UTF-8 out of valid input: %q", r.Text)
		}
		if _, read := s.shellRead(c); read && len(in) <= 300 && r.Text != in {
			t.Fatalf("a read within the cap was changed: %q", r.Text)
		}
	})
}

// checkKept checks the promises of a squash that keeps originals: the
// output is still never longer, JSON stays JSON, every original kept is
// named in the output under its own text's reference, and the input is
// one of them whenever the output changed it.
func checkKept(t *testing.T, r Result, in string) {
	t.Helper()
	if len(r.Text) > len(in) {
		t.Fatalf("output %d bytes > input %d", len(r.Text), len(in))
	}
	if json.Valid([]byte(in)) && !json.Valid([]byte(r.Text)) {
		t.Fatalf("JSON in, not JSON out: %q", r.Text)
	}
	whole := false
	for _, o := range r.Originals {
		if o.Ref != expand.Ref(o.Text) || !strings.Contains(r.Text, o.Ref) {
			t.Fatalf("original %s (ref of its text %s) kept, named in the output: %v", o.Ref, expand.Ref(o.Text), strings.Contains(r.Text, o.Ref))
		}
		whole = whole || o.Text == in
	}
	if r.Squashed && !whole && !json.Valid([]byte(in)) {
		t.Fatalf("squashed, and the input is not among the originals kept")
	}
}
