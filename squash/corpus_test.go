package squash

import (
	"testing"

	"github.com/ctxpress/ctxpress/internal/corpustest"
)

// corpusDir returns the shared corpus, skipping the test when it is absent.
func corpusDir(t testing.TB) string { return corpustest.Dir(t) }
