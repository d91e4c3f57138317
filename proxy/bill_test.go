package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/compaction"

	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// near reports whether two amounts of money agree to a millionth of a
// cent (they are sums of float products in different orders).
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-8*math.Max(1, math.Abs(b)) }

// chatCacheUpstream is a chat completions upstream on 127.0.0.1 with
// OpenAI's prompt caching: a request's prompt is its messages (bytes/4),
// and the longest prefix it shares with an earlier request's is reported
// as prompt_tokens_details.cached_tokens. It refuses what OpenAI refuses
// of what it reads (not JSON, no model, no messages, stream_options
// without stream), and sends the usage chunk of a stream only when
// stream_options.include_usage asks. A summary call is answered with
// summary (testSummary when empty), once onSummary, when set, returns.
type chatCacheUpstream struct {
	*httptest.Server
	summary   string
	onSummary func()
	mu        sync.Mutex
	// noUsage are the requests (counted from 1) answered without usage,
	// as some servers do.
	noUsage map[int]bool
	seen    []string      // the messages of every request, raw; guarded by mu
	got     []chatReplied // guarded by mu
}

// chatReplied is one answered request and the usage it was told.
type chatReplied struct {
	summary                bool
	usage                  bool // reported at all
	prompt, cached, output int
}

func newChatCacheUpstream(t *testing.T) *chatCacheUpstream {
	u := &chatCacheUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *chatCacheUpstream) BaseURL() string { return u.URL + "/v1" }

func (u *chatCacheUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	refuse := func(msg string) {
		answerJSON(w, http.StatusBadRequest, []byte(fmt.Sprintf(`{"error":{"message":%q,"type":"invalid_request_error"}}`, msg)))
	}
	root := gjson.ParseBytes(body)
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions":
		http.NotFound(w, r)
		return
	case !gjson.ValidBytes(body):
		refuse("We could not parse the JSON body of your request.")
		return
	case root.Get("model").Str == "":
		refuse("you must provide a model parameter")
		return
	case len(root.Get("messages").Array()) == 0:
		refuse("'messages' must contain at least one message")
		return
	case root.Get("stream_options").Exists() && !root.Get("stream").Bool():
		refuse("The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		return
	}
	msgs := root.Get("messages").Raw
	g := chatReplied{summary: openaitest.IsSummaryRequest(body), prompt: len(msgs)/4 + 1, output: 5}
	if g.summary && u.onSummary != nil {
		u.onSummary()
	}
	u.mu.Lock()
	for _, s := range u.seen {
		n := 0
		for n < len(s) && n < len(msgs) && s[n] == msgs[n] {
			n++
		}
		g.cached = max(g.cached, n/4)
	}
	u.seen = append(u.seen, msgs)
	g.usage = !u.noUsage[len(u.seen)]
	u.got = append(u.got, g)
	u.mu.Unlock()

	text := "Looking at it now."
	switch {
	case g.summary && u.summary != "":
		text = u.summary
	case g.summary:
		text = testSummary
	}
	usage := map[string]any{"prompt_tokens": g.prompt, "completion_tokens": g.output, "total_tokens": g.prompt + g.output,
		"prompt_tokens_details": map[string]int{"cached_tokens": g.cached}}
	model := root.Get("model").Str
	if !root.Get("stream").Bool() {
		answer := map[string]any{"id": "chatcmpl-c", "object": "chat.completion", "created": 1715367049, "model": model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": text}}}}
		if g.usage {
			answer["usage"] = usage
		}
		b, _ := json.Marshal(answer)
		answerJSON(w, http.StatusOK, b)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(c map[string]any) {
		c["id"], c["object"], c["created"], c["model"] = "chatcmpl-c", "chat.completion.chunk", 1715367049, model
		openaitest.WriteEvent(w, c)
		w.(http.Flusher).Flush()
	}
	chunk(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": text}, "finish_reason": nil}}})
	chunk(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}})
	if g.usage && root.Get("stream_options.include_usage").Bool() {
		chunk(map[string]any{"choices": []any{}, "usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// reported is what u told: the usage of the agent's requests, in order,
// and of the summary calls, summed.
func (u *chatCacheUpstream) reported() (turns []rewrite.Usage, summary state.Usage) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, g := range u.got {
		one := rewrite.Usage{Input: g.prompt, Cached: g.cached, Output: g.output}
		switch {
		case g.summary && g.usage:
			summary = summary.Plus(counted(one))
		case g.summary:
			summary.Unreported++
		case !g.usage:
			turns = append(turns, rewrite.Usage{})
		default:
			turns = append(turns, one)
		}
	}
	return turns, summary
}

// counted is one reported call as a record sums it.
func counted(u rewrite.Usage) state.Usage {
	return state.Usage{Calls: 1, Input: int64(u.Input), Cached: int64(u.Cached), CacheWrite: int64(u.CacheWrite), Output: int64(u.Output)}
}

// billed is a conversation driven through ctxpress in one format: its
// record's key, a turn (compact forces a compaction), and what the
// upstream reported.
type billed struct {
	key      state.Key
	turn     func(stream, compact bool)
	reported func() (turns []rewrite.Usage, summary state.Usage)
}

// billedFormats start an upstream of each format, caching as its provider
// does and reporting it in its own fields, and a conversation through p.
var billedFormats = []struct {
	name  string
	start func(t *testing.T) (upstream string, run func(p *testProxy) billed)
}{
	{"chat", func(t *testing.T) (string, func(*testProxy) billed) {
		up := newChatCacheUpstream(t)
		return up.BaseURL(), func(p *testProxy) billed {
			a := newAgent(t, p.BaseURL(), "bill-chat")
			return billed{key: state.NewKey([]byte("Bearer sk-agent"), a.convID), reported: up.reported,
				turn: func(stream, compact bool) {
					var extra []option.RequestOption
					if compact {
						extra = append(extra, option.WithHeader(HeaderCompact, "force"))
					}
					a.turn(stream, extra...)
				}}
		}
	}},
	{"responses", func(t *testing.T) (string, func(*testProxy) billed) {
		up := newResponsesUpstream(t)
		up.toolTurns = 1 << 30
		up.parallel = 1
		return up.BaseURL(), func(p *testProxy) billed {
			a := newResponsesAgent(t, p.BaseURL(), "bill-responses")
			reported := func() (turns []rewrite.Usage, summary state.Usage) {
				got, sums := up.turns()
				for _, g := range got {
					turns = append(turns, rewrite.Usage{Input: g.input, Cached: g.cached, Output: 9})
				}
				for _, g := range sums {
					summary = summary.Plus(counted(rewrite.Usage{Input: g.input, Cached: g.cached, Output: 9}))
				}
				return turns, summary
			}
			return billed{key: state.NewKey([]byte("Bearer sk-agent"), a.key), reported: reported,
				turn: func(stream, compact bool) {
					var extra []option.RequestOption
					if compact {
						extra = append(extra, option.WithHeader(HeaderCompact, "force"))
					}
					a.turn(stream, extra...)
				}}
		}
	}},
	{"messages", func(t *testing.T) (string, func(*testProxy) billed) {
		up := newMessagesUpstream(t)
		return up.BaseURL(), func(p *testProxy) billed {
			a := newMessagesAgent(t, p.URL, "bill-messages")
			usage := func(g messagesTurn) rewrite.Usage {
				return rewrite.Usage{Input: g.prompt(), Cached: g.cacheRead, CacheWrite: g.cacheWrite, Output: g.output}
			}
			reported := func() (turns []rewrite.Usage, summary state.Usage) {
				got, sums := up.turns()
				for _, g := range got {
					turns = append(turns, usage(g))
				}
				for _, g := range sums {
					summary = summary.Plus(counted(usage(g)))
				}
				return turns, summary
			}
			return billed{key: state.NewKey([]byte("x-api-key\x00"+testAnthropicKey), a.session), reported: reported,
				turn: func(stream, compact bool) {
					var extra [][2]string
					if compact {
						extra = append(extra, [2]string{HeaderCompact, "force"})
					}
					a.turn(stream, extra...)
				}}
		}
	}},
}

// hostedConfig is compaction on (with a trigger no test reaches: the
// summary calls are forced) in front of upstream, priced as the hosted
// provider it stands for, not as the local server its address says.
func hostedConfig(upstream string) Config {
	cfg := compactionConfig(upstream)
	cfg.Compaction.Trigger.ThresholdTokens = 1 << 20
	hosted := false
	cfg.LocalUpstream = &hosted
	return cfg
}

// billedTurns is how many turns each format's conversation has; the
// summary call is forced on the one before the last.
const billedTurns = 6

// Through an upstream that caches and says so in its own format's fields
// (chat's prompt_tokens_details.cached_tokens, Responses'
// input_tokens_details.cached_tokens, Messages' cache_read_input_tokens
// and cache_creation_input_tokens), streamed and not, the admin API shows
// the conversation's usage summed since it began, its cached share, its
// bill at its model's prices and the direct estimate; a summary call's
// usage is counted as the summary's, never as the agent's; the totals and
// the metrics say the same.
func TestAdminAPIBillsTheCachedUsageOfEachFormat(t *testing.T) {
	for _, f := range billedFormats {
		for _, stream := range []bool{false, true} {
			t.Run(f.name+"/stream="+strconv.FormatBool(stream), func(t *testing.T) {
				upstream, run := f.start(t)
				deps, st := responsesDeps(t)
				p := startProxyWith(t, hostedConfig(upstream), deps)
				c := run(p)
				var rec state.Record
				for i := range billedTurns {
					c.turn(stream, i == billedTurns-2)
					// Each turn recorded before the next is sent: a
					// request sent the moment a stream ends may not find
					// the previous turn's line yet, and start its own.
					rec = recordOf(t, p, st, c.key, i+1)
				}
				turns, summary := c.reported()
				if len(turns) != billedTurns || summary.Calls != 1 {
					t.Fatalf("the upstream answered %d turns and %d summary calls", len(turns), summary.Calls)
				}
				var agent state.Usage
				for _, u := range turns {
					agent = agent.Plus(counted(u))
				}
				if agent.Cached == 0 {
					t.Fatal("the upstream reported no cache: the test proves nothing")
				}
				var d admin.ConversationDetail
				getDetail(t, p, c.key, &d)
				if d.Usage != admin.UsageInfoOf(agent) || d.SummaryUsage != admin.UsageInfoOf(summary) {
					t.Fatalf("usage %+v, summary usage %+v; the upstream reported %+v and %+v", d.Usage, d.SummaryUsage, agent, summary)
				}
				prices := rewrite.CostConfig{}.PricesFor(rec.Model) // the list price of gpt-4o, gpt-5, claude-opus
				wantAgent, wantSummary := prices.Cost(admin.Billable(agent)), prices.Cost(admin.Billable(summary))
				wantDirect := directCost(prices, rec.Turns, turns)
				for _, c := range []struct {
					what      string
					got, want float64
				}{
					{"cached share", d.CachedShare, float64(agent.Cached) / float64(agent.Input)},
					{"cost", d.Cost, wantAgent + wantSummary},
					{"summary cost", d.SummaryCost, wantSummary},
					{"direct estimate", d.CostDirectEstimate, wantDirect},
					{"money saved", d.MoneySaved, wantDirect - wantAgent - wantSummary},
				} {
					if !near(c.got, c.want) {
						t.Errorf("%s %v, want %v", c.what, c.got, c.want)
					}
				}
				if d.CostUnit != admin.CostUSD || d.Usage.Unreported != 0 {
					t.Errorf("unit %q, %d turns unreported", d.CostUnit, d.Usage.Unreported)
				}

				var stats admin.Stats
				getJSON(t, p.URL+"/ctxpress/stats", &stats)
				if stats.Usage != d.Usage || stats.SummaryUsage != d.SummaryUsage || stats.Costs != d.Costs || stats.CachedShare != d.CachedShare {
					t.Errorf("stats %+v\nwant the one conversation's %+v", stats, d.ConversationInfo)
				}
				m := scrape(t, p.URL)
				for _, c := range []struct {
					what      string
					got, want float64
				}{
					{"agent input tokens", value(m, "ctxpress_upstream_tokens_total", "kind", "input"), float64(agent.Input)},
					{"agent cache reads", value(m, "ctxpress_upstream_tokens_total", "kind", "cache_read"), float64(agent.Cached)},
					{"summary input tokens", value(m, "ctxpress_summary_tokens_total", "kind", "input"), float64(summary.Input)},
					{"summary cache reads", value(m, "ctxpress_summary_tokens_total", "kind", "cache_read"), float64(summary.Cached)},
					{"summary output tokens", value(m, "ctxpress_summary_tokens_total", "kind", "output"), float64(summary.Output)},
					{"agent cost", value(m, "ctxpress_cost_dollars_total", "kind", "agent"), wantAgent},
					{"summary cost", value(m, "ctxpress_cost_dollars_total", "kind", "summary"), wantSummary},
				} {
					if !near(c.got, c.want) {
						t.Errorf("metric %s %v, want %v", c.what, c.got, c.want)
					}
				}
				t.Logf("%s: cached %.0f%%, cost $%.6f (summary $%.6f), direct $%.6f", rec.Model, 100*d.CachedShare, d.Cost, d.SummaryCost, d.CostDirectEstimate)
			})
		}
	}
}

// directCost is the direct estimate of turns recorded on one line, with
// the output each got (reported, in order), recomputed the way the
// record sums it.
// cacheSeen is what a conversation's usage so far shows of the
// upstream's prompt cache, as the record reckons it.
func cacheSeen(u state.Usage) rewrite.CacheSeen {
	return rewrite.CacheSeen{Reads: u.Cached > 0 || u.CacheWrite > 0, Writes: u.CacheWrite > 0}
}

func directCost(prices rewrite.Prices, recorded []state.Turn, reported []rewrite.Usage) float64 {
	var seen, direct state.Usage
	prev := 0
	for i, t := range recorded {
		seen = seen.Plus(counted(reported[i]))
		d := rewrite.DirectUsage(rewrite.DirectTurn{Forwarded: reported[i], Sent: t.TokensBefore, After: t.TokensAfter,
			PrevSent: prev}, cacheSeen(seen))
		direct = direct.Plus(counted(d))
		prev = d.Input
	}
	return prices.Cost(admin.Billable(direct))
}

// recordOf waits for n turns of key to be recorded and returns its record.
func recordOf(t *testing.T, p *testProxy, st state.Store, key state.Key, n int) state.Record {
	t.Helper()
	var rec state.Record
	waitFor(t, func() bool {
		var ok bool
		rec, ok, _ = st.Get(key)
		return ok && len(rec.Turns) >= n && p.recorderDrained()
	}, fmt.Sprintf("%d turns of %s recorded", n, key.ID))
	return rec
}

// getDetail reads GET /ctxpress/conversations/{id} of key.
func getDetail(t *testing.T, p *testProxy, key state.Key, d *admin.ConversationDetail) {
	t.Helper()
	var got struct{ Data []admin.ConversationDetail }
	getJSON(t, p.URL+"/ctxpress/conversations/"+key.ID+"?namespace="+key.Namespace, &got)
	if len(got.Data) != 1 {
		t.Fatalf("%d conversations %s", len(got.Data), key.ID)
	}
	*d = got.Data[0]
}

// A turn the upstream answered without usage is said to be unreported,
// and priced at nothing rather than at a guess: the cost and the direct
// estimate are of the turns that reported theirs.
func TestTurnWithoutUsageIsCountedAsUnreportedNotGuessed(t *testing.T) {
	up := newChatCacheUpstream(t)
	up.noUsage = map[int]bool{2: true}
	deps, st := responsesDeps(t)
	p := startProxyWith(t, hostedConfig(up.BaseURL()), deps)
	a := newAgent(t, p.BaseURL(), "no-usage")
	key := state.NewKey([]byte("Bearer sk-agent"), a.convID)
	for i := range 3 {
		a.turn(false)
		recordOf(t, p, st, key, i+1)
	}
	rec := recordOf(t, p, st, key, 3)
	turns, _ := up.reported()
	var d admin.ConversationDetail
	getDetail(t, p, key, &d)
	want := counted(turns[0]).Plus(counted(turns[2]))
	want.Unreported = 1
	if d.Usage != admin.UsageInfoOf(want) {
		t.Fatalf("usage %+v, want %+v", d.Usage, admin.UsageInfoOf(want))
	}
	// The unreported turn's own estimate is what the next one's cache
	// is reckoned from.
	r := rec.Turns
	first := rewrite.DirectUsage(rewrite.DirectTurn{Forwarded: turns[0], Sent: r[0].TokensBefore, After: r[0].TokensAfter}, cacheSeen(counted(turns[0])))
	third := rewrite.DirectUsage(rewrite.DirectTurn{Forwarded: turns[2], Sent: r[2].TokensBefore, After: r[2].TokensAfter,
		PrevSent: r[1].TokensBefore}, cacheSeen(want))
	gpt4o := rewrite.CostConfig{}.PricesFor("gpt-4o")
	if !near(d.Cost, gpt4o.Cost(admin.Billable(want))) || !near(d.CostDirectEstimate, gpt4o.Cost(first)+gpt4o.Cost(third)) {
		t.Errorf("cost %v, direct %v; want %v, %v", d.Cost, d.CostDirectEstimate, gpt4o.Cost(admin.Billable(want)), gpt4o.Cost(first)+gpt4o.Cost(third))
	}
}

// A summary call that spent tokens and wrote no summary (only reasoning
// came back) is billed all the same, as a summary call: the compaction
// failed, its tokens were paid.
func TestFailedSummaryCallIsStillBilledAsSummary(t *testing.T) {
	up := openaitest.New(t)
	up.Handle(openaitest.SummaryPath, func(w http.ResponseWriter, r *http.Request) {
		answerJSON(w, http.StatusOK, []byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"","reasoning_content":"Let me think."},"finish_reason":"length"}],`+
			`"usage":{"prompt_tokens":3000,"completion_tokens":4000,"prompt_tokens_details":{"cached_tokens":1000}}}`))
	})
	deps, st := responsesDeps(t)
	p := startProxyWith(t, hostedConfig(up.BaseURL()), deps)
	a := newAgent(t, p.BaseURL(), "failed-summary")
	key := state.NewKey([]byte("Bearer sk-agent"), a.convID)
	for range 4 {
		a.turn(false)
	}
	if h := a.turn(false, option.WithHeader(HeaderCompact, "force")); h.Get(HeaderCompacted) != "false" {
		t.Fatalf("X-Ctxpress-Compacted %q: the summary should have failed", h.Get(HeaderCompacted))
	}
	if _, sums := up.ChatRequests(); len(sums) != 1 {
		t.Fatalf("%d summary calls", len(sums))
	}
	recordOf(t, p, st, key, 5)
	var d admin.ConversationDetail
	getDetail(t, p, key, &d)
	want := admin.UsageInfo{Calls: 1, InputTokens: 3000, CachedTokens: 1000, OutputTokens: 4000}
	gpt4o := rewrite.CostConfig{}.PricesFor("gpt-4o")
	if d.SummaryUsage != want || !near(d.SummaryCost, gpt4o.Cost(rewrite.Usage{Input: 3000, Cached: 1000, Output: 4000})) || d.Usage.Calls != 5 {
		t.Fatalf("summary usage %+v cost %v, agent calls %d", d.SummaryUsage, d.SummaryCost, d.Usage.Calls)
	}
	if got := value(scrape(t, p.URL), "ctxpress_summary_tokens_total", "kind", "output"); got != 4000 {
		t.Errorf("summary output tokens metric %v", got)
	}
}

// Where a conversation's prices come from: each rule a row.
func TestPricingOf(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name                       string
		cfg                        Config
		agentLocal, summaryLocal   bool
		unit, summaryModelForGPT4o string
	}{
		{"a hosted upstream bills in dollars", Config{Upstream: "https://api.openai.com/v1"}, false, false, admin.CostUSD, "gpt-4o"},
		{"an upstream on this machine is priced by prefill", Config{Upstream: "http://127.0.0.1:8080/v1"}, true, true, admin.CostPrefill, "gpt-4o"},
		{"local_upstream: false prices it as hosted", Config{Upstream: "http://localhost:1234/v1", LocalUpstream: &no}, false, false, admin.CostUSD, "gpt-4o"},
		{"local_upstream: true prices a remote one by prefill", Config{Upstream: "http://gpu-box:8080/v1", LocalUpstream: &yes}, true, true, admin.CostPrefill, "gpt-4o"},
		{"a summariser elsewhere is priced as its own server, at its own model",
			Config{Upstream: "http://127.0.0.1:8080/v1", Compaction: compaction.Config{Summarizer: compaction.SummarizerConfig{BaseURL: "https://api.openai.com/v1", Model: "gpt-5-mini"}}},
			true, false, admin.CostPrefill, "gpt-5-mini"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := PricingOf(tc.cfg)
			if p.Agent.Local != tc.agentLocal || p.Summary.Local != tc.summaryLocal || p.Unit() != tc.unit {
				t.Errorf("agent local %v, summary local %v, unit %s", p.Agent.Local, p.Summary.Local, p.Unit())
			}
			want := p.Summary.PricesFor(tc.summaryModelForGPT4o)
			if got := p.SummaryPrices("gpt-4o"); got != want {
				t.Errorf("a gpt-4o conversation's summary calls are priced %+v, want %+v", got, want)
			}
		})
	}
}
