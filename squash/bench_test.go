package squash

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Benchmarks report MB/s of input through Apply, per shape, over the corpus:
// the loghub logs (log), the trace files themselves (json, up to 868 KB),
// and every trace tool output above the floor (mostly generic).

func readCorpusFiles(b *testing.B, pattern string) []string {
	b.Helper()
	files, _ := filepath.Glob(filepath.Join(corpusDir(b), pattern))
	if len(files) == 0 {
		b.Skip("no corpus files for " + pattern)
	}
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, string(data))
	}
	return out
}

func benchApply(b *testing.B, inputs []string, want Shape) {
	s := New(Config{})
	total := 0
	for _, in := range inputs {
		total += len(in)
		if want != "" {
			if got := Detect(in); got != want {
				b.Fatalf("input detected as %s, want %s", got, want)
			}
		}
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, in := range inputs {
			s.Apply("bash", in)
		}
	}
}

func BenchmarkApplyLog(b *testing.B) {
	var logs []string
	for _, l := range readCorpusFiles(b, "logs/*_2k.log") {
		if Detect(l) == ShapeLog {
			logs = append(logs, l)
		}
	}
	benchApply(b, logs, ShapeLog)
}

func BenchmarkApplyJSON(b *testing.B) {
	benchApply(b, readCorpusFiles(b, "traces/*.json"), ShapeJSON)
}

func BenchmarkApplyGeneric(b *testing.B) {
	var in []string
	for _, o := range corpusToolOutputs(b) {
		if len(o.text) >= DefaultMinBytes && Detect(o.text) == ShapeGeneric {
			in = append(in, o.text)
		}
	}
	benchApply(b, in, ShapeGeneric)
}

func BenchmarkApplyToolOutputs(b *testing.B) {
	var in []string
	for _, o := range corpusToolOutputs(b) {
		if len(o.text) >= DefaultMinBytes {
			in = append(in, o.text)
		}
	}
	benchApply(b, in, "")
}

func BenchmarkApplyAdversarialLine(b *testing.B) {
	benchApply(b, []string{strings.Repeat("a1:/ ", 1<<20/5)}, "")
}
