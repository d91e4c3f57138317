package squash

import (
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
	markerCost     = 20  // budget estimate for one "[N lines omitted]" line
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
//   - optional, while the output stays within budget, in this order: stack
//     frames and indented continuation lines next to kept errors, the first
//     and last lines of the log, and 2 lines of context around kept errors.
//     Context is the first thing left out when the output grows too big.
//
// Kept lines stay in their original order; every gap becomes one
// "[N lines omitted]" line.
func squashLog(tl *textLines, budget int) string {
	s, spans, infos := tl.s, tl.spans, tl.infos
	n := len(spans)
	if n == 0 {
		return s
	}
	line := tl.line

	type tmpl struct {
		rep, count int
		warn       bool
	}
	keys := make(map[uint64]*tmpl)
	var order []uint64 // first-seen order, for determinism
	keep := make([]uint8, n)
	size := 0
	var errs []int // kept error lines, in order
	for i := range infos {
		li := infos[i]
		var key uint64
		switch {
		case li.summary || li.failTest || li.diag:
			key = exactKey(line(i))
		case li.cls == clsError || li.cls == clsWarn:
			key = templateKey(line(i))
		default:
			continue
		}
		t := keys[key]
		if t == nil {
			t = &tmpl{rep: i, warn: li.cls == clsWarn && !li.summary && !li.failTest}
			keys[key] = t
			order = append(order, key)
			if !t.warn {
				keep[i] = keepRequired
				size += cappedLen(len(line(i)), logLineCap) + 1 + markerCost
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
		keep[t.rep] = keepRequired
		size += cappedLen(len(line(t.rep)), logLineCap) + 1 + markerCost
	}
	counts := make(map[int]int, len(order))
	for _, k := range order {
		if t := keys[k]; t.count > 1 && keep[t.rep] != notKept {
			counts[t.rep] = t.count
		}
	}

	// Optional lines get the rest of the budget, and at least half a
	// budget beyond the required ones, so even a log full of errors keeps
	// its ends and some context.
	limit := max(budget, size+budget/2)
	add := func(i int) {
		if i < 0 || i >= n || keep[i] != notKept {
			return
		}
		cost := cappedLen(len(line(i)), logLineCap) + 1 + markerCost
		if size+cost > limit {
			return
		}
		keep[i] = keepOptional
		size += cost
	}
	// The very ends first: what ran, and how it ended.
	add(0)
	add(n - 1)
	add(n - 2)
	// Stack frames and continuation lines around each kept error: after it
	// (Java, Go) and before it (Python tracebacks end with the error).
	for _, e := range errs {
		for j, k := e+1, 0; j < n && k < frameRunAfter && isContinuation(s, spans, infos, j); j, k = j+1, k+1 {
			add(j)
		}
		j := e - 1
		for k := 0; j >= 0 && k < frameRunBefore && isContinuation(s, spans, infos, j); j, k = j-1, k+1 {
			add(j)
		}
		if j >= 0 && strings.HasPrefix(line(j), "Traceback (most recent call last)") {
			add(j)
		}
	}
	for k := 0; k < logHeadTail; k++ {
		add(k)
		add(n - 1 - k)
	}
	for d := 1; d <= logContext; d++ {
		for _, e := range errs {
			add(e - d)
			add(e + d)
		}
	}
	return renderLines(s, spans, keep, counts, logLineCap)
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

// renderLines writes the kept lines in order, one "[N lines omitted]" per
// gap and " [xN]" after lines whose template repeats. The output ends with a
// newline exactly when s does.
func renderLines(s string, spans [][2]int, keep []uint8, counts map[int]int, lineCap int) string {
	var b strings.Builder
	b.Grow(len(s) / 8)
	gap := 0
	for i, sp := range spans {
		if keep[i] == notKept {
			gap++
			continue
		}
		if keep[i] == absorbed {
			continue
		}
		if gap > 0 {
			writeLinesOmitted(&b, gap)
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
		writeLinesOmitted(&b, gap)
	}
	out := b.String()
	if !strings.HasSuffix(s, "\n") {
		out = strings.TrimSuffix(out, "\n")
	}
	return out
}
