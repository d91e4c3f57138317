package squash

import (
	"slices"
	"sort"
	"strings"
)

// Log compressor limits.
const (
	logLineCap     = 600 // bytes of one kept line; the middle of a longer one is cut
	maxWarnKeys    = 10  // warning templates kept, rarest first
	frameRunAfter  = 12  // stack-frame/continuation lines kept after an error (Java, Go, rustc)
	frameRunBefore = 8   // ... and before it (Python tracebacks end with the error)
	logHeadTail    = 5   // lines kept at each end for orientation
	logContext     = 2   // context lines on each side of a kept error
	markerCost     = 20  // budget estimate for one "[lines A-B omitted]" line
	notKept        = 0
	keepRequired   = 1
	keepOptional   = 2
	absorbed       = 3 // a repeat folded into the count of the line before it
)

// squashLog keeps what a reader of a log needs and drops the rest:
//
//   - required, whatever the budget: the first line of every distinct error
//     template (later repeats are counted, "[xN]"), every failing-test line
//     and compiler diagnostic verbatim, every distinct summary line, and the
//     first line of the 10 rarest warning templates;
//   - optional, while the output stays within budget, in this order: the
//     first and last lines; failure regions (pytest failure blocks and
//     tracebacks: frame lines, then the code under the project's frames,
//     then library frames); stack frames and indented continuation lines
//     next to other kept errors; head and tail; 2 lines of context around
//     kept errors. Regions may use half a budget more than the rest.
//
// Kept lines stay in their original order; every gap becomes one
// "[lines A-B omitted]" line.
func squashLog(tl *textLines, budget int, hint *back) string {
	n := len(tl.spans)
	if n == 0 {
		return tl.s
	}
	p := &linePlan{tl: tl, keep: make([]uint8, n), counts: make(map[int]int), lineCap: logLineCap, backCost: hint.cost()}
	errs := p.keepRequired()
	// Optional lines get the rest of the budget, and at least half a
	// budget beyond the required ones, so even a log full of errors keeps
	// its ends and some context.
	p.limit = max(budget, p.size+budget/2)
	// The very ends first: what ran, and how it ended.
	p.add(0)
	p.add(n - 1)
	p.add(n - 2)
	// Failure regions may take half a budget more: on the corpus that is
	// what keeps the failing test's code and the project's frames of most
	// failures (see TestCorpusFidelity).
	base := p.limit
	p.limit += budget / 2
	p.keepRegions()
	p.limit = base
	// What a failure region shows of its error is keepRegions' call.
	errs = slices.DeleteFunc(errs, func(e int) bool { return p.inRegion != nil && p.inRegion[e] != roleNone })
	p.keepFrames(errs)
	for k := 0; k < logHeadTail; k++ {
		p.add(k)
		p.add(n - 1 - k)
	}
	for d := 1; d <= logContext; d++ {
		for _, e := range errs {
			p.add(e - d)
			p.add(e + d)
		}
	}
	return renderLines(tl.s, tl.spans, p.keep, p.counts, logLineCap, hint)
}

// linePlan is the lines a compressor keeps so far and what they cost.
type linePlan struct {
	tl          *textLines
	keep        []uint8
	counts      map[int]int // kept line -> occurrences of its template
	size, limit int
	lineCap     int
	backCost    int          // what a gap marker's way back adds (back.cost)
	inRegion    []regionRole // roleNone outside failure regions; nil before keepRegions
}

// cost is what keeping line i adds to the output, marker included.
func (p *linePlan) cost(i int) int {
	return cappedLen(len(p.tl.line(i)), p.lineCap) + 1 + markerCost + p.backCost
}

// add keeps line i when it fits the limit; it reports whether i is kept.
func (p *linePlan) add(i int) bool {
	if i < 0 || i >= len(p.keep) {
		return false
	}
	if p.keep[i] != notKept {
		return p.keep[i] != absorbed
	}
	c := p.cost(i)
	if p.size+c > p.limit {
		return false
	}
	p.keep[i] = keepOptional
	p.size += c
	return true
}

// require keeps line i whatever the limit.
func (p *linePlan) require(i int) {
	if p.keep[i] == notKept {
		p.keep[i] = keepRequired
		p.size += p.cost(i)
	}
}

// keepRequired keeps the lines a log's reader must see (see squashLog) and
// returns the kept error lines, in order.
func (p *linePlan) keepRequired() (errs []int) {
	tl := p.tl
	type tmpl struct {
		rep, count int
		warn       bool
	}
	keys := make(map[uint64]*tmpl)
	var order []uint64 // first-seen order, for determinism
	for i, li := range tl.infos {
		var key uint64
		switch {
		case li.summary || li.failTest || li.diag:
			key = exactKey(tl.line(i))
		case li.cls == clsError || li.cls == clsWarn:
			key = templateKey(tl.line(i))
		default:
			continue
		}
		t := keys[key]
		if t == nil {
			t = &tmpl{rep: i, warn: li.cls == clsWarn && !li.summary && !li.failTest}
			keys[key] = t
			order = append(order, key)
			if !t.warn {
				p.require(i)
				if li.cls == clsError {
					errs = append(errs, i)
				}
			}
		}
		t.count++
	}
	// Warnings: the rarest templates first; a warning seen once usually says
	// more than one repeated a thousand times.
	var warns []*tmpl
	for _, k := range order {
		if t := keys[k]; t.warn {
			warns = append(warns, t)
		}
	}
	sort.SliceStable(warns, func(a, b int) bool { return warns[a].count < warns[b].count })
	for k, t := range warns {
		if k == maxWarnKeys {
			break
		}
		p.require(t.rep)
	}
	for _, k := range order {
		if t := keys[k]; t.count > 1 && p.keep[t.rep] != notKept {
			p.counts[t.rep] = t.count
		}
	}
	return errs
}

// keepRegions keeps the failure regions: first the lines that say what
// failed (headers, error lines, pytest's "> code", "E   error" and location
// lines); then the project's code, a traceback frame with its code lines as
// one unit, innermost first, each frame once however many chained
// tracebacks repeat it; then library code the same way. A failure repeated
// (as by a parametrized test) shows only its header and error lines.
func (p *linePlan) keepRegions() {
	regions, roles := failureRegions(p.tl)
	p.inRegion = roles
	if len(regions) == 0 {
		return
	}
	seen := make(map[uint64]bool, len(regions))
	var first []region
	for _, r := range regions {
		if seen[r.key] {
			p.add(r.start)
			continue
		}
		seen[r.key] = true
		first = append(first, r)
	}
	for _, r := range first {
		for i := r.start; i < r.end; i++ {
			if roles[i] == roleSkeleton {
				p.add(i)
			}
		}
	}
	frames := make(map[uint64]bool)
	for _, lib := range []bool{false, true} {
		code, frame := pick(lib, roleLibCode, roleCode), pick(lib, roleLibFrame, roleFrame)
		frameCode := pick(lib, roleLibFrameCode, roleFrameCode)
		skel := pick(lib, roleLibSkel, roleSkeleton)
		for _, r := range first {
			for i := r.start; i < r.end; i++ {
				if roles[i] == code || lib && roles[i] == skel {
					p.add(i)
				}
			}
			for i := r.end - 1; i >= r.start; i-- {
				if roles[i] != frame {
					continue
				}
				end := i + 1
				for end < r.end && (roles[end] == frameCode || roles[end] == roleNoise) {
					end++
				}
				if k := exactKey(p.tl.line(i)); !frames[k] {
					frames[k] = true
					p.addUnit(i, end, roles)
				}
			}
		}
	}
}

// addUnit keeps the lines [start, end) but caret lines, all or none.
func (p *linePlan) addUnit(start, end int, roles []regionRole) {
	cost := 0
	for i := start; i < end; i++ {
		if roles[i] != roleNoise && p.keep[i] == notKept {
			cost += p.cost(i)
		}
	}
	if p.size+cost > p.limit {
		return
	}
	for i := start; i < end; i++ {
		if roles[i] != roleNoise {
			p.add(i)
		}
	}
}

// keepFrames keeps stack frames and continuation lines around each kept
// error: after it (Java, Go) and before it (Python tracebacks end with the
// error).
func (p *linePlan) keepFrames(errs []int) {
	tl := p.tl
	n := len(tl.spans)
	for _, e := range errs {

		for j, k := e+1, 0; j < n && k < frameRunAfter && isContinuation(tl.s, tl.spans, tl.infos, j); j, k = j+1, k+1 {
			p.add(j)
		}
		j := e - 1
		for k := 0; j >= 0 && k < frameRunBefore && isContinuation(tl.s, tl.spans, tl.infos, j); j, k = j-1, k+1 {
			p.add(j)
		}
		if j >= 0 && strings.HasPrefix(tl.line(j), "Traceback (most recent call last)") {
			p.add(j)
		}
	}
}

// isContinuation reports whether line i belongs to the error next to it: a
// stack frame; an indented line without a level of its own; a rustc snippet
// line ("77 |     let x"); Go's "[signal ...]" line; a Go function line
// or a blank line followed by a frame.
func isContinuation(s string, spans [][2]int, infos []lineInfo, i int) bool {
	li := infos[i]
	if li.frame {
		return true
	}
	if li.leveled {
		return false
	}
	l := s[spans[i][0]:spans[i][1]]
	if strings.TrimSpace(l) == "" || l[0] != ' ' && l[0] != '\t' {
		if i+1 < len(infos) && infos[i+1].frame {
			return true
		}
		return strings.HasPrefix(l, "[signal ") || isSnippetLine(l)
	}
	return true
}

// isSnippetLine reports whether l is a numbered source line as compilers
// print them: "77 |     let width: u32 = panel.width();".
func isSnippetLine(l string) bool {
	i := 0
	for i < len(l) && l[i] >= '0' && l[i] <= '9' {
		i++
	}
	for j := i; i > 0 && j < len(l) && j < i+4; j++ {
		if l[j] == '|' {
			return true
		}
		if l[j] != ' ' {
			return false
		}
	}
	return false
}

// writeGap writes the marker for the omitted lines of gap, or, when the
// gap is one line no longer than its marker would be, the line itself:
// it costs nothing to keep.
func writeGap(b *strings.Builder, s string, gap [][2]int, end int, hint *back, first bool) {
	from := end - len(gap) + 1
	// A gap no longer than its marker costs nothing to keep: a single
	// short line, or, when the marker carries its way back, lines short
	// enough together.
	text := s[gap[0][0]:gap[len(gap)-1][1]]
	short := len(gap) == 1 && len(text) <= len("[lines 1-1 omitted]")
	if hint != nil && hint.ways != nil {
		short = len(text) < len("[lines 1-1 omitted]")+hint.wayLen(from, end, first)
	}
	if short && !strings.ContainsRune(text, '\r') {
		b.WriteString(text)
		b.WriteByte('\n')
		return
	}
	writeLinesOmitted(b, len(gap), end, hint.gap(from, end, first))
}

// renderLines writes the kept lines in order, one "[lines A-B omitted]" per
// gap and " [xN]" after lines whose template repeats. The output ends with a
// newline exactly when s does.
func renderLines(s string, spans [][2]int, keep []uint8, counts map[int]int, lineCap int, hint *back) string {
	var b strings.Builder
	b.Grow(len(s) / 8)
	gap, first := 0, true
	for i, sp := range spans {
		if keep[i] == notKept {
			gap++
			continue
		}
		if keep[i] == absorbed {
			continue
		}
		if gap > 0 {
			writeGap(&b, s, spans[i-gap:i], i, hint, first)
			if gap > 1 {
				first = false
			}
			gap = 0
		}
		l := s[sp[0]:sp[1]]
		cr := len(l) > 0 && l[len(l)-1] == '\r'
		if cr {
			l = l[:len(l)-1]
		}
		writeCapped(&b, l, lineCap)
		if c := counts[i]; c > 1 {
			writeCount(&b, c)
		}
		if cr {
			b.WriteByte('\r')
		}
		b.WriteByte('\n')
	}
	if gap > 0 {
		writeGap(&b, s, spans[len(spans)-gap:], len(spans), hint, first)
	}
	out := b.String()
	if !strings.HasSuffix(s, "\n") {
		out = strings.TrimSuffix(out, "\n")
	}
	return out
}
