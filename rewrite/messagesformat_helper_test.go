package rewrite

import (
	"os"
	"path/filepath"
	"testing"
)

// messagesCapture returns a Claude Code 2.1.332 request captured byte-exact
// (internal/messagestest/testdata).
func messagesCapture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "messagestest", "testdata", "claude-code-2.1.332-"+name+".json"))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
