package squash

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// codexOutput wraps a command's output as codex ≤ 0.93 sends every shell
// result over chat completions.
func codexOutput(t *testing.T, out string, exit int) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"output": out, "metadata": map[string]any{"exit_code": exit, "duration_seconds": 0.3}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func pytestRunWithFailure() string {
	var b strings.Builder
	b.WriteString("============================= test session starts ==============================\nplatform linux -- Python 3.11.4, pytest-7.4.0\ncollected 60 items\n\n")
	for i := range 60 {
		fmt.Fprintf(&b, "tests/test_a.py::test_func_%d PASSED                                   [%3d%%]\n", i, (i+1)*100/60)
	}
	b.WriteString("\n=================================== FAILURES ===================================\n" +
		">       assert func_a_42(3) == 129\nE       assert 127 == 129\n\ntests/test_a.py:211: AssertionError\n" +
		"FAILED tests/test_a.py::test_func_42 - assert 127 == 129\n========================= 1 failed, 59 passed in 0.12s =========================\n")
	return b.String()
}

func pythonSource() string {
	var b strings.Builder
	for i := range 80 {
		fmt.Fprintf(&b, "def func_%d(x, y=None):\n    total = x * %d + (y or 3)\n    if total > 100:\n        return total - 1\n    return total\n\n", i, i)
	}
	return b.String()
}

// TestCommandOutputWrappedInJSONIsSquashedAsText: codex 0.93 sends every
// shell result as {"output": "...", "metadata": {...}}. Squashed as JSON
// prose, the output string kept its first 32 characters: a failing test
// run lost its failure, a grep lost every match but the first.
func TestCommandOutputWrappedInJSONIsSquashedAsText(t *testing.T) {
	var grep strings.Builder
	for i := range 180 {
		fmt.Fprintf(&grep, "a.py:%d:def func_a_%d(x, y=None):\n", 5+7*i, i)
	}
	cases := []struct {
		name     string
		output   string
		mustKeep []string
		whole    bool // the output string comes back byte-identical
	}{
		{"a failing test run keeps its failure and summary, as the same text unwrapped does",
			codexOutput(t, pytestRunWithFailure(), 1),
			[]string{"E       assert 127 == 129", "FAILED tests/test_a.py::test_func_42", "1 failed, 59 passed", `"exit_code":1`}, false},
		{"a long listing keeps its first and last lines and says how many were left out",
			codexOutput(t, grep.String(), 0),
			[]string{`a.py:5:def func_a_0`, `a.py:68:def func_a_9(`, `a.py:1258:def func_a_179`, "[lines 11-170 omitted; rerun narrowed"}, false},
		{"source code in the string is kept whole, like a read",
			codexOutput(t, pythonSource(), 0), []string{"def func_79(x, y=None)"}, true},
	}
	s := New(Config{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := s.ApplyCall(Call{Tool: "shell", Args: `{"command":["bash","-lc","make test"]}`}, c.output)
			if !json.Valid([]byte(r.Text)) {
				t.Fatalf("squashed output is not JSON: %.300s", r.Text)
			}
			var got struct {
				Output   string         `json:"output"`
				Metadata map[string]any `json:"metadata"`
			}
			if err := json.Unmarshal([]byte(r.Text), &got); err != nil || got.Metadata == nil {
				t.Fatalf("the wrapper's members are gone: %v %.300s", err, r.Text)
			}
			for _, want := range c.mustKeep {
				if !strings.Contains(r.Text, want) && !strings.Contains(got.Output, want) {
					t.Errorf("lost %q; got %.600s", want, r.Text)
				}
			}
			if c.whole && r.Squashed {
				t.Errorf("source was squashed: %s", r.StatsLine())
			}
			if !c.whole && !r.Squashed {
				t.Errorf("not squashed at all: %s", r.StatsLine())
			}
		})
	}
}

// TestSquashedJSONStringIsNotCutAgain: a string that already ends in a
// cut marker is a squash's own output; cutting it again would make squash
// of a squashed output change it (a blob with "…[644 chars]" has a space
// and read as prose).
func TestSquashedJSONStringIsNotCutAgain(t *testing.T) {
	blob := strings.Repeat("2xAbajINXupZ6Oh+oxyOst6WmKRoPenOXvSx1Rx2X+WV", 6)
	in := `{"blob":"` + blob + `…[644 chars]"}`
	if out := squashJSON(in); out != in {
		t.Errorf("re-cut: %s", out)
	}
}
