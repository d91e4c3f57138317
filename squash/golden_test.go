package squash

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// goldenTool is the tool name a golden case is squashed as: the exempt case
// pretends to be a file read, the rest are shell commands.
func goldenTool(name string) string {
	if strings.Contains(name, "exempt") {
		return "read_file"
	}
	return "bash"
}

// TestGolden squashes testdata/*.input and compares with *.golden (run with
// -update to rewrite them). It also checks the properties every output must
// have, and idempotence: squashing a golden output again returns it
// unchanged (byte-identical, Squashed=false), because a second pass can not
// save another 10% of tokens or falls under the size floor.
func TestGolden(t *testing.T) {
	inputs, _ := filepath.Glob("testdata/*.input")
	if len(inputs) == 0 {
		t.Fatal("no testdata/*.input")
	}
	s := New(Config{})
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".input")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			tool := goldenTool(name)
			r := s.Apply(tool, string(data))
			checkOutput(t, string(data), r)
			golden := strings.TrimSuffix(in, ".input") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(r.Text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal([]byte(r.Text), want) {
				t.Errorf("output differs from %s (run go test -update and review the diff)", golden)
			}
			t.Logf("%s", r.StatsLine())
			again := s.Apply(tool, r.Text)
			if again.Squashed || again.Text != r.Text {
				t.Errorf("not idempotent: squashing the output again changed it (%s)", again.StatsLine())
			}
		})
	}
}

// checkOutput asserts what every Apply result must satisfy.
func checkOutput(t *testing.T, in string, r Result) {
	t.Helper()
	if len(r.Text) > len(in) {
		t.Errorf("output (%d bytes) longer than input (%d)", len(r.Text), len(in))
	}
	if r.Squashed != (r.Text != in) {
		t.Errorf("Squashed=%v but text changed=%v", r.Squashed, r.Text != in)
	}
	if !r.Squashed && r.Shape != "" {
		t.Errorf("untouched output reports shape %q", r.Shape)
	}
	if r.BytesBefore != len(in) || r.BytesAfter != len(r.Text) {
		t.Errorf("byte stats %d->%d, want %d->%d", r.BytesBefore, r.BytesAfter, len(in), len(r.Text))
	}
	if utf8.ValidString(in) && !utf8.ValidString(r.Text) {
		t.Error("valid UTF-8 input gave invalid UTF-8 output")
	}
	if r.Shape == ShapeJSON && !json.Valid([]byte(r.Text)) {
		t.Error("json output is not valid JSON")
	}
	if json.Valid([]byte(in)) && !json.Valid([]byte(r.Text)) {
		t.Error("JSON input gave non-JSON output")
	}
	if r.Squashed {
		for _, l := range strings.Split(r.Text, "\n") {
			if strings.Contains(l, " omitted") && strings.Contains(l, "[lines ") && !strings.HasPrefix(l, "[lines ") {
				t.Errorf("marker not on its own line: %q", l)
			}
		}
	}
}
