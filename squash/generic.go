package squash

import "strings"

// Generic compressor limits.
const (
	genericHeadTail = 10  // lines kept at each end
	genericLineCap  = 500 // bytes of one kept line (less for small budgets)
	maxImportant    = 40  // important lines considered beyond head and tail
)

// squashGeneric keeps the lines that look important (errors, failing tests,
// summaries), the structure of diffs and listings, the first and last 10
// lines, then warnings, collapses runs
// of identical lines into one line with a " [xN]" count, and stays within
// budget bytes. A text without newlines keeps its head and tail.
func squashGeneric(tl *textLines, budget int, hint *back) string {
	s, spans := tl.s, tl.spans
	lineCap := genericLineCap
	if budget/4 < lineCap {
		lineCap = max(budget/4, 40)
	}
	if len(spans) <= 1 {
		if len(s) <= budget {
			return s
		}
		var b strings.Builder
		body := strings.TrimSuffix(s, "\n")
		writeCapped(&b, body, budget)
		if w := hint.sole(1, 1); w != "" { // one line: its way is the whole original's
			b.WriteString(" [" + strings.TrimPrefix(w, "; ") + "]")
		}
		if len(body) < len(s) {
			b.WriteByte('\n')
		}
		return b.String()
	}
	n := len(spans)
	line := tl.line

	// Collapse runs of identical lines: the first line of a run stands for
	// it (its count is printed), the rest are never kept.
	first := make([]int, 0, n) // index of each run's first line
	counts := make(map[int]int)
	for i := 0; i < n; {
		j := i + 1
		for j < n && line(j) == line(i) {
			j++
		}
		first = append(first, i)
		if j-i > 1 {
			counts[i] = j - i
		}
		i = j
	}
	keep := make([]uint8, n)
	size, backCost := 0, hint.cost()
	add := func(i int) {
		if keep[i] != notKept {
			return
		}
		cost := cappedLen(len(line(i)), lineCap) + 1 + markerCost + backCost
		if counts[i] > 1 {
			cost += 8
		}
		if size+cost > budget {
			return
		}
		keep[i] = keepOptional
		size += cost
	}
	units := len(first)
	// Errors and verdicts first, so a tight budget still shows them; then
	// head and tail from the outside in; then warnings.
	var warns []int
	important := 0
	for _, i := range first {
		if important >= maxImportant {
			break
		}
		li := tl.infos[i]
		switch {
		case li.cls == clsError || li.failTest || li.summary:
			add(i)
			important++
		case li.cls == clsWarn:
			warns = append(warns, i)
			important++
		}
	}
	// Structure next: what a diff changes, which directory a listing is
	// in.
	for _, i := range first {
		if structural(line(i)) {
			add(i)
		}
	}
	for k := 0; k < genericHeadTail && k < units; k++ {
		add(first[k])
		add(first[units-1-k])
	}
	for _, i := range warns {
		add(i)
	}
	for i, c := range counts {
		if keep[i] != notKept {
			for k := i + 1; k < i+c; k++ {
				keep[k] = absorbed
			}
		}
	}
	return renderLines(s, spans, keep, counts, lineCap, hint)
}

// structural reports whether l gives a text's structure: a diff's file and
// hunk headers, or a recursive listing's directory headers ("./pkg/sub:").
func structural(l string) bool {
	switch {
	case strings.HasPrefix(l, "diff --git "), strings.HasPrefix(l, "+++ "), strings.HasPrefix(l, "--- a/"),
		strings.HasPrefix(l, "@@ "), strings.HasPrefix(l, "index ") && strings.Contains(l, ".."):
		return true
	}
	return len(l) > 1 && l[len(l)-1] == ':' && !strings.ContainsAny(l, " \t") && (l[0] == '.' || strings.IndexByte(l, '/') > 0)
}
