package replay

import (
	"bytes"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/ctxpress/ctxpress/rewrite"
)

// Proxy is a ctxpress started for one session's replay.
type Proxy interface {
	// BaseURL is where clients send requests, ending in /v1.
	BaseURL() string
	// WaitIdle blocks until its background work (a summary being
	// prepared, turns queued for its store) has ended.
	WaitIdle()
	// WaitRecorded blocks until the turns answered so far are in its
	// store, not waiting for summaries prepared in the background.
	WaitRecorded()
	// Background reports how many summaries it is preparing in the
	// background now.
	Background() int
	// Waiting reports how many requests wait now for a compaction of
	// their conversation that another one started.
	Waiting() int
	// Close stops it and removes its state.
	Close() error
}

// StartFunc starts a fresh ctxpress whose upstream is the base URL
// upstream, and whose summariser, when summariser is not "", is that base
// URL instead of the upstream.
type StartFunc func(upstream, summariser string) (Proxy, error)

// Options say how sessions are replayed.
type Options struct {
	// Start starts the ctxpress of one session's second leg.
	Start StartFunc
	// Upstream is a real upstream's base URL; "" replays against the
	// simulation (Sim), a fresh one per session and leg.
	Upstream string
	// Summariser: ctxpress's summary calls go to an endpoint of their own
	// (the config's compaction.summarizer.base_url), metered apart: in the
	// simulation a second provider with its own cache, else
	// SummariserUpstream.
	Summariser         bool
	SummariserUpstream string
	// APIKey is sent on the direct leg to a real upstream (Authorization:
	// Bearer, or x-api-key for Messages); ctxpress adds its own.
	APIKey string
	// SummaryTokens is the simulated summaries' length (0: the default).
	SummaryTokens int
	// Prices price the agent requests, SummaryPrices the summary calls.
	Prices, SummaryPrices rewrite.Prices
	// PricesFor, when set, prices a session whose model is known
	// (Session.Model) at that model's prices instead, its summary calls
	// too unless they go to a Summariser of their own.
	PricesFor func(model string) rewrite.Prices
	// Parallel is how many sessions are replayed at once (0: one per CPU).
	Parallel int
	// Tokens counts the simulation's prompts (nil: a new one).
	Tokens *Tokens
	// Timing is how long the session's steps take, which decides when a
	// summary prepared in the background applies (see Timing).
	Timing Timing

	client *http.Client // the replay's own calls
}

// Run replays each session twice, straight to the provider and through a
// ctxpress of its own, and reports both. A session that fails is
// reported with its error; the others go on.
func Run(sessions []Session, o Options) Report {
	if o.Tokens == nil {
		o.Tokens = NewTokens()
	}
	// A whole answer may take minutes from a real model.
	o.client = &http.Client{Timeout: 30 * time.Minute}
	par := o.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	results := make([]SessionResult, len(sessions))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(par, max(len(sessions), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = o.session(sessions[i])
			}
		}()
	}
	for i := range sessions {
		next <- i
	}
	close(next)
	wg.Wait()
	return newReport(results, o)
}

// session reads s and replays it on both legs.
func (o Options) session(s Session) SessionResult {
	r := SessionResult{Name: s.Name, Format: s.Format, Turns: s.Turns, Agent: s.Agent, Model: s.Model,
		Approximated: s.Approximated}
	r.Prices, r.SummaryPrices = o.pricesOf(s.Model)
	s, err := s.Read()
	if err != nil {
		r.Err = "reading: " + err.Error()
		return r
	}
	r.Turns = len(s.Requests)
	if r.Direct, err = o.leg(s, false); err != nil {
		r.Err = "direct: " + err.Error()
		return r
	}
	if r.Ctxpress, err = o.leg(s, true); err != nil {
		r.Err = "through ctxpress: " + err.Error()
		return r
	}
	r.CostDirect, r.CostCtxpress = r.Direct.cost(r.Prices, r.SummaryPrices), r.Ctxpress.cost(r.Prices, r.SummaryPrices)
	return r
}

// pricesOf are the prices of a session whose requests name model: its
// agent requests', then its summary calls'.
func (o Options) pricesOf(model string) (agent, summary rewrite.Prices) {
	if o.PricesFor == nil || model == "" {
		return o.Prices, o.SummaryPrices
	}
	p := o.PricesFor(model)
	if o.Summariser {
		return p, o.SummaryPrices
	}
	return p, p
}

// newBackend is a fresh provider: a simulation with an empty cache, timed
// by clk when it is not nil, or the real upstream at base.
func (o Options) newBackend(client *http.Client, base string, clk *clock) backend {
	if o.Upstream == "" {
		sim := NewSim(o.Tokens, o.SummaryTokens)
		sim.clock = clk
		return simBackend(sim)
	}
	return upstreamBackend(client, base)
}

// leg replays s once, through ctxpress when through is set, and returns
// what the provider metered.
func (o Options) leg(s Session, through bool) (Leg, error) {
	// The direct leg is not timed: nothing of it runs in the background.
	clk, timed := &clock{timing: o.Timing}, (*clock)(nil)
	if through {
		timed = clk
	}
	up, err := startMeter(o.newBackend(o.client, o.Upstream, timed), false)
	if err != nil {
		return Leg{}, err
	}
	defer up.close()
	meters := []*meter{up}
	target := up.baseURL()
	var p Proxy
	if through {
		summariser := ""
		if o.Summariser {
			sum, err := startMeter(o.newBackend(o.client, o.SummariserUpstream, timed), true)
			if err != nil {
				return Leg{}, err
			}
			defer sum.close()
			meters, summariser = append(meters, sum), sum.baseURL()
		}
		if p, err = o.Start(up.baseURL(), summariser); err != nil {
			return Leg{}, fmt.Errorf("starting ctxpress: %w", err)
		}
		target = p.BaseURL()
	}
	sendErr := o.send(s, target, p, clk)
	if p != nil {
		clk.drain(p)
		p.WaitIdle()
		if err := p.Close(); err != nil && sendErr == nil {
			sendErr = fmt.Errorf("stopping ctxpress: %w", err)
		}
	}
	var calls []call
	for _, m := range meters {
		calls = append(calls, m.recorded()...)
	}
	// A refusal anywhere (a summary call ctxpress got past included) makes
	// the leg fail: a saving measured on refused requests is none. Except
	// a summary call over a real upstream's window: ctxpress sends it again
	// with half the transcript (the refusal is not billed, and is counted).
	for _, c := range calls {
		if c.err != "" && !(c.summary && c.overflow) {
			kind := "agent request"
			if c.summary {
				kind = "summary call"
			}
			return Leg{}, fmt.Errorf("provider, %s: %s", kind, c.err)
		}
	}
	if sendErr != nil {
		return Leg{}, sendErr
	}
	return sumCalls(calls), nil
}

// send posts s's requests to target in order, as its client did, paced
// as o.Timing says; p is the ctxpress they go through, nil on the direct
// leg. Simulated, each request waits for the turns before it to be
// recorded and for the summary calls that ended by its time (clock).
func (o Options) send(s Session, target string, p Proxy, clk *clock) error {
	models := answerTokens(s, o.Tokens)
	for k, body := range s.Requests {
		req, err := http.NewRequest(http.MethodPost, target+s.Format.Path(), bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Session-ID", s.Name)
		if s.Format == Messages {
			req.Header.Set("Anthropic-Version", "2023-06-01")
		}
		if o.APIKey != "" && p == nil {
			if s.Format == Messages {
				req.Header.Set("X-Api-Key", o.APIKey)
			} else {
				req.Header.Set("Authorization", "Bearer "+o.APIKey)
			}
		}
		simulated := p != nil && o.Upstream == "" && !o.Timing.Live
		if simulated {
			clk.releaseDue(p)
		}
		clk.sent(o.Timing.answerTime(models[k]))
		resp, out, err := clk.roundTrip(o.client, req, p)
		if err != nil {
			return fmt.Errorf("request %d of %d: %w", k+1, len(s.Requests), err)
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("request %d of %d: status %d: %s", k+1, len(s.Requests), resp.StatusCode, errorMessage(out))
		}
		switch {
		case p == nil || k+1 == len(s.Requests):
		case simulated:
			clk.settle(p)
			clk.wait(o.Timing.toolTime())
		default: // live: a real upstream, or Timing.Live
			p.WaitRecorded()
			time.Sleep(o.Timing.toolTime())
		}
	}
	return nil
}
