package replay

import (
	"github.com/ctxpress/ctxpress/rewrite"
)

// Leg is what the provider metered on one leg of a session.
type Leg struct {
	// Agent requests: how many, and their tokens (Input counts every prompt
	// token, Cached and CacheWrite included; Output is the fixed reply's).
	Requests   int `json:"requests"`
	Input      int `json:"input_tokens"`
	Cached     int `json:"cached_tokens"`
	CacheWrite int `json:"cache_write_tokens"`
	Output     int `json:"output_tokens"`
	MaxPrompt  int `json:"max_prompt_tokens"` // the largest agent prompt
	// Summary calls (ctxpress's), and their tokens.
	Summaries         int `json:"summary_calls"`
	SummaryInput      int `json:"summary_input_tokens"`
	SummaryCached     int `json:"summary_cached_tokens"`
	SummaryCacheWrite int `json:"summary_cache_write_tokens"`
	SummaryOutput     int `json:"summary_output_tokens"`
	// SummaryRefused counts summary calls a real upstream refused as over
	// its window (unbilled; ctxpress tried again with less).
	SummaryRefused int `json:"summary_refused,omitempty"`
}

// sumCalls adds up the metered calls of a leg.
func sumCalls(calls []call) Leg {
	var l Leg
	for _, c := range calls {
		u := c.usage
		if c.err != "" { // a refusal the leg may go past (leg)
			l.SummaryRefused++
			continue
		}
		if c.summary {
			l.Summaries++
			l.SummaryInput += u.InputTokens
			l.SummaryCached += u.CachedTokens
			l.SummaryCacheWrite += u.CacheWriteTokens
			l.SummaryOutput += u.OutputTokens
			continue
		}
		l.Requests++
		l.Input += u.InputTokens
		l.Cached += u.CachedTokens
		l.CacheWrite += u.CacheWriteTokens
		l.Output += u.OutputTokens
		l.MaxPrompt = max(l.MaxPrompt, u.InputTokens)
	}
	return l
}

// add is l and m summed (MaxPrompt: the larger).
func (l Leg) add(m Leg) Leg {
	return Leg{
		Requests: l.Requests + m.Requests, Input: l.Input + m.Input, Cached: l.Cached + m.Cached,
		CacheWrite: l.CacheWrite + m.CacheWrite, Output: l.Output + m.Output, MaxPrompt: max(l.MaxPrompt, m.MaxPrompt),
		Summaries: l.Summaries + m.Summaries, SummaryInput: l.SummaryInput + m.SummaryInput,
		SummaryCached: l.SummaryCached + m.SummaryCached, SummaryCacheWrite: l.SummaryCacheWrite + m.SummaryCacheWrite,
		SummaryOutput: l.SummaryOutput + m.SummaryOutput, SummaryRefused: l.SummaryRefused + m.SummaryRefused,
	}
}

// AllInput is every prompt token the leg sent: agent requests' and
// summary calls'.
func (l Leg) AllInput() int { return l.Input + l.SummaryInput }

// CachedShare is the share of AllInput the provider served from its
// cache.
func (l Leg) CachedShare() float64 {
	if l.AllInput() == 0 {
		return 0
	}
	return float64(l.Cached+l.SummaryCached) / float64(l.AllInput())
}

// cost is the leg's bill: the agent requests' prompts at p (their output,
// the fixed reply, is the same on both legs and left out) and the summary
// calls whole at sp.
func (l Leg) cost(p, sp rewrite.Prices) float64 {
	return p.Cost(rewrite.Usage{Input: l.Input, Cached: l.Cached, CacheWrite: l.CacheWrite}) +
		sp.Cost(rewrite.Usage{Input: l.SummaryInput, Cached: l.SummaryCached,
			CacheWrite: l.SummaryCacheWrite, Output: l.SummaryOutput})
}

// SessionResult is one session's replay.
type SessionResult struct {
	Name   string `json:"name"`
	Format Format `json:"format"`
	// Agent, Model and Approximated are the session's (Session).
	Agent        string `json:"agent,omitempty"`
	Model        string `json:"model,omitempty"`
	Approximated string `json:"approximated,omitempty"`
	Turns        int    `json:"turns"` // requests the client sent
	Direct       Leg    `json:"direct"`
	Ctxpress     Leg    `json:"ctxpress"`
	// Prices price its agent requests, SummaryPrices its summary calls.
	Prices        rewrite.Prices `json:"prices"`
	SummaryPrices rewrite.Prices `json:"summary_prices"`
	// Costs in dollars at its prices; 0 for a failed session.
	CostDirect   float64 `json:"cost_direct"`
	CostCtxpress float64 `json:"cost_ctxpress"`
	// Err is why the session failed ("" when it did not): it is then left
	// out of the totals.
	Err string `json:"error,omitempty"`
}

// CostDelta is the change in cost through ctxpress, as a fraction of
// direct's (-0.25: a quarter cheaper).
func (r SessionResult) CostDelta() float64 { return delta(r.CostDirect, r.CostCtxpress) }

func delta(before, after float64) float64 {
	if before == 0 {
		return 0
	}
	return after/before - 1
}

// Totals sum the sessions that did not fail.
type Totals struct {
	Sessions     int     `json:"sessions"`
	Failed       int     `json:"failed"`
	Direct       Leg     `json:"direct"`
	Ctxpress     Leg     `json:"ctxpress"`
	CostDirect   float64 `json:"cost_direct"`
	CostCtxpress float64 `json:"cost_ctxpress"`
	// Costlier counts the sessions that cost more through ctxpress;
	// Worst is the one that cost the most more ("" when none did).
	Costlier   int     `json:"costlier"`
	Worst      string  `json:"worst,omitempty"`
	WorstDelta float64 `json:"worst_delta,omitempty"`
}

// TokensDelta is the change in tokens without the cache (every prompt
// token, summary calls' included), as a fraction of direct's.
func (t Totals) TokensDelta() float64 {
	return delta(float64(t.Direct.AllInput()), float64(t.Ctxpress.AllInput()))
}

// CostDelta is the change in the bill, as a fraction of direct's.
func (t Totals) CostDelta() float64 { return delta(t.CostDirect, t.CostCtxpress) }

// Report is a replay's outcome.
type Report struct {
	// Simulated: the provider was the simulation (else Upstream).
	Simulated     bool           `json:"simulated"`
	Upstream      string         `json:"upstream,omitempty"`
	SummaryTokens int            `json:"summary_tokens,omitempty"` // simulated summaries' length
	Prices        rewrite.Prices `json:"prices"`
	SummaryPrices rewrite.Prices `json:"summary_prices"`
	// PricedByModel: each session is priced at its model's prices (the
	// prices above price the sessions whose model is not known).
	PricedByModel bool            `json:"priced_by_model,omitempty"`
	Sessions      []SessionResult `json:"sessions"`
	// Skipped are the files of the directories replayed that hold no
	// session.
	Skipped []Skipped `json:"skipped,omitempty"`
	Totals  Totals    `json:"totals"`
}

func newReport(results []SessionResult, o Options) Report {
	r := Report{Simulated: o.Upstream == "", Upstream: o.Upstream, Prices: o.Prices, SummaryPrices: o.SummaryPrices,
		PricedByModel: o.PricesFor != nil, Sessions: results}
	if r.Simulated {
		r.SummaryTokens = o.SummaryTokens
		if r.SummaryTokens <= 0 {
			r.SummaryTokens = DefaultSummaryTokens
		}
	}
	t := &r.Totals
	for _, s := range results {
		if s.Err != "" {
			t.Failed++
			continue
		}
		t.Sessions++
		t.Direct, t.Ctxpress = t.Direct.add(s.Direct), t.Ctxpress.add(s.Ctxpress)
		t.CostDirect += s.CostDirect
		t.CostCtxpress += s.CostCtxpress
		if d := s.CostDelta(); s.CostCtxpress > s.CostDirect {
			t.Costlier++
			if t.Worst == "" || d > t.WorstDelta {
				t.Worst, t.WorstDelta = s.Name, d
			}
		}
	}
	return r
}

// Failed reports whether any session failed.
func (r Report) Failed() bool { return r.Totals.Failed > 0 }
