package squash

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestFloorAndExempt(t *testing.T) {
	big := strings.Repeat("ERROR something broke badly here\n", 200)
	s := New(Config{})
	if r := s.Apply("bash", big[:1499]); r.Squashed || r.Text != big[:1499] {
		t.Error("output under the 1500-byte floor was changed")
	}
	for _, tool := range DefaultExemptTools {
		if r := s.Apply(tool, big); r.Squashed || r.Text != big {
			t.Errorf("exempt tool %s was squashed", tool)
		}
	}
	if r := s.Apply("bash", big); !r.Squashed {
		t.Error("a large repetitive log was not squashed")
	}
	// Names are exact and case-sensitive.
	if r := s.Apply("READ_FILE", big); !r.Squashed {
		t.Error("READ_FILE matched read_file")
	}
	custom := New(Config{ExemptTools: []string{"mytool"}, MinBytes: 100})
	if r := custom.Apply("mytool", big); r.Squashed {
		t.Error("custom exempt tool was squashed")
	}
	if r := custom.Apply("read_file", big); !r.Squashed {
		t.Error("custom list should replace the default list")
	}
}

func TestNotSmallerReturnsOriginal(t *testing.T) {
	// 22 lines: generic keeps 20 of them, which saves less than 10%.
	var b strings.Builder
	for i := 0; i < 22; i++ {
		fmt.Fprintf(&b, "%02d the quick brown fox jumps over the lazy dog again and again and again\n", i)
	}
	in := b.String()
	r := New(Config{}).Apply("bash", in)
	if r.Squashed || r.Text != in || r.Shape != "" || r.TokensAfter != r.TokensBefore {
		t.Errorf("want the input back untouched, got squashed=%v shape=%q", r.Squashed, r.Shape)
	}
}

func TestMarkerPerGap(t *testing.T) {
	var lines []string
	for i := 0; i < 300; i++ {
		switch i {
		case 100, 200:
			lines = append(lines, fmt.Sprintf("error: step %d failed", i))
		default:
			lines = append(lines, fmt.Sprintf("step %d ok", i))
		}
	}
	out := New(Config{}).Apply("bash", strings.Join(lines, "\n")+"\n").Text
	var markers []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "[lines ") && strings.HasSuffix(l, " omitted]") {
			markers = append(markers, l)
		}
		if strings.HasPrefix(strings.TrimSpace(l), "//") || strings.HasPrefix(strings.TrimSpace(l), "#") {
			t.Errorf("comment-shaped line in output: %q", l)
		}
	}
	// Gaps: after the head, between the two errors, before the tail.
	if len(markers) != 3 {
		t.Fatalf("want 3 gap markers, got %d:\n%s", len(markers), out)
	}
	total := 0
	for _, m := range markers {
		var a, b int
		if _, err := fmt.Sscanf(m, "[lines %d-%d omitted]", &a, &b); err != nil {
			t.Fatalf("bad marker %q", m)
		}
		total += b - a + 1
	}
	kept := strings.Count(out, "\n") + 1 - len(markers)
	if total+kept-1 != 300 { // -1: the trailing newline's empty field
		t.Errorf("markers account for %d lines, kept %d, want 300 in all", total, kept-1)
	}
}

func TestJSONRules(t *testing.T) {
	prose := strings.Repeat("the same words again and again ", 10)
	doc := map[string]any{
		"short":   "twenty chars exactly",
		"prose":   prose,
		"sha":     "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"path":    "/home/dev/widget/internal/render/layout/flex/engine.go",
		"url":     "https://example.com/a/b/c?x=1&y=2&z=3",
		"problem": "connection refused while contacting the upstream registry mirror at port 443 " + prose,
		"n":       []int{5, 1, 7, 2, 8, 3, 99, 4, 6, -3},
		"empty":   []any{},
		"deep":    map[string]any{"k": []any{true, false, nil, 1.5e10}},
	}
	data, _ := json.Marshal(doc)
	out := squashJSON(string(data))
	if !json.Valid([]byte(out)) {
		t.Fatalf("invalid JSON: %s", out)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	for k := range doc {
		if _, ok := got[k]; !ok {
			t.Errorf("key %q lost", k)
		}
	}
	for _, k := range []string{"short", "sha", "path", "url"} {
		if got[k] != doc[k] {
			t.Errorf("%s changed: %v", k, got[k])
		}
	}
	if p := got["prose"].(string); !strings.HasSuffix(p, " chars]") || len(p) >= len(prose) {
		t.Errorf("prose not elided: %q", p)
	}
	if p := got["problem"].(string); !strings.HasPrefix(p, "connection refused while contacting the upstream registry") {
		t.Errorf("error-like string cut too short: %q", p)
	}
	n := got["n"].([]any)
	want := []any{5.0, 1.0, 7.0, "[3 more items]", 99.0, "[2 more items]", -3.0}
	if fmt.Sprint(n) != fmt.Sprint(want) {
		t.Errorf("array = %v, want %v (head, max, min, one marker per gap)", n, want)
	}
	if !strings.Contains(out, `"deep":{"k":[true,false,null,15000000000]}`) {
		t.Errorf("structure or number changed: %s", out)
	}
}

func TestJSONKeyOrderKept(t *testing.T) {
	in := `{"z":1,"a":2,"m":{"y":3,"b":4},"list":[` + strings.Repeat(`{"id":1,"v":"x"},`, 30) + `{"id":2,"v":"x"}]}`
	out := squashJSON(in)
	if !strings.HasPrefix(out, `{"z":1,"a":2,"m":{"y":3,"b":4},"list":[`) {
		t.Errorf("keys reordered: %s", out[:60])
	}
}

func TestJSONCutsNeverSplitEscapesOrRunes(t *testing.T) {
	for _, body := range []string{
		strings.Repeat(`\ud83d\ude00 `, 60),
		strings.Repeat(`é à ü `, 60),
		strings.Repeat(`a\"b\\c\n `, 60),
		strings.Repeat(`\u00e9 x `, 60),
	} {
		in := `{"s":"` + body + `"}`
		out := squashJSON(in)
		var v map[string]string
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("invalid JSON for %q...: %v\n%s", body[:12], err, out)
		}
		if !utf8.ValidString(out) || strings.ContainsRune(v["s"], utf8.RuneError) {
			t.Errorf("cut split a character: %q", v["s"])
		}
		if !strings.Contains(v["s"], " chars]") {
			t.Errorf("long string not cut: %q", v["s"])
		}
	}
}

func TestAdversarialInputs(t *testing.T) {
	const mib = 1 << 20
	inputs := map[string]string{
		"one long line":     strings.Repeat("abc def ", mib/8),
		"digits":            strings.Repeat("1234567890", mib/10),
		"slashes":           strings.Repeat("/", mib),
		"colons":            strings.Repeat("a:", mib/2),
		"brackets":          strings.Repeat("[", mib),
		"newlines":          strings.Repeat("\n", mib),
		"error lines":       strings.Repeat("error: x\n", mib/9),
		"count phrases":     strings.Repeat("1 failed ", mib/9),
		"deep json":         strings.Repeat("[", 5000) + strings.Repeat("]", 5000),
		"json long string":  `{"s":"` + strings.Repeat("ab", mib/2) + `"}`,
		"json escapes":      `["` + strings.Repeat(`\\`, mib/2) + `"]`,
		"invalid utf8 line": strings.Repeat("\xff\xc3", mib/2),
		"multibyte line":    strings.Repeat("日本語", mib/9),
	}
	s := New(Config{})
	for name, in := range inputs {
		r := s.Apply("bash", in)
		if len(r.Text) > len(in) {
			t.Errorf("%s: output longer than input", name)
		}
		if utf8.ValidString(in) && !utf8.ValidString(r.Text) {
			t.Errorf("%s: invalid UTF-8 output", name)
		}
		if json.Valid([]byte(in)) && !json.Valid([]byte(r.Text)) {
			t.Errorf("%s: JSON became invalid", name)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	s := New(Config{})
	in := strings.Repeat("2024-01-01 00:00:00 ERROR svc: boom 1\n2024-01-01 00:00:01 INFO svc: ok\n", 200)
	want := s.Apply("bash", in).Text
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				if got := s.Apply("bash", in).Text; got != want {
					t.Error("concurrent Apply gave a different result")
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestCustomTokenCounter(t *testing.T) {
	calls := 0
	s := New(Config{CountTokens: func(s string) int { calls++; return len(s) }})
	in := strings.Repeat("ERROR boom\n", 300)
	r := s.Apply("bash", in)
	if calls == 0 || r.TokensBefore != len(in) || r.TokensAfter != len(r.Text) {
		t.Errorf("custom counter not used: calls=%d %s", calls, r.StatsLine())
	}
}

func TestStatsLine(t *testing.T) {
	r := Result{Shape: ShapeLog, Squashed: true, BytesBefore: 287848, BytesAfter: 9123, TokensBefore: 71000, TokensAfter: 2300}
	if got, want := r.StatsLine(), "shape=log bytes 287848->9123 tokens 71000->2300 (-96.8%)"; got != want {
		t.Errorf("StatsLine = %q, want %q", got, want)
	}
	if got := (Result{BytesBefore: 10, BytesAfter: 10, TokensBefore: 3, TokensAfter: 3}).StatsLine(); !strings.HasPrefix(got, "shape=none ") {
		t.Errorf("untouched StatsLine = %q", got)
	}
}

func TestApproxTokens(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"hello world", 4},  // 5 letters -> 2 each
		{"id 1234567", 4},   // 1 + 3 digit groups
		{"{\"a\":1}", 7},    // 5 punctuation, a, 1
		{"日本語", 3},          // one per rune
		{"  \t  ", 0},       // whitespace is free
		{"line\nline\n", 4}, // words and newlines
	}
	for _, tt := range tests {
		if got := ApproxTokens(tt.in); got != tt.want {
			t.Errorf("ApproxTokens(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
