// Package layout holds the checks that keep the repository's layout as
// DESIGN.md draws it: a pure core (rewrite, compactor, squash, wire, and
// history, the values rewrite and state share) beneath an I/O shell
// (proxy, state, main).
package layout

import (
	"os/exec"
	"strings"
	"testing"
)

// core are the packages that must do no I/O of their own.
var core = []string{"./rewrite", "./compactor", "./squash", "./wire/...", "./redact", "./history"}

// forbidden are the dependencies that would mean network or storage I/O.
var forbidden = []string{"net", "net/http", "github.com/valyala/fasthttp", "go.etcd.io/bbolt"}

// TestCoreDoesNoIO: go list -deps of the core names no network or storage
// package, so the core stays pure functions a table test can drive.
func TestCoreDoesNoIO(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	cmd := exec.Command("go", append([]string{"list", "-deps"}, core...)...)
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := map[string]bool{}
	for _, d := range strings.Fields(string(out)) {
		deps[d] = true
	}
	if !deps["github.com/ctxpress/ctxpress/rewrite"] {
		t.Fatalf("go list -deps did not list the core itself:\n%s", out)
	}
	for _, f := range forbidden {
		if deps[f] {
			t.Errorf("the core depends on %s", f)
		}
	}
}

// TestHistoryImportsNoneOfTheModule: the values rewrite and state share
// depend on neither, so both can import them.
func TestHistoryImportsNoneOfTheModule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	cmd := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "./history")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, imp := range strings.Fields(string(out)) {
		if strings.HasPrefix(imp, "github.com/ctxpress/ctxpress/") {
			t.Errorf("history imports %s", imp)
		}
	}
}
