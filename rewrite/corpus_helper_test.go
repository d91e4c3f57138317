package rewrite

import (
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
	var ts []trace
	for _, c := range corpustest.Traces(tb) {
		ts = append(ts, trace{name: c.Name, body: c.Body})
	}
	return ts
}
