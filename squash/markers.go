package squash

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Markers. Each is bracketed prose so that a model never mistakes it for
// code (a `// ...` or `# ...` line reads as a comment and invites retries),
// and each sits at the place of the text it replaces.
//
//	[lines A-B omitted] lines A to B (1-based) of the output were dropped (one per gap)
//	[N more items]      a JSON array element standing for N dropped elements
//	…[N chars]          N characters of one line or string were dropped
//	 [xN]               suffix: this line's template occurred N times

// writeLinesOmitted appends "[lines A-B omitted]\n" for the n lines that
// end at line end (0-based, exclusive). Naming the lines, rather than
// counting them, tells the agent which ones to ask for if it needs them;
// the range is written even for one line, so one pattern matches every
// marker.
func writeLinesOmitted(b *strings.Builder, n, end int, hint string) {
	b.WriteString("[lines ")
	b.WriteString(strconv.Itoa(end - n + 1))
	b.WriteByte('-')
	b.WriteString(strconv.Itoa(end))
	b.WriteString(" omitted")
	b.WriteString(hint)
	b.WriteString("]\n")
}

// shellHint follows the first gap marker of a shell command's squashed
// output: the agent can get any omitted line back by running the command
// again, narrowed.
const shellHint = "; rerun narrowed (grep -n, sed -n, tail) to see them"

// writeCount appends the repeat suffix " [xN]".
func writeCount(b *strings.Builder, n int) {
	b.WriteString(" [x")
	b.WriteString(strconv.Itoa(n))
	b.WriteString("]")
}

// writeChars appends "…[N chars]".
func writeChars(b *strings.Builder, n int) {
	b.WriteString("…[")
	b.WriteString(strconv.Itoa(n))
	b.WriteString(" chars]")
}

// runeStart moves i back to the start of the rune containing s[i], so a cut
// at i never splits a multi-byte character.
func runeStart(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	for j := 0; j < utf8.UTFMax && i > 0 && !utf8.RuneStart(s[i]); j++ {
		i--
	}
	return i
}

// writeCapped appends line, cutting its middle when it is longer than max
// bytes: two thirds of max from the head, one third from the tail, and a
// "…[N chars]" marker in between.
func writeCapped(b *strings.Builder, line string, max int) {
	if len(line) <= max {
		b.WriteString(line)
		return
	}
	head := runeStart(line, max*2/3)
	tail := runeStart(line, len(line)-max/3)
	if tail < head {
		tail = head
	}
	b.WriteString(line[:head])
	writeChars(b, utf8.RuneCountInString(line[head:tail]))
	b.WriteString(line[tail:])
}

// cappedLen is the length writeCapped would produce, close enough for
// budgeting.
func cappedLen(n, max int) int {
	if n <= max {
		return n
	}
	return max + 16
}

// lineSpans splits s into lines and returns their [start,end) byte offsets,
// without the '\n'. A trailing newline does not start an extra line.
func lineSpans(s string) [][2]int {
	n := strings.Count(s, "\n") + 1
	spans := make([][2]int, 0, n)
	start := 0
	for start <= len(s) {
		i := strings.IndexByte(s[start:], '\n')
		if i < 0 {
			if start < len(s) {
				spans = append(spans, [2]int{start, len(s)})
			}
			break
		}
		spans = append(spans, [2]int{start, start + i})
		start += i + 1
	}
	return spans
}
