package admin

import (
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
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

// Unit is the unit of p's bills of a model without a models: price.
func (p Pricing) Unit() string {
	if p.Agent.Local {
		return CostPrefill
	}
	return CostUSD
}

// Where the prices of a bill come from (Costs.PriceBasis).
const (
	// BasisConfigured: the model's models: prices, in money whatever the
	// upstream (a hosted model behind a local address is priced so).
	BasisConfigured = "configured"
	// BasisList: the built-in table's list prices (rewrite.ListPrices).
	BasisList = "list"
	// BasisAssumed: a hosted model nobody knows the price of, at
	// rewrite.DefaultPrices: a guess, and shown as one.
	BasisAssumed = "assumed"
	// BasisLocal: a local server, in prefill tokens (CostPrefill).
	BasisLocal = "local"
)

// Basis is where the prices of a conversation of model come from.
func (p Pricing) Basis(model string) string {
	if _, ok := p.Agent.Models[model]; ok {
		return BasisConfigured
	}
	if p.Agent.Local {
		return BasisLocal
	}
	if _, ok := rewrite.ListPrices(model); ok {
		return BasisList
	}
	return BasisAssumed
}

// unitOf is the unit of a bill on basis.
func unitOf(basis string) string {
	if basis == BasisLocal {
		return CostPrefill
	}
	return CostUSD
}

// SummaryPrices are the prices of a summary call for a conversation of
// model.
func (p Pricing) SummaryPrices(model string) rewrite.Prices {
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
	// PriceBasis is where the prices came from (BasisConfigured, …); of
	// a sum, BasisAssumed when any part was assumed.
	PriceBasis string `json:"price_basis"`
}

// plus returns c with d's amounts added: a sum at assumed prices in any
// part is at assumed prices.
func (c Costs) plus(d Costs) Costs {
	basis := c.PriceBasis
	if basis == "" || d.PriceBasis == BasisAssumed {
		basis = d.PriceBasis
	}
	return Costs{Cost: c.Cost + d.Cost, SummaryCost: c.SummaryCost + d.SummaryCost,
		CostDirectEstimate: c.CostDirectEstimate + d.CostDirectEstimate, MoneySaved: c.MoneySaved + d.MoneySaved,
		CostUnit: c.CostUnit, PriceBasis: basis}
}

// Bill is r's bill: its requests and the direct estimate at its model's
// prices, its summary calls at the summariser's.
func (p Pricing) Bill(r state.Record) Costs {
	prices := p.Agent.PricesFor(r.Model)
	agent, direct := prices.Cost(Billable(r.Usage)), prices.Cost(Billable(r.Direct))
	summary := p.SummaryPrices(r.Model).Cost(Billable(r.Summary))
	basis := p.Basis(r.Model)
	return Costs{Cost: agent + summary, SummaryCost: summary, CostDirectEstimate: direct,
		MoneySaved: direct - agent - summary, CostUnit: unitOf(basis), PriceBasis: basis}
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

// UsageInfoOf is u as the API shows it.
func UsageInfoOf(u state.Usage) UsageInfo {
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

// Billable is u as prices count it.
func Billable(u state.Usage) rewrite.Usage {
	return rewrite.Usage{Input: int(u.Input), Cached: int(u.Cached), CacheWrite: int(u.CacheWrite), Output: int(u.Output)}
}
