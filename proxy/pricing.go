package proxy

import (
	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/internal/baseurl"
)

// PricingOf is how a server run with cfg prices its conversations (the
// `ctxpress conversations` CLI prices a db file alike): the models' prices
// (cfg.Cost), a local upstream (LocalUpstream, else its address) by
// prefill, and the summary calls at the summariser's model and server.
// The record sums the tokens the upstream reported and they are priced
// when shown, at the prices configured then, so a corrected price
// applies to the whole history.
func PricingOf(cfg Config) admin.Pricing {
	local := func(base string, force *bool) bool {
		if force != nil {
			return *force
		}
		up, err := baseurl.Parse(base)
		return err == nil && baseurl.IsLocalHost(up.Host)
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
