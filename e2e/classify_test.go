//go:build e2e

package e2e

import (
	"path/filepath"
	"testing"
)

// The real llama-server, given as the upstream with nothing said about
// it, is found to be a local model server (its summary calls and live
// requests kept apart, priced by prefill), and the startup says so for
// every format.
func TestRealLlamaServerIsClassifiedLocal(t *testing.T) {
	l := startLlama(t)
	c := startCtxpress(t, l.URL(), filepath.Join(t.TempDir(), "ctxpress.db"), "")
	routes := c.Logs("route")
	if len(routes) != 4 { // chat, Responses, Messages, Gemini
		t.Fatalf("%d route lines at startup, want 4: %v", len(routes), routes)
	}
	for _, r := range routes {
		if r["upstream_is"] != "local" || r["found"] != "llama.cpp" || r["because"] == "" {
			t.Errorf("route %v: want llama-server found local, with the reason", r)
		}
	}
}
