package proxy

import (
	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/compaction"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
)

// What a conversation costs: the record sums the tokens the upstream
// reported (state.Record's Usage, Summary and Direct), and they are priced
// when shown, at the prices configured then, so a corrected price applies
// to the whole history.

// PricingOf is how a server run with cfg prices its conversations (the
// `ctxpress conversations` CLI prices a db file alike): the models' prices
// (cfg.Cost), a local upstream (LocalUpstream, else its address) by
// prefill, and the summary calls at the summariser's model and server.
func PricingOf(cfg Config) admin.Pricing {
	local := func(base string, force *bool) bool {
		if force != nil {
			return *force
		}
		up, err := parseUpstream(base)
		return err == nil && isLocalHost(up.host)
	}
	p := admin.Pricing{Agent: cfg.Cost, SummaryModel: cfg.Compaction.Summarizer.Model}
	p.Agent.Local = cfg.Cost.Local || local(cfg.Upstream, cfg.LocalUpstream)
	p.Summary = p.Agent
	if base := cfg.Compaction.Summarizer.BaseURL; base != "" {
		p.Summary.Local = local(base, nil)
	}
	return p
}

// pricing is how s prices its conversations.
func (s *Server) pricing() admin.Pricing { return PricingOf(s.cfg) }

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
	d := rewrite.DirectUsage(rewrite.DirectTurn{Forwarded: admin.Billable(answerUsage(u)), Sent: t.tokensBefore, After: t.tokensAfter,
		PrevSent: l.LastSent}, cacheSeen(rec.Usage))
	rec.Direct = rec.Direct.Plus(state.Usage{Input: int64(d.Input) + server.Input, Cached: int64(d.Cached) + server.Cached,
		CacheWrite: int64(d.CacheWrite) + server.CacheWrite, Output: int64(d.Output) + server.Output})
	l.LastSent = d.Input
}

// summaryUsage is what a summary call's answer counts for: its usage, or
// an answer without usage as unreported; a refusal or no answer at all
// is not billed and counts for nothing.
func summaryUsage(sr compaction.SummaryResult) state.Usage {
	if sr.Status < 200 || sr.Status > 299 {
		return state.Usage{}
	}
	return callUsage(sr.Usage)
}

// countSummary adds u, what ti's summary calls used, to ti's record and
// to its event ev: apart from the turn's, so a summary is never counted
// as a request of the agent's, and whether the summary is then stored or
// not (its tokens were spent either way).
func (c *compactions) countSummary(ti turnInput, ev *admin.Event, u state.Usage) {
	if u == (state.Usage{}) {
		return
	}
	info := admin.UsageInfoOf(u)
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
