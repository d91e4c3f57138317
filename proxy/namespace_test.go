package proxy

import (
	"testing"

	"github.com/ctxpress/ctxpress/state"
)

// The remembered namespace is always the credential's own, whichever
// credential came before it.
func TestNamespaceMemoIsTheCredentialsOwn(t *testing.T) {
	var m namespaceMemo
	for _, c := range []string{"Bearer sk-a", "Bearer sk-a", "Bearer sk-b", "", "Bearer sk-a", "", "x-api-key\x00k", "Bearer sk-b"} {
		if got, want := m.of([]byte(c)), state.Namespace([]byte(c)); got != want {
			t.Errorf("namespace of %q: %s, want %s", c, got, want)
		}
	}
}
