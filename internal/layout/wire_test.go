package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/ctxpress/ctxpress"

// compactorPkg is the summariser: wire must not depend on it, so the
// compactor can keep depending on wire.
const compactorPkg = module + "/compactor"

// sharedWire are the packages under wire/ every adapter may import: the
// neutral types and the stream reader. Any other package under wire/ is
// (part of) an adapter.
var sharedWire = map[string]bool{module + "/wire": true, module + "/wire/sse": true}

// wirePackage is what the rules look at in one package under wire/.
type wirePackage struct {
	path string
	// imports maps each package imported by the package or its tests to
	// the files that import it (empty when they could not be read).
	imports map[string][]string
	// deps is every package the package's non-test build depends on.
	deps []string
}

// adapterOf returns the wire adapter path belongs to (…/wire/chat for
// wire/chat and anything under it), or "" when it is not in one.
func adapterOf(path string) string {
	rest, ok := strings.CutPrefix(path, module+"/wire/")
	if !ok {
		return ""
	}
	first, _, _ := strings.Cut(rest, "/")
	if a := module + "/wire/" + first; !sharedWire[a] {
		return a
	}
	return ""
}

func isCompactor(path string) bool {
	return path == compactorPkg || strings.HasPrefix(path, compactorPkg+"/")
}

// wireViolations returns, for p, every import that breaks the adapter
// rules: an adapter imports no other adapter (shared code lives in wire),
// and nothing under wire/ imports the compactor (the caller passes what a
// summary call needs in wire.SummaryCall). Imports by tests count too;
// dependencies through other packages count for the non-test build.
func wireViolations(p wirePackage) []string {
	var out []string
	own := adapterOf(p.path)
	bad := func(dep string) string {
		switch a := adapterOf(dep); {
		case a != "" && a != own:
			return "another wire adapter; shared code belongs in package wire"
		case isCompactor(dep):
			return "the compactor; pass what the summary call needs in wire.SummaryCall"
		}
		return ""
	}
	imported := make([]string, 0, len(p.imports))
	for imp := range p.imports {
		imported = append(imported, imp)
	}
	slices.Sort(imported)
	for _, imp := range imported {
		if why := bad(imp); why != "" {
			where := ""
			if files := p.imports[imp]; len(files) > 0 {
				where = " in " + strings.Join(files, ", ")
			}
			out = append(out, fmt.Sprintf("%s imports %s%s: %s", p.path, imp, where, why))
		}
	}
	for _, dep := range p.deps {
		if _, direct := p.imports[dep]; !direct {
			if why := bad(dep); why != "" {
				out = append(out, fmt.Sprintf("%s depends on %s through its imports (go list -deps %s): %s", p.path, dep, p.path, why))
			}
		}
	}
	return out
}

// TestWireAdaptersStandAlone: no package under wire/ imports another wire
// adapter or the compactor, so each format's adapter can change (or a new
// one be added) without touching the others, and compactor may import wire.
func TestWireAdaptersStandAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	pkgs := listWire(t)
	if len(pkgs) < 2 {
		t.Fatalf("go list found %d packages under wire/", len(pkgs))
	}
	for _, p := range pkgs {
		for _, v := range wireViolations(p) {
			t.Error(v)
		}
	}
}

// TestWireViolationsNameTheImport: the rules catch each kind of breach and
// say which package imports what, where.
func TestWireViolationsNameTheImport(t *testing.T) {
	chat, messages, gemini := module+"/wire/chat", module+"/wire/messages", module+"/wire/gemini"
	for _, tc := range []struct {
		name string
		p    wirePackage
		want []string
	}{
		{"shared packages and its own tests are allowed",
			wirePackage{path: chat, imports: map[string][]string{module + "/wire": nil, module + "/wire/sse": nil, chat: {"example_test.go"}},
				deps: []string{module + "/wire", module + "/wire/sse"}}, nil},
		{"an adapter importing another",
			wirePackage{path: messages, imports: map[string][]string{chat: {"summary.go"}}},
			[]string{messages + " imports " + chat + " in summary.go: another wire adapter"}},
		{"a future adapter's tests importing one",
			wirePackage{path: gemini, imports: map[string][]string{messages: {"gemini_test.go"}}},
			[]string{gemini + " imports " + messages + " in gemini_test.go: another wire adapter"}},
		{"the wire package importing an adapter",
			wirePackage{path: module + "/wire", imports: map[string][]string{chat: nil}},
			[]string{module + "/wire imports " + chat + ": another wire adapter"}},
		{"an adapter importing the compactor",
			wirePackage{path: chat, imports: map[string][]string{compactorPkg: {"summary.go"}}},
			[]string{chat + " imports " + compactorPkg + " in summary.go: the compactor"}},
		{"the compactor through another package",
			wirePackage{path: module + "/wire/sse", imports: map[string][]string{module + "/x": nil}, deps: []string{module + "/x", compactorPkg}},
			[]string{module + "/wire/sse depends on " + compactorPkg + " through its imports"}},
	} {
		got := wireViolations(tc.p)
		if len(got) != len(tc.want) {
			t.Errorf("%s: got %q, want %d violations", tc.name, got, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if !strings.HasPrefix(got[i], w) {
				t.Errorf("%s: got %q, want it to start with %q", tc.name, got[i], w)
			}
		}
	}
}

// listWire lists the packages under wire/ with go list, and reads their
// files' imports to say where each import is.
func listWire(t *testing.T) []wirePackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Dir,Imports,Deps,TestImports,XTestImports,GoFiles,TestGoFiles,XTestGoFiles", "./wire/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("go list ./wire/...: %v\n%s", err, exit.Stderr)
		}
		t.Fatalf("go list ./wire/...: %v", err)
	}
	var pkgs []wirePackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var l struct {
			ImportPath, Dir                          string
			Imports, Deps, TestImports, XTestImports []string
			GoFiles, TestGoFiles, XTestGoFiles       []string
		}
		if err := dec.Decode(&l); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		p := wirePackage{path: l.ImportPath, imports: map[string][]string{}, deps: l.Deps}
		for _, imp := range slices.Concat(l.Imports, l.TestImports, l.XTestImports) {
			p.imports[imp] = nil
		}
		for _, f := range slices.Concat(l.GoFiles, l.TestGoFiles, l.XTestGoFiles) {
			for _, imp := range fileImports(filepath.Join(l.Dir, f)) {
				if _, ok := p.imports[imp]; ok && !slices.Contains(p.imports[imp], f) {
					p.imports[imp] = append(p.imports[imp], f)
				}
			}
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// fileImports returns the import paths of the Go file at path; none when
// it cannot be parsed (go list has listed the imports anyway).
func fileImports(path string) []string {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range f.Imports {
		if p, err := strconv.Unquote(s.Path.Value); err == nil {
			out = append(out, p)
		}
	}
	return out
}
