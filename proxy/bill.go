package proxy

import (
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
)

// What a conversation costs: the record sums the tokens the upstream
// reported (state.Record's Usage, Summary and Direct), and they are priced
// when shown, at the prices configured then, so a corrected price applies
// to the whole history.

// Units of a bill (Costs.CostUnit).
const (
	// CostUSD: dollars at the models' prices (rewrite.CostConfig.PricesFor).
	CostUSD = "USD"
	// CostPrefill: a local upstream (rewrite.LocalPrices), in millions of
	// prefill-token equivalents: a fresh prompt token is one, a cached one
	// none, an output token ten. A models: price is read in this unit too.
	CostPrefill = "prefill"
)

// Pricing prices conversations' reported usage. The zero value prices
// every model at the built-in table's list prices.
type Pricing struct {
	// Agent prices the conversations' own requests (Config.Cost).
	Agent rewrite.CostConfig
	// Summary prices ctxpress's summary calls: the upstream's prices,
	// unless compaction.summarizer.base_url names another server.
	Summary rewrite.CostConfig
	// SummaryModel is the summary calls' model
	// (compaction.summarizer.model); "" means the conversation's own.
	SummaryModel string
}

// PricingOf is how a server run with cfg prices its conversations (the
// `ctxpress conversations` CLI prices a db file alike): the models' prices
// (cfg.Cost), a local upstream (LocalUpstream, else its address) by
// prefill, and the summary calls at the summariser's model and server.
func PricingOf(cfg Config) Pricing {
	local := func(base string, force *bool) bool {
		if force != nil {
			return *force
		}
		up, err := parseUpstream(base)
		return err == nil && isLocalHost(up.host)
	}
	p := Pricing{Agent: cfg.Cost, SummaryModel: cfg.Compaction.Summarizer.Model}
	p.Agent.Local = cfg.Cost.Local || local(cfg.Upstream, cfg.LocalUpstream)
	p.Summary = p.Agent
	if base := cfg.Compaction.Summarizer.BaseURL; base != "" {
		p.Summary.Local = local(base, nil)
	}
	return p
}

// pricing is how s prices its conversations.
func (s *Server) pricing() Pricing { return PricingOf(s.cfg) }

// unit is the unit p's bills are in.
func (p Pricing) unit() string {
	if p.Agent.Local {
		return CostPrefill
	}
	return CostUSD
}

// summaryPrices are the prices of a summary call for a conversation of
// model.
func (p Pricing) summaryPrices(model string) rewrite.Prices {
	if p.SummaryModel != "" {
		model = p.SummaryModel
	}
	return p.Summary.PricesFor(model)
}

// Costs are a bill at per-model prices (Pricing), in CostUnit, of the
// calls whose usage the upstream reported: a call answered without usage
// is counted in UsageInfo.Unreported and priced at nothing, not guessed.
type Costs struct {
	// Cost is what the conversation's requests and ctxpress's summary
	// calls cost; SummaryCost is the summary calls' part of it.
	Cost        float64 `json:"cost"`
	SummaryCost float64 `json:"summary_cost"`
	// CostDirectEstimate is what the same requests would have cost sent
	// as the client wrote them, with the cache a client that resends its
	// previous request as a prefix has (rewrite.DirectUsage).
	CostDirectEstimate float64 `json:"cost_direct_estimate"`
	// MoneySaved is CostDirectEstimate less Cost: what ctxpress saved net
	// of cache effects and its summary calls; negative when it cost more.
	MoneySaved float64 `json:"money_saved"`
	// CostUnit is CostUSD or CostPrefill (a local upstream).
	CostUnit string `json:"cost_unit"`
}

// plus returns c with d's amounts added.
func (c Costs) plus(d Costs) Costs {
	return Costs{Cost: c.Cost + d.Cost, SummaryCost: c.SummaryCost + d.SummaryCost,
		CostDirectEstimate: c.CostDirectEstimate + d.CostDirectEstimate, MoneySaved: c.MoneySaved + d.MoneySaved,
		CostUnit: c.CostUnit}
}

// costs is r's bill: its requests and the direct estimate at its model's
// prices, its summary calls at the summariser's.
func (p Pricing) costs(r state.Record) Costs {
	prices := p.Agent.PricesFor(r.Model)
	agent, direct := prices.Cost(billable(r.Usage)), prices.Cost(billable(r.Direct))
	summary := p.summaryPrices(r.Model).Cost(billable(r.Summary))
	return Costs{Cost: agent + summary, SummaryCost: summary, CostDirectEstimate: direct,
		MoneySaved: direct - agent - summary, CostUnit: p.unit()}
}

// UsageInfo is usage an upstream reported, summed over calls.
type UsageInfo struct {
	// Calls is how many calls reported usage; Unreported how many were
	// answered without (they are in no count and no cost).
	Calls      int64 `json:"calls"`
	Unreported int64 `json:"unreported"`
	// InputTokens is every prompt token; CachedTokens and
	// CacheWriteTokens the parts of it read from and written to the
	// prompt cache.
	InputTokens      int64 `json:"input_tokens"`
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
}

func usageInfoOf(u state.Usage) UsageInfo {
	return UsageInfo{Calls: u.Calls, Unreported: u.Unreported, InputTokens: u.Input, CachedTokens: u.Cached,
		CacheWriteTokens: u.CacheWrite, OutputTokens: u.Output}
}

// cachedShare is the part of u's input read from the prompt cache; 0
// without input.
func cachedShare(u state.Usage) float64 {
	if u.Input <= 0 {
		return 0
	}
	return float64(u.Cached) / float64(u.Input)
}

// callUsage is one answered call's usage as a record sums it: counted,
// or counted as unreported. It is what the call was billed: its answer's
// usage and the upstream's own compaction of the request, if any.
func callUsage(u wire.Usage) state.Usage {
	if !u.Found {
		return state.Usage{Unreported: 1}
	}
	billed := answerUsage(u).Plus(serverCompactionUsage(u))
	billed.Calls = 1 // one call, however many iterations
	return billed
}

// answerUsage is a call's usage without the upstream's own compaction of
// the request: what its answer's top-level usage counts.
func answerUsage(u wire.Usage) state.Usage {
	return state.Usage{Calls: 1, Input: int64(u.InputTokens), Cached: int64(u.CachedTokens),
		CacheWrite: int64(u.CacheWriteTokens), Output: int64(u.OutputTokens)}
}

// serverCompactionUsage is the part of callUsage(u) the upstream's own
// compaction of the request used, as a record sums it: one call when it
// compacted, else nothing.
func serverCompactionUsage(u wire.Usage) state.Usage {
	if !u.Found || !u.ServerCompacted {
		return state.Usage{}
	}
	c := u.ServerCompaction
	return state.Usage{Calls: 1, Input: int64(c.InputTokens), Cached: int64(c.CachedTokens),
		CacheWrite: int64(c.CacheWriteTokens), Output: int64(c.OutputTokens)}
}

// billable is u as prices count it.
func billable(u state.Usage) rewrite.Usage {
	return rewrite.Usage{Input: int(u.Input), Cached: int(u.Cached), CacheWrite: int(u.CacheWrite), Output: int(u.Output)}
}

// cacheSeen is what a conversation's usage so far shows of the
// upstream's prompt cache.
func cacheSeen(u state.Usage) rewrite.CacheSeen {
	return rewrite.CacheSeen{Reads: u.Cached > 0 || u.CacheWrite > 0, Writes: u.CacheWrite > 0}
}

// countUsage adds the usage u of t, an answered turn, to rec, and its
// direct estimate; l is t's line, whose LastSent is the direct size of
// the line's previous request. A turn ctxpress answered itself (/compact)
// cost nothing and is not counted.
//
// The upstream's own compaction of the request (Anthropic's
// usage.iterations) is counted in both: the client asked for it and
// would have paid it without ctxpress too. The direct estimate of the
// rest is of the answer's own usage, the context after that compaction.
func countUsage(rec *state.Record, l *state.Line, t *turn, u wire.Usage) {
	if !t.forwarded {
		return
	}
	server := serverCompactionUsage(u)
	rec.Usage = rec.Usage.Plus(callUsage(u))
	rec.ServerCompaction = rec.ServerCompaction.Plus(server)
	if !u.Found {
		l.LastSent = t.tokensBefore // the estimate alone, for the next one's cache
		return
	}
	d := rewrite.DirectUsage(rewrite.DirectTurn{Forwarded: billable(answerUsage(u)), Sent: t.tokensBefore, After: t.tokensAfter,
		PrevSent: l.LastSent}, cacheSeen(rec.Usage))
	rec.Direct = rec.Direct.Plus(state.Usage{Input: int64(d.Input) + server.Input, Cached: int64(d.Cached) + server.Cached,
		CacheWrite: int64(d.CacheWrite) + server.CacheWrite, Output: int64(d.Output) + server.Output})
	l.LastSent = d.Input
}

// summaryUsage is what a summary call's answer counts for: its usage, or
// an answer without usage as unreported; a refusal or no answer at all
// is not billed and counts for nothing.
func summaryUsage(sr SummaryResult) state.Usage {
	if sr.Status < 200 || sr.Status > 299 {
		return state.Usage{}
	}
	return callUsage(sr.Usage)
}

// countSummary adds u, what ti's summary calls used, to ti's record and
// to its event ev: apart from the turn's, so a summary is never counted
// as a request of the agent's, and whether the summary is then stored or
// not (its tokens were spent either way).
func (c *compactions) countSummary(ti turnInput, ev *Event, u state.Usage) {
	if u == (state.Usage{}) {
		return
	}
	info := usageInfoOf(u)
	ev.SummaryUsage = &info
	if _, err := c.store.Update(ti.key, func(r *state.Record) error {
		r.Summary = r.Summary.Plus(u)
		return nil
	}); err != nil {
		// The store is failing: the compaction's own write says so (its
		// event and warning); one more warning would only repeat it.
		c.storeFailed()
		c.log.Debug().Err(err).Msg("cannot record the summary call's usage")
	}
}
