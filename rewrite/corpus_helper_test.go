package rewrite

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// corpusDir returns the shared corpus (../shared/corpus from the repository,
// found by walking up from the package directory, or $CTXPRESS_CORPUS), and
// skips the test when it is absent.
func corpusDir(tb testing.TB) string {
	tb.Helper()
	d, why := findCorpus()
	if d == "" {
		tb.Skip(why)
	}
	return d
}

// findCorpus returns the corpus directory, or "" and why it is missing.
func findCorpus() (dir, why string) {
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

// trace is one corpus request body.
type trace struct {
	name string
	body []byte
}

// loadTraces reads every corpus trace, sorted by name.
func loadTraces(tb testing.TB) []trace {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(corpusDir(tb), "traces", "*.json"))
	if err != nil {
		tb.Fatal(err)
	}
	sort.Strings(files)
	var ts []trace
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		ts = append(ts, trace{name: filepath.Base(f), body: b})
	}
	if len(ts) == 0 {
		tb.Skip("corpus has no traces")
	}
	return ts
}
