package main

import (
	"encoding/json"
	"fmt"
	"github.com/ctxpress/ctxpress/admin"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// shownTurns is how many recent turns `show` prints as a table; --json has
// them all.
const shownTurns = 20

// convOutput prints the commands' results as tables or JSON.
type convOutput struct {
	w    io.Writer
	json bool
}

func (o convOutput) encode(v any) error {
	enc := json.NewEncoder(o.w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (o convOutput) done(v any, text string) error {
	if o.json {
		return o.encode(v)
	}
	_, err := fmt.Fprintln(o.w, text)
	return err
}

func (o convOutput) list(p admin.ConversationPage) error {
	if o.json {
		return o.encode(p)
	}
	if len(p.Data) == 0 {
		_, err := fmt.Fprintln(o.w, "no conversations")
		return err
	}
	tw := tabwriter.NewWriter(o.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CONVERSATION\tNAMESPACE\tMODEL\tREQUESTS\tLAST INPUT\tTOKENS SAVED\tCOMPACTIONS\tUPDATED\tSTATE")
	for _, c := range p.Data {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", clip(c.ID, 40), c.Namespace, orDash(clip(c.Model, 24)),
			c.Requests, c.LastInputTokens, c.TokensSaved, c.Compactions, ago(c.UpdatedAt), orDash(flags(c)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if p.HasMore {
		fmt.Fprintf(o.w, "more: --offset %d\n", p.Offset+len(p.Data))
	}
	return nil
}

func (o convOutput) show(ds []admin.ConversationDetail) error {
	if o.json {
		return o.encode(map[string]any{"object": "list", "data": ds})
	}
	for i, d := range ds {
		if i > 0 {
			fmt.Fprintln(o.w, strings.Repeat("─", 60))
		}
		if err := o.showOne(d); err != nil {
			return err
		}
	}
	return nil
}

func (o convOutput) showOne(d admin.ConversationDetail) error {
	w := o.w
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("conversation", d.ID)
	row("namespace", d.Namespace)
	row("model", orDash(d.Model))
	row("requests", d.Requests)
	row("tokens", fmt.Sprintf("%d before, %d after, %d saved", d.TokensBefore, d.TokensAfter, d.TokensSaved))
	row("compactions", d.Compactions)
	row("upstream usage", usageText(d.Usage, d.CachedShare))
	if sc := d.ServerCompactionUsage; sc.Calls > 0 {
		row("upstream compactions", fmt.Sprintf("%d, %d input and %d output tokens (in the usage above)", sc.Calls, sc.InputTokens, sc.OutputTokens))
	}
	row("summary calls", fmt.Sprintf("%d, %d input and %d output tokens", d.SummaryUsage.Calls, d.SummaryUsage.InputTokens, d.SummaryUsage.OutputTokens))
	row("cost", fmt.Sprintf("%s (summary calls %s); direct, estimated: %s; saved %s", billText(d.Cost, d.CostUnit),
		billText(d.SummaryCost, d.CostUnit), billText(d.CostDirectEstimate, d.CostUnit), billText(d.MoneySaved, d.CostUnit)))
	row("last input", fmt.Sprintf("%d tokens reported (estimate %d, calibration %.2f)", d.LastInputTokens, d.LastEstimate, d.Calibration))
	row("created", d.CreatedAt.Local().Format(time.DateTime))
	row("updated", d.UpdatedAt.Local().Format(time.DateTime)+" ("+ago(d.UpdatedAt)+")")
	b := d.Breaker
	breaker := "closed"
	if b.Tripped {
		breaker = "OPEN: " + b.Reason
	}
	if b.FailureCount > 0 {
		breaker += fmt.Sprintf("; %d summariser failure(s)", b.FailureCount)
	}
	if b.BackoffUntil != nil && b.BackoffUntil.After(time.Now()) {
		breaker += ", backing off until " + b.BackoffUntil.Local().Format(time.TimeOnly)
	}
	if b.ForceNext {
		breaker += "; compaction scheduled for the next request"
	}
	row("breaker", breaker)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(d.Branches) > 0 {
		fmt.Fprintln(w, "\nsummary branches (most recently used first):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  COVERED\tHASH\tCHARS\tCREATED\tUSED")
		for _, br := range d.Branches {
			fmt.Fprintf(tw, "  %d\t%s\t%d\t%s\t%s\n", br.CoveredMessages, br.Hash.String()[:12], br.SummaryChars,
				br.CreatedAt.Local().Format(time.DateTime), ago(br.UsedAt))
		}
		tw.Flush()
	}
	if len(d.RecentSummaries) > 0 {
		o.compactions(d.RecentSummaries)
	}
	if n := len(d.Turns); n > 0 {
		from := max(0, n-shownTurns)
		fmt.Fprintf(w, "\nturns (last %d of %d recorded):\n", n-from, n)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "#\tAT\tBEFORE\tAFTER\tUPSTREAM\t\t")
		for i, t := range d.Turns[from:] {
			var marks []string
			if t.Compacted {
				marks = append(marks, "compacted")
			}
			if t.ServerCompactionInputTokens > 0 {
				marks = append(marks, fmt.Sprintf("upstream compacted %d tokens", t.ServerCompactionInputTokens))
			}
			mark := strings.Join(marks, ", ")
			fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%s\t\n", from+i+1, t.At.Local().Format(time.TimeOnly), t.TokensBefore, t.TokensAfter, t.InputTokens, mark)
		}
		tw.Flush()
	}
	fmt.Fprintln(w, "\ncurrent summary:")
	if d.CurrentSummary == nil {
		_, err := fmt.Fprintln(w, "  (none: not compacted yet)")
		return err
	}
	fmt.Fprintf(w, "  covers %d messages, written %s\n", d.CurrentSummary.CoveredMessages, d.CurrentSummary.CreatedAt.Local().Format(time.DateTime))
	if k := d.CurrentSummary.Kept; k != nil {
		fmt.Fprintf(w, "  messages %d-%d it replaced are kept: ctxpress expand %s\n", k.First, k.Last, k.Ref)
	}
	fmt.Fprintln(w)
	_, err := fmt.Fprintln(w, indent(d.CurrentSummary.Summary, "  "))
	return err
}

// compactions lists the recent compactions, oldest first, with the range
// of client messages each replaced and the reference they are kept under.
func (o convOutput) compactions(ss []admin.SummaryInfo) {
	fmt.Fprintf(o.w, "\ncompactions (last %d; the messages each replaced, printed by ctxpress expand REF):\n", len(ss))
	tw := tabwriter.NewWriter(o.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  AT\tCOVERED\tMESSAGES\tREF")
	for _, s := range ss {
		msgs, ref := "-", "(not kept)"
		if k := s.Kept; k != nil {
			msgs, ref = fmt.Sprintf("%d-%d", k.First, k.Last), k.Ref
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\n", s.At.Local().Format(time.DateTime), s.CoveredMessages, msgs, ref)
	}
	tw.Flush()
}

func flags(c admin.ConversationInfo) string {
	var f []string
	if c.Compacting {
		f = append(f, "compacting")
	}
	if c.BreakerTripped {
		f = append(f, "breaker-open")
	}
	if c.CompactionScheduled {
		f = append(f, "scheduled")
	}
	if c.BranchCount > 0 {
		f = append(f, "summarised")
	}
	return strings.Join(f, ",")
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func indent(s, pre string) string {
	return pre + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pre)
}

func ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case t.IsZero():
		return "-"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// usageText is the upstream's reported usage of a conversation's requests.
func usageText(u admin.UsageInfo, cachedShare float64) string {
	s := fmt.Sprintf("%d input tokens over %d requests, %.1f%% cached, %d written to the cache, %d output",
		u.InputTokens, u.Calls, 100*cachedShare, u.CacheWriteTokens, u.OutputTokens)
	if u.Unreported > 0 {
		s += fmt.Sprintf("; %d without usage (not priced)", u.Unreported)
	}
	return s
}

// billText is an amount in its unit (admin.Costs.CostUnit).
func billText(v float64, unit string) string {
	if unit == admin.CostPrefill {
		return fmt.Sprintf("%.0f prefill tokens", v*1e6)
	}
	return fmt.Sprintf("$%.4f", v)
}
