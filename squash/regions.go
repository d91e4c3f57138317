package squash

import "strings"

// A failure region is the part of a log that explains one failure: a
// pytest failure block (from its "____ test_name ____" header to the next
// header or "====" line) or a traceback (its frames, the code lines under
// them and the error line that ends it). An agent debugging a failure reads
// its region whole, so regions are kept before other optional lines; within
// one, frames of library code fold before the project's own.
type region struct {
	start, end int    // lines [start, end)
	key        uint64 // regions with one key explain the same failure
}

// regionRole is what one line of a region is to a reader.
type regionRole uint8

const (
	roleNone         regionRole = iota
	roleSkeleton                // header, frame and location lines, "> code", "E   error" lines
	roleCode                    // source and locals shown under a frame of the project's code
	roleLibSkel                 // a frame line of library code
	roleLibCode                 // code under a frame of library code
	roleNoise                   // a caret line ("    ^^^^^^"): points into the line above
	roleFrame                   // a traceback's frame line in the project's code; its code follows
	roleLibFrame                // ... in library code
	roleFrameCode               // code under a roleFrame line
	roleLibFrameCode            // code under a roleLibFrame line
)

// failureRegions finds the regions of tl, in order, and the role of each
// of their lines.
func failureRegions(tl *textLines) ([]region, []regionRole) {
	n := len(tl.spans)
	roles := make([]regionRole, n)
	var out []region
	for i := 0; i < n; {
		l := tl.line(i)
		switch {
		case pytestBlockName(l) != "":
			end := i + 1
			for end < n && pytestBlockName(tl.line(end)) == "" && !pytestSectionLine(tl.line(end)) {
				end++
			}
			out = append(out, region{i, end, exactKey(stripParams(pytestBlockName(l)))})
			rolePytestBlock(tl, i, end, roles)
			i = end
		case tl.infos[i].frame && strings.HasPrefix(trimBlank(l), `File "`) ||
			strings.HasPrefix(l, "Traceback (most recent call last)"):
			end, key := roleTraceback(tl, i, roles)
			out = append(out, region{i, end, key})
			i = end
		default:
			i++
		}
	}
	return out, roles
}

// pytestBlockName returns the test named by a pytest failure block header
// ("_____ test_x[param] _____"), or "".
func pytestBlockName(l string) string {
	l = strings.TrimRight(l, " \r")
	if len(l) < 10 || !strings.HasPrefix(l, "___") || !strings.HasSuffix(l, "___") {
		return ""
	}
	name := strings.Trim(l, "_ ")
	if name == "" || strings.HasPrefix(name, "_ _") || strings.Contains(name, "  ") {
		return ""
	}
	return name
}

// pytestSectionLine reports whether l opens a pytest section ("==== x
// ====", "---- Captured stdout call ----"), which ends a failure block.
func pytestSectionLine(l string) bool {
	return strings.HasPrefix(l, "====") || strings.HasPrefix(l, "----") && strings.HasSuffix(strings.TrimRight(l, " \r"), "----")
}

// stripParams drops a parametrized test's "[…]" suffix: test_x[1] and
// test_x[2] fail the same way far more often than not.
func stripParams(name string) string {
	if i := strings.IndexByte(name, '['); i > 0 {
		return name[:i]
	}
	return name
}

// rolePytestBlock sets the roles of the lines of the pytest block
// [start, end). The block is split into frames by "_ _ _" lines; a frame's
// code belongs to its location line ("path:12: in f" before it in the short
// style, "path:12: Error" after it in the long one).
func rolePytestBlock(tl *textLines, start, end int, roles []regionRole) {
	roles[start] = roleSkeleton
	for seg := start + 1; seg < end; {
		segEnd := seg
		for segEnd < end && !isPytestFrameSeparator(tl.line(segEnd)) {
			segEnd++
		}
		roleFrameSegment(tl, seg, segEnd, roles)
		if segEnd < end {
			roles[segEnd] = roleCode
		}
		seg = segEnd + 1
	}
}

func isPytestFrameSeparator(l string) bool {
	return strings.HasPrefix(l, "_ _ _")
}

// roleFrameSegment sets the roles of one frame segment of a pytest block.
func roleFrameSegment(tl *textLines, start, end int, roles []regionRole) {
	lib := false // of the location the current code lines belong to
	short := false
	// Long style: the segment's code comes before its one location line.
	for i := end - 1; i >= start; i-- {
		if p, inFunc := pytestLocation(tl.line(i)); p != "" {
			lib, short = isLibraryPath(p), inFunc
			break
		}
	}
	for i := start; i < end; i++ {
		l := tl.line(i)
		if p, inFunc := pytestLocation(l); p != "" {
			if short || inFunc {
				lib = isLibraryPath(p)
			}
			roles[i] = pick(lib, roleLibSkel, roleSkeleton)
			continue
		}
		t := trimBlank(l)
		if strings.HasPrefix(t, "> ") || t == ">" || strings.HasPrefix(l, "E ") {
			roles[i] = pick(lib, roleLibSkel, roleSkeleton)
			continue
		}
		roles[i] = pick(lib, roleLibCode, roleCode)
	}
}

// pytestLocation returns the path of a pytest location line
// ("astropy/utils/iers.py:271: TypeError", "a.py:12: in f"), and whether it
// is the short style that names the function.
func pytestLocation(l string) (path string, inFunc bool) {
	if l == "" || l[0] == ' ' || l[0] == '\t' {
		return "", false
	}
	sp := strings.IndexByte(l, ' ')
	tok := l
	if sp >= 0 {
		tok = l[:sp]
	}
	if len(tok) < 3 || tok[len(tok)-1] != ':' {
		return "", false
	}
	c := strings.LastIndexByte(tok[:len(tok)-1], ':')
	if c <= 0 || !isDigits(tok[c+1:len(tok)-1]) || strings.Contains(tok, "://") {
		return "", false
	}
	return tok[:c], sp >= 0 && strings.HasPrefix(l[sp:], " in ")
}

// roleTraceback sets the roles of the traceback that starts at line start
// ("Traceback (most recent call last):" or its first frame) and returns
// where it ends (after its error line) and its key: its error's template
// and innermost frame (tracebacks that differ only in the test that led
// there fail the same way).
func roleTraceback(tl *textLines, start int, roles []regionRole) (end int, key uint64) {
	n := len(tl.spans)
	lib := false
	var inner string
	i := start
	for ; i < n; i++ {
		l := tl.line(i)
		t := trimBlank(l)
		switch {
		case i == start && strings.HasPrefix(l, "Traceback"):
			roles[i] = roleSkeleton
		case tl.infos[i].frame && strings.HasPrefix(t, `File "`):
			p := t[len(`File "`):]
			if q := strings.IndexByte(p, '"'); q >= 0 {
				p = p[:q]
			}
			lib = isLibraryPath(p)
			roles[i] = pick(lib, roleLibFrame, roleFrame)
			inner = t
		case l != "" && (l[0] == ' ' || l[0] == '\t'):
			roles[i] = pick(lib, roleLibFrameCode, roleFrameCode)
			if isCaretLine(t) {
				roles[i] = roleNoise
			}
		default:
			// The error line ends the traceback (a blank line ends it
			// without one).
			if strings.TrimSpace(l) != "" {
				roles[i] = roleSkeleton
				key = templateKey(l)
				i++
			}
			return i, key*fnvPrime ^ exactKey(inner)
		}
	}
	return i, key*fnvPrime ^ exactKey(inner)
}

func pick(lib bool, ifLib, ifOwn regionRole) regionRole {
	if lib {
		return ifLib
	}
	return ifOwn
}

// libraryMarkers are path parts of code the agent did not write: installed
// packages, interpreters' and toolchains' own libraries.
var libraryMarkers = []string{
	"site-packages/", "dist-packages/", "/lib/python", "node_modules/", "node:internal",
	"<frozen ", "/usr/lib/", "/usr/local/lib/", "/usr/local/go/src/", "/go/pkg/mod/",
	".cargo/registry/", ".rustup/", "/rustc/", "\\site-packages\\", "\\Lib\\",
}

// isLibraryPath reports whether a frame's file is library code.
func isLibraryPath(p string) bool {
	for _, m := range libraryMarkers {
		if strings.Contains(p, m) {
			return true
		}
	}
	return false
}

// isCaretLine reports whether t only underlines the line above it, as
// Python 3.11 tracebacks do ("~~~~^^^^^").
func isCaretLine(t string) bool {
	t = strings.TrimRight(t, " \r")
	return t != "" && strings.Trim(t, "^~ ") == ""
}
