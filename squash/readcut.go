package squash

import (
	"strconv"
	"strings"
)

// DefaultReadMaxBytes is Config.ReadMaxBytes when it is 0: 64 KiB, about
// 16k tokens. Agents bound what one read shows them well below it (mini-swe-agent
// at 10,000 characters, Claude Code's Bash and OpenHands at 30,000), and
// on the corpus only a runaway read is ever cut (docs/measurements.md).
const DefaultReadMaxBytes = 64 << 10

// searchMaxBytes is the largest search output (ShapeSearch) kept whole,
// about a thousand tokens: every line is a match the agent asked for, but
// a search is easily broader than meant (grep -r of a common word), and a
// larger one is squashed by its shape like any output.
const searchMaxBytes = 4 << 10

// cutRead returns a read's output whole when it fits maxBytes. A larger one
// keeps its first lines (two thirds of maxBytes) and last lines (one
// third), whole but for lines longer than a quarter of maxBytes, which lose
// their middle, and one marker where the rest was that names the missing
// lines and a command that prints them:
//
//	[lines 120-3980 of server.go omitted; sed -n '120,3980p' server.go]
//	[lines 120-3980 of this output omitted; tail -n 5000 a.log | sed -n '120,3980p']
//	[lines 120-3980 of this output omitted]
//
// An output the agent already cut (mini-swe-agent's <elided_chars>) is
// left whole: its line numbers no longer match the file's.
func cutRead(output string, rd fileRead, maxBytes int, hint *back) string {
	if len(output) <= maxBytes || strings.Contains(output, "<elided_chars>") {
		return output
	}
	start := bodyStart(output)
	body := output[start:]
	spans := lineSpans(body)
	lineCap := max(maxBytes/4, 80)
	cost := func(k int) int { return cappedLen(spans[k][1]-spans[k][0], lineCap) + 1 }
	h, size := 0, start
	for h < len(spans) && size+cost(h) <= maxBytes*2/3 {
		size += cost(h)
		h++
	}
	t, size := len(spans), 0
	tailBudget := maxBytes/3 - (80 + 2*len(rd.file) + len(rd.redo))
	for t > h && size+cost(t-1) <= tailBudget {
		size += cost(t - 1)
		t--
	}
	var b strings.Builder
	b.Grow(maxBytes)
	b.WriteString(output[:start])
	line := func(k int) string { return body[spans[k][0]:spans[k][1]] }
	for k := 0; k < len(spans); k++ {
		if k == h && t > h {
			// The original's line numbers count the lines before the body.
			pre := strings.Count(output[:start], "\n")
			writeReadMarker(&b, body, spans, h, t, rd, hint.sole(h+1+pre, t+pre))
			k = t - 1
			continue
		}
		writeCapped(&b, line(k), lineCap)
		if k < len(spans)-1 || strings.HasSuffix(body, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// bodyStart is where a command's own output starts inside a tool result:
// after mini-swe-agent's "<returncode>0</returncode>\n<output>\n", else at 0.
func bodyStart(s string) int {
	if !strings.HasPrefix(s, "<returncode>") {
		return 0
	}
	head := s[:min(len(s), 48)]
	if i := strings.Index(head, "</returncode>\n<output>\n"); i >= 0 {
		return i + len("</returncode>\n<output>\n")
	}
	return 0
}

// writeReadMarker writes the marker for the body lines [h, t) left out.
// A marker that names the lines of this output also says way, the way to
// them in the original ctxpress keeps ("" when it keeps none); the
// file's own lines are printed from the file.
func writeReadMarker(b *strings.Builder, body string, spans [][2]int, h, t int, rd fileRead, way string) {
	a, z := strconv.Itoa(h+1), strconv.Itoa(t)
	fa, fz := 0, 0
	switch {
	case rd.numbered:
		fa, fz = numberedGap(body, spans, h, t)
	case rd.first > 0:
		fa, fz = rd.first+h, rd.first+t-1
	}
	switch {
	case rd.file != "" && fa > 0 && fz >= fa:
		fas, fzs := strconv.Itoa(fa), strconv.Itoa(fz)
		b.WriteString("[lines " + fas + "-" + fzs + " of " + rd.file + " omitted; sed -n '" + fas + "," + fzs + "p' " + shellQuote(rd.file) + "]\n")
	case rd.redo != "":
		b.WriteString("[lines " + a + "-" + z + " of this output omitted; " + rd.redo + " | sed -n '" + a + "," + z + "p'" + way + "]\n")
	default:
		b.WriteString("[lines " + a + "-" + z + " of this output omitted" + way + "]\n")
	}
}

// numberedGap reads the file line numbers of the body lines [h, t) from
// the numbers the lines carry (cat -n, nl; nl leaves blank lines
// unnumbered, so the nearest numbered line inside the gap counts). 0, 0
// when they cannot be read.
func numberedGap(body string, spans [][2]int, h, t int) (int, int) {
	line := func(k int) string { return body[spans[k][0]:spans[k][1]] }
	fa, fz := 0, 0
	for k := h; k < t && k < h+8; k++ {
		if n, ok := leadingNumber(line(k)); ok {
			fa = n - (k - h)
			break
		}
	}
	for k := t - 1; k >= h && k > t-1-8; k-- {
		if n, ok := leadingNumber(line(k)); ok {
			fz = n + (t - 1 - k)
			break
		}
	}
	if fa < 1 || fz < fa {
		return 0, 0
	}
	return fa, fz
}

// leadingNumber reads the line number a numbered listing puts first:
// "    12\t…", "12: …", "12 …", "12|…".
func leadingNumber(l string) (int, bool) {
	i := skipBlanks(l, 0)
	n, j := digitsAt(l, i)
	if j == i || j-i > 9 {
		return 0, false
	}
	if j < len(l) && strings.IndexByte("\t :|", l[j]) < 0 {
		return 0, false
	}
	return n, true
}
