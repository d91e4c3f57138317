package rewrite

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/squash"
	"github.com/tidwall/gjson"
)

var pruneMeasure = flag.Bool("prune.measure", false, "TestPruneOnInteractiveCorpus: replay every corpus trace, and print the tables")

// session is a replayed conversation's bill: the tokens forwarded over
// all its requests, the part of them a provider caching exact prefixes
// reads from its cache, and what they cost at prices.
type session struct {
	requests, tokens, cached int
	cost                     float64
}

// replayCost sends msgs[:k] for each k of turns through p, with the
// previous request's marks as the proxy keeps them and, when econ is set,
// the cost model's Economics for the request (ExpectedTurnsAhead of the
// requests so far), and bills it: a request's cached tokens are those of
// the forwarded messages it shares, byte for byte, with the previous
// forwarded request from the start (with the tokens besides messages), as
// a provider caching exact prefixes reads them.
func replayCost(tb testing.TB, p *Pipeline, msgs []string, turns []int, prices Prices, econ bool) session {
	tb.Helper()
	var s session
	var prev Result
	var prevMsgs []string
	for n, k := range turns {
		opts := Options{PrevDedups: prev.Dedups, PrevPrunes: prev.Prunes}
		if econ {
			opts.Economics = &Economics{Prices: prices, TurnsAhead: ExpectedTurnsAhead(n + 1)}
		}
		res := p.RewriteWith(chat("gpt-4o", msgs[:k]...), opts)
		fwd := rawMessages(tb, res.Body)
		cached := 0
		if prev.Body != nil {
			cached = res.view.fixed
			for i := 0; i < len(fwd) && i < len(prevMsgs) && fwd[i] == prevMsgs[i]; i++ {
				cached += res.view.fwd[i]
			}
		}
		s.requests++
		s.tokens += res.TokensAfter
		s.cached += cached
		s.cost += prices.Cost(Usage{Input: res.TokensAfter, Cached: cached})
		prev, prevMsgs = res, fwd
	}
	return s
}

// withAsks returns a corpus trace's messages with a user ask inserted
// after every every-th tool result (before the next assistant message),
// as an interactive session's user steers the agent: the corpus's runs
// have one ask, so nothing in them is "before the current user turn".
func withAsks(tb testing.TB, body []byte, every int) []string {
	tb.Helper()
	var out []string
	results := 0
	msgs := gjson.GetBytes(body, "messages").Array()
	for i, m := range msgs {
		out = append(out, m.Raw)
		if m.Get("role").Str != "tool" {
			continue
		}
		if results++; results%every == 0 && i+1 < len(msgs) && msgs[i+1].Get("role").Str == "assistant" {
			out = append(out, `{"role":"user","content":"Go on with the next step (ask `+itoa(results/every)+`)."}`)
		}
	}
	return out
}

// What pruning saves on interactive sessions, and what it costs where a
// provider caches prefixes: every corpus trace made an interactive
// session (a user ask every 10 tool results) and replayed request by
// request without pruning, with pruning gated by the cost model (which
// gates dedup too, in both), and with no cost model at all (pruning and
// dedup taken on their minimums alone). Gated, pruning must lower the
// bill in total and, at the default min_tokens, make no session's more
// than 2% higher (the cost model guesses how many requests are still to
// come, and a session may end sooner); the log says by how much it lowers
// the tokens and the bill. -prune.measure replays every trace (else
// three), for several min_tokens and ask intervals.
func TestPruneOnInteractiveCorpus(t *testing.T) {
	traces := loadTraces(t)
	if !*pruneMeasure {
		traces = []trace{traces[4], traces[20], traces[33]}
	}
	prices := DefaultPrices
	mins, intervals := []int{DefaultPruneMinTokens}, []int{10}
	if *pruneMeasure {
		mins, intervals = []int{250, 500, 1000}, []int{5, 10, 20}
	}
	for _, every := range intervals {
		for _, min := range mins {
			var off, gated, blind session
			worse, worst := 0, 0.0
			for _, tr := range traces {
				msgs := withAsks(t, tr.body, every)
				turns := everyTurn(msgs, 2)
				cfg := pruneConfig(min)
				cfg.Prune.Enabled = false
				o := replayCost(t, New(cfg), msgs, turns, prices, true)
				g := replayCost(t, New(pruneConfig(min)), msgs, turns, prices, true)
				b := replayCost(t, New(pruneConfig(min)), msgs, turns, prices, false)
				if g.cost > o.cost*1.001 {
					worse++
				}
				worst = max(worst, g.cost/o.cost-1)
				if g.cost > o.cost*1.02 && min == DefaultPruneMinTokens {
					t.Errorf("%s (ask every %d, min %d): gated pruning costs %.4f, without %.4f", tr.name, every, min, g.cost, o.cost)
				}
				for _, x := range []struct{ sum, s *session }{{&off, &o}, {&gated, &g}, {&blind, &b}} {
					x.sum.requests += x.s.requests
					x.sum.tokens += x.s.tokens
					x.sum.cached += x.s.cached
					x.sum.cost += x.s.cost
				}
			}
			t.Logf("ask every %2d results, min_tokens %4d, %d traces, %d requests: tokens %s gated, %s blind; bill %s gated, %s blind; cached share %.1f%% -> %.1f%% gated; %d sessions costlier (at most %+.1f%%)",
				every, min, len(traces), off.requests, pct(gated.tokens, off.tokens), pct(blind.tokens, off.tokens),
				pctf(gated.cost, off.cost), pctf(blind.cost, off.cost), 100*float64(off.cached)/float64(off.tokens),
				100*float64(gated.cached)/float64(gated.tokens), worse, 100*worst)
			if gated.cost > off.cost {
				t.Errorf("ask every %d, min %d: gated pruning costs %.4f in all, without %.4f", every, min, gated.cost, off.cost)
			}
		}
	}
}

func pct(a, b int) string { return pctf(float64(a), float64(b)) }

func pctf(a, b float64) string { return fmt.Sprintf("%+.1f%%", 100*(a-b)/b) }

// The sizes pruning would act on: over the corpus's tool outputs as
// squashed (outputs squash keeps whole aside), how many are over each
// min_tokens and what share of their tokens their lines would save. Over
// the default minimum a line saves at least 80% of what it replaces.
func TestPruneMinTokensAgainstTheCorpus(t *testing.T) {
	p := New(pruneConfig(0))
	outs := corpusOutputs(t, 0)
	total, kept, longest := 0, 0, 0
	type row struct{ n, saved int }
	mins := []int{100, 250, 500, 1000, 2000, 4000}
	rows := make([]row, len(mins))
	for _, o := range outs {
		call := squash.Call{Tool: o.call.Name, Args: o.call.Arguments}
		if p.shell.KeepsWhole(call) {
			kept++
			continue
		}
		text := p.squasher.ApplyCall(call, o.text).Text
		tokens := p.counter.Count(O200K, text)
		line := p.counter.Count(O200K, p.shell.PruneLine(call, o.text))
		total += tokens
		longest = max(longest, line)
		if tokens > DefaultPruneMinTokens && line*5 > tokens {
			t.Errorf("%s: a line of %d tokens for an output of %d: %s", o.trace, line, tokens, p.shell.PruneLine(call, o.text))
		}
		for i, m := range mins {
			if tokens > m && line < tokens {
				rows[i].n++
				rows[i].saved += tokens - line
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d outputs (%d kept whole: reads, exempt tools), %d tokens as squashed; the longest line %d tokens\n", len(outs), kept, total, longest)
	for i, m := range mins {
		fmt.Fprintf(&b, "  min_tokens %4d: %4d outputs (%4.1f%%) pruned, saving %4.1f%% of the tokens\n",
			m, rows[i].n, 100*float64(rows[i].n)/float64(len(outs)-kept), 100*float64(rows[i].saved)/float64(total))
	}
	t.Log(b.String())
}

// The scripted Claude Code session (the captured run's requests, then
// two more asks with test runs) without pruning and with pruning gated by
// the cost model at Claude Sonnet's prices: pruning must not raise the
// bill. A request's cached share is the byte share of its prompt, as the
// upstream reads it, that the previous request's prompt starts with; the
// rest is written to the cache (Claude Code marks its newest message).
func TestPruneOnClaudeCodeSession(t *testing.T) {
	prices := CostConfig{}.PricesFor("claude-sonnet-4-5")
	bill := func(prune PruneConfig, gated bool) (tokens int, cost float64, pruned int) {
		s := newClaudeSession(t, Config{Squash: &squash.Config{}, Dedup: DefaultDedupConfig(), Prune: prune})
		for k, st := range claudeScript(t) {
			s.opts.Economics = nil
			if gated {
				s.opts.Economics = &Economics{Prices: prices, TurnsAhead: ExpectedTurnsAhead(k + 1)}
			}
			r := s.request(false, 0)
			in := s.results[k].TokensAfter
			cached := 0
			if k > 0 {
				prev, n := s.forwarded[k-1].Prompt, 0
				for n < len(prev.Segments) && n < len(r.Prompt.Segments) && string(prev.Segments[n]) == string(r.Prompt.Segments[n]) {
					n++
				}
				cached = int(float64(in) * float64(r.Prompt.Bytes(n)) / float64(r.Prompt.Bytes(len(r.Prompt.Segments))))
			}
			tokens += in
			cost += prices.Cost(Usage{Input: in, Cached: cached, CacheWrite: in - cached})
			pruned = max(pruned, s.results[k].Pruned)
			if s.reply(r, st) {
				break
			}
		}
		return tokens, cost, pruned
	}
	offTokens, offCost, _ := bill(PruneConfig{}, false)
	for _, tc := range []struct {
		min   int
		gated bool
	}{{0, true}, {200, true}, {200, false}} {
		onTokens, onCost, pruned := bill(PruneConfig{Enabled: true, MinTokens: tc.min}, tc.gated)
		t.Logf("min_tokens %d, gated %v: %d results pruned; tokens %d -> %d (%s), bill $%.4f -> $%.4f (%s)", PruneConfig{MinTokens: tc.min}.minTokens(), tc.gated,
			pruned, offTokens, onTokens, pct(onTokens, offTokens), offCost, onCost, pctf(onCost, offCost))
		if tc.gated && onCost > offCost {
			t.Errorf("gated pruning raised the bill: $%.4f, without $%.4f", onCost, offCost)
		}
	}
}
