package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/ctxpress/ctxpress/rewrite"
)

// WriteJSON writes r as indented JSON.
func WriteJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes r as a table of sessions, the failed ones with their
// error, then the totals and what they were priced at.
func WriteText(w io.Writer, r Report) error {
	width := len("session")
	for _, s := range r.Sessions {
		width = max(width, len(s.Name))
	}
	// Numbers align right; the names, padded here, read from the left.
	modelWidth := len("model")
	for _, s := range r.Sessions {
		modelWidth = max(modelWidth, len(s.Model))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\t%-*s\tturns\tdirect tokens\tcached\tctxpress tokens\tcached\tsummaries\tsummary in/out\tcost direct\tcost ctxpress\tΔ cost\t\n", width, "session", modelWidth, "model")
	var failed []SessionResult
	for _, s := range r.Sessions {
		if s.Err != "" {
			failed = append(failed, s)
			continue
		}
		d, c := s.Direct, s.Ctxpress
		fmt.Fprintf(tw, "%-*s\t%-*s\t%d\t%s\t%s\t%s\t%s\t%d\t%s/%s\t%s\t%s\t%s\t\n", width, s.Name, modelWidth, s.Model, s.Turns,
			thousands(d.Input), percent(d.CachedShare()), thousands(c.Input), percent(c.CachedShare()),
			c.Summaries, thousands(c.SummaryInput), thousands(c.SummaryOutput),
			dollars(s.CostDirect), dollars(s.CostCtxpress), signed(s.CostDelta()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range failed {
		fmt.Fprintf(w, "FAILED %s: %s\n", s.Name, s.Err)
	}
	writeSkipped(w, r.Skipped)
	for _, s := range r.Sessions {
		if n := s.Ctxpress.SummaryRefused; n > 0 && s.Err == "" {
			fmt.Fprintf(w, "NOTE %s: %d summary calls refused as over the upstream's window (not billed; ctxpress sent them again with less)\n", s.Name, n)
		}
	}
	t := r.Totals
	fmt.Fprintf(w, "\ntotals over %d sessions (%d failed, left out)\n", t.Sessions, t.Failed)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-17s\tdirect\tctxpress\tΔ\t\n", "")
	fmt.Fprintf(tw, "tokens (no cache)\t%s\t%s\t%s\t  agent %s + summary input %s\n", thousands(t.Direct.AllInput()),
		thousands(t.Ctxpress.AllInput()), signed(t.TokensDelta()), thousands(t.Ctxpress.Input), thousands(t.Ctxpress.SummaryInput))
	fmt.Fprintf(tw, "cached share     \t%s\t%s\t\t\n", percent(t.Direct.CachedShare()), percent(t.Ctxpress.CachedShare()))
	fmt.Fprintf(tw, "summary calls    \t\t%d\t\t  output %s tokens\n", t.Ctxpress.Summaries, thousands(t.Ctxpress.SummaryOutput))
	fmt.Fprintf(tw, "cost             \t%s\t%s\t%s\t\n", dollars(t.CostDirect), dollars(t.CostCtxpress), signed(t.CostDelta()))
	if err := tw.Flush(); err != nil {
		return err
	}
	worst := ""
	if t.Costlier > 0 {
		worst = fmt.Sprintf(" (worst: %s, %s)", t.Worst, signed(t.WorstDelta))
	}
	fmt.Fprintf(w, "sessions costlier than direct: %d of %d%s\n\n", t.Costlier, t.Sessions, worst)
	writePrices(w, r)
	writeRebuilt(w, r.Sessions)
	fmt.Fprintf(w, "costs: the agent requests' prompts, and the summary calls' prompts and output. An agent turn is answered with a\n"+
		"fixed reply whose output is the same on both legs (the next turn sends the recorded history), so it is not in the costs.\n")
	if r.Simulated {
		_, err := fmt.Fprintf(w, "provider: simulated, a cache per session and leg of exact prefixes of at least %d tokens; summaries of %d tokens.\n",
			MinCachedPrefix, r.SummaryTokens)
		return err
	}
	_, err := fmt.Fprintf(w, "provider: %s, its usage and cached tokens as it reported them.\n", r.Upstream)
	return err
}

// writeSkipped says which files of the directories hold no session, by
// reason, a few of each named.
func writeSkipped(w io.Writer, skipped []Skipped) {
	const named = 3
	byReason := map[string][]string{}
	var reasons []string
	for _, s := range skipped {
		if byReason[s.Reason] == nil {
			reasons = append(reasons, s.Reason)
		}
		byReason[s.Reason] = append(byReason[s.Reason], s.Path)
	}
	for _, why := range reasons {
		paths := byReason[why]
		more := ""
		if len(paths) > named {
			more = fmt.Sprintf(" and %d more", len(paths)-named)
			paths = paths[:named]
		}
		fmt.Fprintf(w, "SKIPPED %d files (%s): %s%s\n", len(byReason[why]), why, strings.Join(paths, ", "), more)
	}
}

// writePrices says what the costs were priced at: one line, or with each
// session priced by its model a line per model and price.
func writePrices(w io.Writer, r Report) {
	line := func(p rewrite.Prices) string {
		return fmt.Sprintf("input $%g, cached input $%g, cache write $%g, output $%g", p.Input, p.CachedInput, p.CacheWrite, p.Output)
	}
	uniform := true
	for _, s := range r.Sessions {
		uniform = uniform && (s.Err != "" || s.Prices == r.Prices && s.SummaryPrices == r.SummaryPrices)
	}
	if uniform {
		fmt.Fprintf(w, "prices per 1M tokens: %s", line(r.Prices))
		if r.SummaryPrices != r.Prices {
			fmt.Fprintf(w, "; summary calls: %s", line(r.SummaryPrices))
		}
		fmt.Fprintln(w, ".")
		return
	}
	fmt.Fprintln(w, "prices per 1M tokens, each session at its model's list prices (summary calls at the same):")
	seen := map[string]bool{}
	for _, s := range r.Sessions {
		if s.Err != "" || seen[s.Model] {
			continue
		}
		seen[s.Model] = true
		fmt.Fprintf(w, "  %s: %s\n", s.Model, line(s.Prices))
	}
}

// writeRebuilt says, by agent, how the sessions read from transcripts were
// rebuilt and what of them is approximated.
func writeRebuilt(w io.Writer, sessions []SessionResult) {
	type key struct{ agent, note string }
	count := map[key]int{}
	var keys []key
	for _, s := range sessions {
		if s.Agent == "" || s.Err != "" {
			continue
		}
		k := key{s.Agent, s.Approximated}
		if count[k] == 0 {
			keys = append(keys, k)
		}
		count[k]++
	}
	for _, k := range keys {
		what := "rebuilt from the transcript's own records of its requests, as sent (but for Claude Code's billing-header system line)"
		if k.note != "" {
			what = "approximated: " + k.note
		}
		fmt.Fprintf(w, "%s sessions (%d): %s.\n", k.agent, count[k], what)
	}
}

// thousands renders n with comma separators.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func percent(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

func signed(f float64) string { return fmt.Sprintf("%+.1f%%", 100*f) }

func dollars(f float64) string { return fmt.Sprintf("$%.4f", f) }
