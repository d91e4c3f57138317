package squash

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Tables of the fidelity figures, as aligned text for go test -v or as
// Markdown for docs/fidelity.md (-fidelity.markdown).

// writeTable writes rows under header: Markdown, or text with the first
// column aligned left and the others right.
func writeTable(w io.Writer, markdown bool, header []string, rows [][]string) {
	if markdown {
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat(" --- |", len(header)))
		for _, r := range rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
		return
	}
	width := make([]int, len(header))
	for _, r := range append([][]string{header}, rows...) {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range append([][]string{header}, rows...) {
		var b strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString("  " + pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

func kb(n int) string      { return fmt.Sprintf("%.1f", float64(n)/1000) }
func pct(p float64) string { return fmt.Sprintf("%.0f%%", p) }
func itoa(n int) string    { return fmt.Sprint(n) }

// keptPct is f's share of used tokens kept, or – when none was used.
func keptPct(f fidelityFigures) string {
	if f.Used == 0 {
		return "–"
	}
	return pct(f.KeptPct())
}

// recoverablePct is f's share of used tokens kept or one retrieval away,
// or – when none was used.
func recoverablePct(f fidelityFigures) string {
	if f.Used == 0 {
		return "–"
	}
	return pct(f.RecoverablePct())
}

// writeFidelityRows writes the figures by row: "recoverable" counts the
// used tokens kept or named by a marker, "via ref" the lost ones a way
// back to the kept original names.
func writeFidelityRows(w io.Writer, markdown bool, rows []fidelityRow) {
	header := []string{"outputs ≥ 1500 B", "count", "squash changes", "KB before", "KB after", "bytes saved",
		"tokens used", "kept", "kept %", "recoverable", "recoverable %", "via ref", "outputs losing ≥ 1"}
	var cells [][]string
	for _, r := range rows {
		cells = append(cells, []string{r.Key, itoa(r.Outputs), itoa(r.Changed), kb(r.BytesBefore), kb(r.BytesAfter),
			pct(r.SavedPct()), itoa(r.Used), itoa(r.Kept), keptPct(r.fidelityFigures), itoa(r.Recoverable),
			recoverablePct(r.fidelityFigures), itoa(r.ByRef), itoa(r.Losing)})
	}
	writeTable(w, markdown, header, cells)
}

// writeFrontier writes the figures at each size floor.
func writeFrontier(w io.Writer, markdown bool, rows []fidelityRow) {
	header := []string{"size floor", "squash changes", "bytes saved", "tokens kept", "tokens lost", "recoverable", "outputs losing ≥ 1"}
	var cells [][]string
	for _, r := range rows {
		cells = append(cells, []string{r.Key, itoa(r.Changed), pct(r.SavedPct()), keptPct(r.fidelityFigures),
			itoa(r.Used - r.Kept), recoverablePct(r.fidelityFigures), itoa(r.Losing)})
	}
	writeTable(w, markdown, header, cells)
}

// writeKinds writes the used tokens by kind and the compressor that lost
// them.
func writeKinds(w io.Writer, markdown bool, kinds []kindFigures) {
	shapes := []string{"json", "log", "generic", "source", "read"}
	header := []string{"token kind", "used", "kept", "kept %"}
	for _, s := range shapes {
		header = append(header, "lost by "+s)
	}
	var cells [][]string
	for _, k := range kinds {
		row := []string{k.Kind, itoa(k.Used), itoa(k.Kept), keptPct(fidelityFigures{Used: k.Used, Kept: k.Kept})}
		for _, s := range shapes {
			row = append(row, itoa(k.LostBy[s]))
		}
		cells = append(cells, row)
	}
	writeTable(w, markdown, header, cells)
}

// writeWorst writes the worst offenders: where they come from and what
// they lost.
func writeWorst(w io.Writer, worst []fidelityOutcome) {
	for i, o := range worst {
		fmt.Fprintf(w, "%2d. %s #%d  %s: %s\n", i+1, o.Trace, o.Index, o.Call.Tool, callSummary(o.Call, 110))
		fmt.Fprintf(w, "    shape %s, producer %s, %d -> %d B; lost %d of %d (%d named by a marker): %s\n", o.Shape, o.Producer,
			len(o.Output), o.After, len(o.Lost), len(o.Used), len(o.Lost)-len(o.Gone), tokenList(o.Lost, 16))
		if len(o.Gone) > 0 {
			fmt.Fprintf(w, "    not named by any marker: %s\n", tokenList(o.Gone, 16))
		}
	}
}

// callSummary is a call on one line, at most n runes: a shell tool's
// command, else its arguments.
func callSummary(c Call, n int) string {
	s := c.Args
	if script, argv, _, ok := shellCommand(c.Args); ok {
		s = script
		if argv != nil {
			s = joinArgv(argv)
		}
	}
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n-1]) + "…"
	}
	return s
}

// tokenList joins the first n tokens, and says how many more there are.
func tokenList(toks []string, n int) string {
	if len(toks) <= n {
		return strings.Join(toks, " ")
	}
	return fmt.Sprintf("%s … (+%d)", strings.Join(toks[:n], " "), len(toks)-n)
}

// issueFigures are issue 12's own figures, measured before shell reads were
// kept ("" where it gives none), beside which the reproduction of that
// state is printed.
var issueFigures = [][7]string{
	{"all", "457", "417", "81%", "570", "39%", "85"},
	{"file reads through the shell", "178", "", "", "312", "24%", ""},
	{"everything else", "279", "", "", "258", "58%", ""},
}

// writeBeforeBesideIssue writes the figures of the state before shell reads
// were kept beside the issue's: rows all, shell-tool reads (producer read
// through a shell tool), and the rest. The issue's "squash changes" counts
// only the outputs with a next step, so this table does too.
func writeBeforeBesideIssue(w io.Writer, markdown bool, outs []fidelityOutcome) {
	shellRead := func(o fidelityOutcome) bool {
		return o.Producer == producerRead && containsString(DefaultShellTools, o.Call.Tool)
	}
	groups := []func(fidelityOutcome) bool{
		func(fidelityOutcome) bool { return true }, shellRead, func(o fidelityOutcome) bool { return !shellRead(o) },
	}
	header := []string{"issue / measured", "count", "squash changes (with a next step)", "bytes saved",
		"tokens used", "kept %", "outputs losing ≥ 1"}
	var cells [][]string
	for i, g := range groups {
		f := sumFidelity(outs, g)
		withNext := sumFidelity(outs, func(o fidelityOutcome) bool { return g(o) && o.HasNext })
		measured := []string{itoa(f.Outputs), itoa(withNext.Changed), pct(f.SavedPct()), itoa(f.Used),
			keptPct(f), itoa(f.Losing)}
		row := []string{issueFigures[i][0]}
		for k, m := range measured {
			is := issueFigures[i][k+1]
			if is == "" {
				is = "–"
			}
			row = append(row, is+" / "+m)
		}
		cells = append(cells, row)
	}
	writeTable(w, markdown, header, cells)
}
