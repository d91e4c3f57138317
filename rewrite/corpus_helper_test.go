package rewrite

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/ctxpress/ctxpress/internal/corpustest"
)

// corpusDir returns the shared corpus, skipping the test when it is absent.
func corpusDir(tb testing.TB) string { return corpustest.Dir(tb) }

// findCorpus returns the corpus directory, or "" and why it is missing.
func findCorpus() (dir, why string) { return corpustest.Find() }

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
