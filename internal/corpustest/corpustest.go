// Package corpustest finds the shared corpus of real agent traces and logs
// (../shared/corpus, see its README) for tests and benchmarks, which read it
// in place rather than copying it into the repository.
package corpustest

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// Find returns the corpus directory: $CTXPRESS_CORPUS, or a shared/corpus
// (holding traces/) found walking up from the working directory, which is
// the package directory under go test. It returns "" and why when there is
// none.
func Find() (dir, why string) {
	if d := os.Getenv("CTXPRESS_CORPUS"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "traces")); err != nil {
			return "", "corpus not found: CTXPRESS_CORPUS=" + d + " has no traces/ directory"
		}
		return d, ""
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err.Error()
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		d := filepath.Join(dir, "shared", "corpus")
		if _, err := os.Stat(filepath.Join(d, "traces")); err == nil {
			return d, ""
		}
		if filepath.Dir(dir) == dir {
			return "", "corpus not found: no shared/corpus/traces above " + wd + "; set CTXPRESS_CORPUS to run the corpus tests"
		}
	}
}

// Dir returns the corpus directory, and skips the test when it is absent.
func Dir(tb testing.TB) string {
	tb.Helper()
	d, why := Find()
	if d == "" {
		tb.Skip(why)
	}
	return d
}

// Trace is one corpus request body (traces/*.json).
type Trace struct {
	Name string
	Body []byte
}

// Traces reads every corpus trace, sorted by name, and skips the test when
// the corpus or its traces are absent.
func Traces(tb testing.TB) []Trace {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(Dir(tb), "traces", "*.json"))
	if err != nil {
		tb.Fatal(err)
	}
	sort.Strings(files)
	ts := make([]Trace, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		ts = append(ts, Trace{Name: filepath.Base(f), Body: b})
	}
	if len(ts) == 0 {
		tb.Skip("corpus has no traces")
	}
	return ts
}
