package squash

import (
	"os"
	"path/filepath"
	"testing"
)

// corpusDir locates the shared test corpus: $CTXPRESS_CORPUS, or a
// shared/corpus directory found walking up from the package directory (the
// repository's parent holds it). Tests that need it skip when it is absent.
func corpusDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("CTXPRESS_CORPUS"); d != "" {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d
		}
		t.Skipf("CTXPRESS_CORPUS=%s is not a directory", d)
	}
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Skipf("corpus: %v", err)
	}
	for {
		c := filepath.Join(dir, "shared", "corpus")
		if st, err := os.Stat(c); err == nil && st.IsDir() {
			return c
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("corpus not found: set CTXPRESS_CORPUS or place shared/corpus in a parent directory")
		}
		dir = parent
	}
}
