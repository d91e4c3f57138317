package proxy

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/admin"

	"github.com/openai/openai-go/v3"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// workerLog is a tool output squash recognises as a log.
func workerLog() string {
	var b strings.Builder
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&b, "2024-05-01T10:%02d:%02d INFO worker-%d processed batch %d in %dms\n", i/60, i%60, i%4, i, 10+i%7)
	}
	b.WriteString("2024-05-01T10:59:59 ERROR worker-2 failed: connection reset by peer\n")
	return b.String()
}

// After a scripted conversation the counters equal what happened: the
// requests sent, the compactions the answers reported, and the tokens
// saved that the answers' headers add up to.
func TestMetricsAfterScriptedConversation(t *testing.T) {
	up := openaitest.New(t)
	st := openStoreAt(t, filepath.Join(t.TempDir(), "ctxpress.db"))
	t.Cleanup(func() { st.Close() })
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Precompact = false // every compaction happens on a turn, so the headers count them
	p := startProxyWith(t, cfg, Deps{Pipeline: pipelineWithShapes(), Store: st})
	a := newAgent(t, p.BaseURL(), "metrics")
	a.history = append(a.history,
		openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
			ID: "log0", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "bash", Arguments: `{"command":"./worker --once"}`}}}}}},
		openai.ToolMessage(workerLog(), "log0"))

	const turns = 30
	var before, after, saved float64
	compacted := 0
	for i := 0; i < turns; i++ {
		h := a.turn(i%2 == 1)
		b, _ := strconv.Atoi(h.Get(HeaderTokensBefore))
		f, _ := strconv.Atoi(h.Get(HeaderTokensAfter))
		before, after, saved = before+float64(b), after+float64(f), saved+float64(max(0, b-f))
		if h.Get(HeaderCompacted) == "true" {
			compacted++
		}
	}
	if compacted == 0 {
		t.Fatal("the script did not compact; the test proves nothing")
	}
	if resp, err := http.Get(p.BaseURL() + "/models"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	key := state.NewKey([]byte("Bearer sk-agent"), a.convID)
	// The metric counts a turn after its write commits: wait for both.
	waitFor(t, func() bool {
		rec, _, _ := st.Get(key)
		return rec.Requests == turns && value(scrape(t, p.URL), "ctxpress_recorded_turns_total") == turns
	}, "the turns recorded")

	m := scrape(t, p.URL)
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"chat requests", value(m, "ctxpress_requests_total", "path", "/v1/chat/completions", "status", "200"), turns},
		{"models requests", value(m, "ctxpress_requests_total", "path", "/v1/models", "status", "200"), 1},
		{"upstream latency samples", value(m, "ctxpress_upstream_latency_seconds", "path", "/v1/chat/completions"), turns},
		{"tokens before", value(m, "ctxpress_tokens_before_total"), before},
		{"tokens after", value(m, "ctxpress_tokens_after_total"), after},
		{"tokens saved", value(m, "ctxpress_tokens_saved_total"), saved},
		{"tokens saved samples", value(m, "ctxpress_request_tokens_saved"), turns},
		{"compactions", value(m, "ctxpress_compactions_total", "trigger", "auto", "result", "ok"), float64(compacted)},
		{"summariser calls", value(m, "ctxpress_summarizer_duration_seconds", "result", "ok"), float64(compacted)},
		{"recorded turns", value(m, "ctxpress_recorded_turns_total"), turns},
		{"active streams", value(m, "ctxpress_active_streams"), 0},
		{"compactions in flight", value(m, "ctxpress_compactions_in_flight"), 0},
		{"breaker trips", value(m, "ctxpress_breaker_trips_total"), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: metric %v, want %v", c.what, c.got, c.want)
		}
	}
	// The big log is squashed on every turn until a summary covers it.
	if n := value(m, "ctxpress_squashed_outputs_total", "shape", "log"); n < 1 || n > turns {
		t.Errorf("log outputs squashed: %v", n)
	}
	if n := value(m, "ctxpress_squash_saved_tokens_total", "shape", "log"); n <= 0 {
		t.Errorf("log squash saved %v tokens", n)
	}
	if n := value(m, "ctxpress_db_size_bytes"); n <= 0 {
		t.Errorf("db size %v", n)
	}
	// The db file's map: at least the file, and of it at most the map in RSS.
	if mapped, resident, size := value(m, "ctxpress_db_mapped_bytes"), value(m, "ctxpress_db_resident_bytes"), value(m, "ctxpress_db_size_bytes"); runtime.GOOS == "linux" &&
		(mapped < size || resident <= 0 || resident > mapped) {
		t.Errorf("db map %v bytes, %v resident, of a %v-byte file", mapped, resident, size)
	}
	if used, limit := value(m, "ctxpress_rewrite_cache_bytes"), value(m, "ctxpress_rewrite_cache_limit_bytes"); used <= 0 || limit != float64(rewrite.DefaultCacheBytes) || used > limit {
		t.Errorf("rewrite cache %v of %v bytes", used, limit)
	}
	if value(m, "go_goroutines") == 0 {
		t.Error("no Go runtime metrics")
	}

	// The dashboard's totals come from the records and agree.
	var stats admin.Stats
	getJSON(t, p.URL+"/ctxpress/stats", &stats)
	if stats.Requests != turns || float64(stats.TokensSaved) != saved || stats.Compactions != int64(compacted) {
		t.Errorf("stats %+v; want %d requests, %v saved, %d compactions", stats, turns, saved, compacted)
	}
	// Money is the bill at per-model prices, net of summary calls: the
	// metric counts what the records do.
	if got, want := stats.Cost, value(m, "ctxpress_cost_dollars_total", "kind", "agent")+value(m, "ctxpress_cost_dollars_total", "kind", "summary"); !near(got, want) || got <= 0 {
		t.Errorf("cost %v, the metric %v", got, want)
	}
	if !near(stats.MoneySaved, stats.CostDirectEstimate-stats.Cost) {
		t.Errorf("money saved %v, want direct %v - cost %v", stats.MoneySaved, stats.CostDirectEstimate, stats.Cost)
	}
}

// The breaker opening is counted once.
func TestMetricsBreakerTrip(t *testing.T) {
	up := openaitest.New(t)
	up.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if openaitest.IsSummaryRequest(body) {
			fmt.Fprint(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"## Active Task\nx"},"finish_reason":"stop"}]}`)
			return
		}
		fmt.Fprintf(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":1}}`, 50*testTrigger)
	})
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Precompact = false
	p, st := startWithStore(t, cfg)
	a := newAgent(t, p.BaseURL(), "breaker-metrics")
	key := state.NewKey([]byte("Bearer sk-agent"), a.convID)
	for i := 0; i < 12; i++ {
		a.turn(false)
		waitFor(t, func() bool { rec, _, _ := st.Get(key); return rec.Requests == int64(a.turns) }, "the turn recorded")
	}
	// The metrics count a turn after its write commits: wait for them too.
	waitFor(t, func() bool { return value(scrape(t, p.URL), "ctxpress_recorded_turns_total") == 12 }, "the turns counted")
	if rec, _, _ := st.Get(key); !rec.CurrentLine().Breaker.Tripped {
		t.Fatal("the breaker did not open")
	}
	if n := value(scrape(t, p.URL), "ctxpress_breaker_trips_total"); n != 1 {
		t.Fatalf("breaker trips %v, want 1", n)
	}
}

// /metrics follows the admin rule: the token when one is set, unless
// metrics are public.
func TestMetricsAuth(t *testing.T) {
	up := openaitest.New(t)
	p := startProxy(t, Config{Upstream: up.BaseURL(), AdminToken: "s3cret"})
	resp, err := http.Get(p.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", resp.StatusCode)
	}
	scrape(t, p.URL, "Authorization", "Bearer s3cret")
	if len(up.Requests()) != 0 {
		t.Fatal("/metrics reached the upstream")
	}

	pub := startProxy(t, Config{Upstream: up.BaseURL(), AdminToken: "s3cret", MetricsPublic: true})
	scrape(t, pub.URL)
}

// A request refused for a missing client key is a request: it is counted
// in ctxpress_requests_total with its 401, as every other answer is.
func TestRefusedClientKeyIsCountedInMetrics(t *testing.T) {
	up := openaitest.New(t)
	p := startProxy(t, Config{Upstream: up.BaseURL(), AuthKeys: []string{"cx-alpha"}})
	resp, err := http.Post(p.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"gpt-4o","messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", resp.StatusCode)
	}
	if n := value(scrape(t, p.URL), "ctxpress_requests_total", "path", "/v1/chat/completions", "status", "401"); n != 1 {
		t.Fatalf("401 requests counted %v, want 1", n)
	}
	if len(up.Requests()) != 0 {
		t.Fatal("a request without a client key reached the upstream")
	}
}
