package squash

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
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
	f.Fuzz(func(t *testing.T, tool, in string) {
		r := s.Apply(tool, in)
		if len(r.Text) > len(in) {
			t.Fatalf("output %d bytes > input %d", len(r.Text), len(in))
		}
		if r2 := s.Apply(tool, in); r2 != r {
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
