package layout

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// shellBudget is the most non-test lines proxy/ may hold: the HTTP shell
// only (server, routing, auth, forward, relay, upstream client, errors).
const shellBudget = 3000

// importRule says what one package of the shell must not import itself
// (its non-test files), and why.
type importRule struct {
	pkg       string
	forbidden []string
	why       string
}

// shellRules are DESIGN.md's "must not" column for the shell's packages.
var shellRules = []importRule{
	{"turn", []string{"net/http", "github.com/valyala/fasthttp", module + "/proxy"}, "a turn knows no HTTP"},
	{"compaction", []string{module + "/turn", module + "/proxy"}, "the compaction engine carries out a plan; it does not run a turn"},
	{"admin", []string{module + "/turn", module + "/compaction", module + "/proxy", module + "/state/recorder"},
		"admin never reaches into a turn"},
	{"state/recorder", []string{module + "/turn", module + "/compaction", module + "/proxy", module + "/admin"},
		"the recorder writes records; it knows nothing of the request"},
}

// importViolations lists, for package pkg importing imports, each import
// the rules forbid, with the rule's reason.
func importViolations(rules []importRule, pkg string, imports []string) []string {
	var out []string
	for _, r := range rules {
		if module+"/"+r.pkg != pkg {
			continue
		}
		for _, imp := range imports {
			if slices.Contains(r.forbidden, imp) {
				out = append(out, fmt.Sprintf("%s imports %s: %s", r.pkg, imp, r.why))
			}
		}
	}
	return out
}

func TestImportViolationsNameTheRule(t *testing.T) {
	for _, tc := range []struct {
		pkg     string
		imports []string
		want    int
	}{
		{module + "/turn", []string{module + "/rewrite", module + "/compaction", "bytes"}, 0},
		{module + "/turn", []string{"github.com/valyala/fasthttp"}, 1},
		{module + "/turn", []string{"net/http", module + "/proxy"}, 2},
		{module + "/admin", []string{module + "/turn", module + "/state"}, 1},
		{module + "/state/recorder", []string{module + "/rewrite", module + "/admin"}, 1},
		{module + "/proxy", []string{module + "/turn"}, 0}, // no rule for the shell itself
	} {
		got := importViolations(shellRules, tc.pkg, tc.imports)
		if len(got) != tc.want {
			t.Errorf("%s importing %v: %q, want %d violations", tc.pkg, tc.imports, got, tc.want)
		}
		for _, v := range got {
			if !strings.Contains(v, " imports ") || !strings.Contains(v, ": ") {
				t.Errorf("violation %q does not say what and why", v)
			}
		}
	}
}

// TestShellPackagesKeepToTheirJobs: go list shows each of the shell's
// packages importing nothing its rule forbids.
func TestShellPackagesKeepToTheirJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	var args []string
	for _, r := range shellRules {
		args = append(args, "./"+r.pkg)
	}
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Imports"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	seen := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		seen++
		for _, v := range importViolations(shellRules, p.ImportPath, p.Imports) {
			t.Error(v)
		}
	}
	if seen != len(shellRules) {
		t.Fatalf("go list listed %d of the %d packages", seen, len(shellRules))
	}
}

// TestProxyIsTheShellOnly: proxy/ holds at most shellBudget lines of
// non-test code; what grows past it belongs in a package of its own.
func TestProxyIsTheShellOnly(t *testing.T) {
	files, err := filepath.Glob("../../proxy/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no proxy files: %v", err)
	}
	total := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		n, err := countLines(f)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total > shellBudget {
		t.Errorf("proxy/ has %d lines of non-test code, over its %d", total, shellBudget)
	}
}

func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		n++
	}
	return n, sc.Err()
}
