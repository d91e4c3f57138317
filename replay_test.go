package main

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/internal/corpustest"
	"github.com/ctxpress/ctxpress/replay"
	"github.com/ctxpress/ctxpress/rewrite"
)

// runReplay runs `ctxpress replay -json args...` and returns its report,
// its raw output and its exit code.
func runReplay(t *testing.T, args ...string) (replay.Report, []byte, int) {
	t.Helper()
	t.Setenv("CTXPRESS_CONFIG", "")
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"replay", "-json"}, args...), nil, &stdout, &stderr)
	var r replay.Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("replay printed no report (exit %d): %v\nstdout: %s\nstderr: %s", code, err, stdout.Bytes(), stderr.Bytes())
	}
	return r, stdout.Bytes(), code
}

func session(t *testing.T, r replay.Report, name string) replay.SessionResult {
	t.Helper()
	for _, s := range r.Sessions {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no session %s in the report", name)
	return replay.SessionResult{}
}

// Three corpus traces, one of which compacts at a low threshold (a 52-turn
// run: the cost model puts off compactions of short ones, which do not pay
// for the cache they break): what a user reads off the report must hold.
func TestReplayCorpusTracesSaveTokensAndPriceSummaries(t *testing.T) {
	dir := filepath.Join(corpustest.Dir(t), "traces")
	names := []string{"ohsdk-claude-sonnet-4-fncall.json", "sweagent-ctf-pwn-warmup.json", "mini-gemini3pro-django__django-15629.json"}
	args := []string{"-threshold-tokens", "8000"}
	for _, n := range names {
		args = append(args, filepath.Join(dir, n))
	}
	r, out, code := runReplay(t, args...)
	if code != 0 || r.Failed() {
		t.Fatalf("exit %d, report:\n%s", code, out)
	}
	if !r.Simulated || r.Prices != rewrite.DefaultPrices {
		t.Errorf("simulated %v, prices %+v: want the simulation at the default prices", r.Simulated, r.Prices)
	}
	for _, n := range names {
		s := session(t, r, n)
		if s.Direct.Requests != s.Turns {
			t.Errorf("%s: %d direct requests for %d turns", n, s.Direct.Requests, s.Turns)
		}
		// The simulated cache works: a history replayed unchanged is
		// mostly served from it.
		if share := s.Direct.CachedShare(); share < 0.8 {
			t.Errorf("%s: direct cached share %.1f%%, want most of it", n, 100*share)
		}
		if s.Ctxpress.Input >= s.Direct.Input {
			t.Errorf("%s: ctxpress sent %d agent tokens, direct %d: want fewer", n, s.Ctxpress.Input, s.Direct.Input)
		}
	}
	compacting := session(t, r, "mini-gemini3pro-django__django-15629.json")
	c := compacting.Ctxpress
	if c.Summaries == 0 || c.SummaryInput == 0 {
		t.Fatalf("django-15629 at 8000 tokens: %d summary calls, %d input tokens: want its compaction counted", c.Summaries, c.SummaryInput)
	}
	if c.SummaryOutput != c.Summaries*replay.DefaultSummaryTokens {
		t.Errorf("summary output %d tokens for %d calls, want %d each", c.SummaryOutput, c.Summaries, replay.DefaultSummaryTokens)
	}
	p := rewrite.DefaultPrices
	want := p.Cost(rewrite.Usage{Input: c.Input, Cached: c.Cached}) +
		p.Cost(rewrite.Usage{Input: c.SummaryInput, Cached: c.SummaryCached, Output: c.SummaryOutput})
	if math.Abs(compacting.CostCtxpress-want) > 1e-12 {
		t.Errorf("cost through ctxpress $%v, want $%v (agent prompts + summary calls with their output)", compacting.CostCtxpress, want)
	}
	if summary := p.Cost(rewrite.Usage{Output: c.SummaryOutput}); compacting.CostCtxpress-p.Cost(rewrite.Usage{Input: c.Input, Cached: c.Cached}) < summary {
		t.Errorf("the summary calls' output ($%v) is not in the cost", summary)
	}
	if r.Totals.Sessions != 3 || r.Totals.Ctxpress.AllInput() >= r.Totals.Direct.AllInput() {
		t.Errorf("totals: %d sessions, tokens %d through ctxpress vs %d direct", r.Totals.Sessions,
			r.Totals.Ctxpress.AllInput(), r.Totals.Direct.AllInput())
	}

	_, again, _ := runReplay(t, args...)
	if !bytes.Equal(out, again) {
		t.Errorf("two replays of the same sessions differ:\n%s\n---\n%s", out, again)
	}
}

// writeJSONL writes a .jsonl session: the requests a client sent in the
// run whose last request is the capture (in format f), one a line.
func writeJSONL(t *testing.T, dir, name, capture string, f replay.Format) int {
	t.Helper()
	body, err := os.ReadFile(capture)
	if err != nil {
		t.Fatal(err)
	}
	turns, err := replay.Turns(f, body)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, turn := range turns {
		if err := json.Compact(&b, turn); err != nil {
			t.Fatal(err)
		}
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return len(turns)
}

// A JSONL session of Responses (codex) and one of Messages (Claude Code),
// both streamed as their clients stream them, replay from a directory,
// each in its format.
func TestReplayJSONLSessionsOfResponsesAndMessages(t *testing.T) {
	dir := t.TempDir()
	codex := writeJSONL(t, dir, "codex.jsonl", "internal/responsestest/testdata/codex171-parallel-calls.json", replay.Responses)
	claude := writeJSONL(t, dir, "claude.jsonl", "internal/messagestest/testdata/claude-code-2.1.332-turn6.json", replay.Messages)
	r, out, code := runReplay(t, dir)
	if code != 0 || r.Failed() {
		t.Fatalf("exit %d, report:\n%s", code, out)
	}
	for _, tc := range []struct {
		name   string
		format replay.Format
		turns  int
	}{{"codex.jsonl", replay.Responses, codex}, {"claude.jsonl", replay.Messages, claude}} {
		s := session(t, r, tc.name)
		if s.Format != tc.format || s.Turns != tc.turns || s.Direct.Requests != tc.turns || s.Ctxpress.Requests != tc.turns {
			t.Errorf("%s: format %s, %d turns, %d/%d requests; want %s and %d", tc.name, s.Format, s.Turns,
				s.Direct.Requests, s.Ctxpress.Requests, tc.format, tc.turns)
		}
		if s.Direct.Input == 0 || s.Direct.CachedShare() < 0.5 {
			t.Errorf("%s: direct %d tokens, %.1f%% cached: want the stream's usage read", tc.name, s.Direct.Input, 100*s.Direct.CachedShare())
		}
	}
}

// A body the provider refuses fails its session, visibly and with the
// provider's reason, and is never counted as a saving; the other sessions
// of the run are still replayed, and the exit status says one failed.
func TestReplayRefusedBodyFailsItsSession(t *testing.T) {
	dir := t.TempDir()
	ok := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}` + "\n" +
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"},{"role":"assistant","content":"hi"},{"role":"user","content":"again"}]}` + "\n"
	// The tool result answers a call nobody made: OpenAI answers 400.
	bad := `{"model":"m","messages":[{"role":"user","content":"hello"}]}` + "\n" +
		`{"model":"m","messages":[{"role":"user","content":"hello"},{"role":"tool","tool_call_id":"call_9","content":"out"}]}` + "\n"
	files := map[string]string{"ok.jsonl": ok, "bad.jsonl": bad, "broken.jsonl": "{\"model\":\"m\",\n"}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, out, code := runReplay(t, dir)
	if code != 1 {
		t.Errorf("exit %d with a failed session, want 1", code)
	}
	s := session(t, r, "bad.jsonl")
	if !strings.Contains(s.Err, "status 400") || !strings.Contains(s.Err, "call_9") {
		t.Errorf("the failed session says %q: want the provider's 400 and its reason", s.Err)
	}
	if s.CostDirect != 0 || s.CostCtxpress != 0 {
		t.Errorf("a failed session is priced: $%v direct, $%v through ctxpress", s.CostDirect, s.CostCtxpress)
	}
	good := session(t, r, "ok.jsonl")
	if good.Err != "" || good.Direct.Requests != 2 || good.Direct.Input == 0 {
		t.Errorf("the valid session: %+v", good)
	}
	if broken := session(t, r, "broken.jsonl"); !strings.Contains(broken.Err, "reading: ") {
		t.Errorf("a file that is not JSONL: error %q", broken.Err)
	}
	if r.Totals.Sessions != 1 || r.Totals.Failed != 2 || r.Totals.Direct.Input != good.Direct.Input {
		t.Errorf("totals %+v: want the valid session only, and two failed", r.Totals)
	}

	var text bytes.Buffer
	t.Setenv("CTXPRESS_CONFIG", "")
	run([]string{"replay", dir}, nil, &text, &bytes.Buffer{})
	if !strings.Contains(text.String(), "FAILED bad.jsonl: direct: ") {
		t.Errorf("the table does not show the failed session:\n%s\n(json: %s)", text.String(), out)
	}
}

// With -upstream the replay measures a real server: both legs go to it,
// and its usage is read as it reports it. (A simulation serves as that
// server here; its cache is the server's, shared by the legs.) A loopback
// upstream is priced by prefill tokens unless -prices names a model.
func TestReplayAgainstAnUpstreamReadsItsUsage(t *testing.T) {
	srv := httptest.NewServer(replay.NewSim(replay.NewTokens(), 0))
	defer srv.Close()
	trace := filepath.Join(corpustest.Dir(t), "traces", "sweagent-ctf-pwn-warmup.json")
	simulated, _, _ := runReplay(t, trace)
	r, out, code := runReplay(t, "-upstream", srv.URL+"/v1", trace)
	if code != 0 || r.Failed() {
		t.Fatalf("exit %d, report:\n%s", code, out)
	}
	if r.Simulated || r.Upstream != srv.URL+"/v1" || r.Prices != rewrite.LocalPrices {
		t.Errorf("simulated %v, upstream %q, prices %+v: want the upstream's usage at local prices", r.Simulated, r.Upstream, r.Prices)
	}
	// The direct leg comes first and finds the server's cache empty: what
	// it reads is what the simulation reported.
	if got, want := r.Sessions[0].Direct, simulated.Sessions[0].Direct; got != want {
		t.Errorf("direct leg through -upstream %+v, want the server's usage %+v", got, want)
	}
	if c := r.Sessions[0].Ctxpress; c.Requests != r.Sessions[0].Turns || c.Input == 0 || c.Cached == 0 {
		t.Errorf("the ctxpress leg read %+v", c)
	}
	priced, _, _ := runReplay(t, "-upstream", srv.URL+"/v1", "-prices", "gpt-4o", trace)
	if want := (rewrite.CostConfig{}).PricesFor("gpt-4o"); priced.Prices != want {
		t.Errorf("-prices gpt-4o priced at %+v", priced.Prices)
	}
}

// A summary call the upstream refuses fails the session (ctxpress went on
// without its summary: what it saved is not what the user would see),
// unless the refusal is the upstream's window, which ctxpress answers by
// sending the call again with half the transcript: that one is counted,
// and the session stands.
func TestReplayRefusedSummaryCallFailsItsSessionUnlessOverTheWindow(t *testing.T) {
	sim := replay.NewSim(replay.NewTokens(), 0)
	for _, tc := range []struct {
		rule     string
		refusal  string
		wantFail bool
	}{
		{"a summary call refused as invalid: the session fails",
			`{"error":{"message":"Invalid value for 'temperature'","type":"invalid_request_error","param":null,"code":null}}`, true},
		{"a summary call over the window: counted, ctxpress retries",
			`{"error":{"code":400,"message":"request (2163 tokens) exceeds the available context size (2048 tokens), try increasing it","type":"exceed_context_size_error"}}`, false},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			var refused atomic.Bool
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if replay.IsSummaryCall(replay.Chat, body) && refused.CompareAndSwap(false, true) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					_, _ = io.WriteString(w, tc.refusal)
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				sim.ServeHTTP(w, r)
			}))
			defer srv.Close()
			trace := filepath.Join(corpustest.Dir(t), "traces", "sweagent-ctf-crypto-katy.json")
			r, out, code := runReplay(t, "-upstream", srv.URL+"/v1", "-prices", "gpt-5", "-threshold-tokens", "8000", trace)
			s := r.Sessions[0]
			if tc.wantFail {
				if code != 1 || !strings.Contains(s.Err, "summary call: status 400: Invalid value") {
					t.Errorf("exit %d, error %q: want the session failed on the summary call", code, s.Err)
				}
				return
			}
			if code != 0 || s.Err != "" || s.Ctxpress.SummaryRefused != 1 || s.Ctxpress.Summaries == 0 {
				t.Errorf("exit %d, %+v: want the refusal counted and the retried summary in\n%s", code, s, out)
			}
		})
	}
}

// Timing changes nothing ctxpress forwards: corpus traces whose summaries
// are prepared in the background at a 24,000-token trigger cost exactly
// the same replayed on the simulated clock, with every summary ready at
// once, and live (the real ctxpress server in front of the simulated
// provider behind its HTTP server, which takes each answer's time for real,
// and an agent that waits the tool time for real), summaries that span
// several turns included.
func TestReplayFiguresDoNotDependOnTiming(t *testing.T) {
	if testing.Short() {
		t.Skip("a live replay takes seconds")
	}
	t.Setenv("CTXPRESS_CONFIG", "")
	dir := filepath.Join(corpustest.Dir(t), "traces")
	var paths []string
	for _, n := range []string{"mini-gemini3pro-django__django-15629.json", "mini-gemini3pro-mwaskom__seaborn-3069.json",
		"mini-gemini3pro-matplotlib__matplotlib-20826.json", "mini-gemini3pro-pydata__xarray-4695.json"} {
		paths = append(paths, filepath.Join(dir, n))
	}
	found, err := replay.Load(paths, replay.LoadOptions{BodyModel: defaultReplayModel})
	if err != nil {
		t.Fatal(err)
	}
	sessions := found.Sessions
	o, err := replayOptions(replayFlags{model: defaultReplayModel, threshold: 24000, summaryTokens: 1000,
		toolTime: 100 * time.Millisecond, outputRate: 1000 / 0.6, parallel: len(paths)})
	if err != nil {
		t.Fatal(err)
	}
	simulated := replay.Run(sessions, o)
	timing := o.Timing
	o.Timing.OutputRate, o.Timing.Latency = 1e12, -1 // every summary ready by the next turn
	instant := replay.Run(sessions, o)
	o.Timing = timing
	o.Timing.Live = true
	start := time.Now()
	live := replay.Run(sessions, o)
	t.Logf("live replay: %v", time.Since(start))
	for _, r := range []replay.Report{simulated, instant, live} {
		if r.Failed() {
			t.Fatalf("a replay failed: %+v", r.Sessions)
		}
	}
	summaries := 0
	for i, s := range simulated.Sessions {
		for _, other := range []replay.SessionResult{instant.Sessions[i], live.Sessions[i]} {
			if other.CostCtxpress != s.CostCtxpress || other.Ctxpress != s.Ctxpress {
				t.Errorf("%s: simulated $%.6f %+v, another timing $%.6f %+v", s.Name, s.CostCtxpress, s.Ctxpress, other.CostCtxpress, other.Ctxpress)
			}
		}
		summaries += s.Ctxpress.Summaries
	}
	if summaries == 0 {
		t.Error("no session prepared a summary: the timing is not tested")
	}
}

// copyDir copies the files under src into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}

// `ctxpress replay` with no argument replays the sessions a user's agents
// keep (the real Claude Code and codex sessions of replay/testdata/home,
// as they would sit in a home directory), says where it found them, and
// reports per session and in total what ctxpress would have saved at each
// session's model's prices, saying which parts of the requests it had to
// approximate.
func TestReplayWithNoArgumentReplaysTheAgentsSessions(t *testing.T) {
	home := t.TempDir()
	copyDir(t, "replay/testdata/home", home)
	t.Setenv("HOME", home)
	t.Setenv("CODEX_HOME", "")
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	t.Setenv("CTXPRESS_CONFIG", "")
	var stdout, stderr bytes.Buffer
	code := run([]string{"replay", "-json"}, nil, &stdout, &stderr)
	var r replay.Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil || code != 0 {
		t.Fatalf("exit %d, %v\nstdout: %s\nstderr: %s", code, err, stdout.Bytes(), stderr.Bytes())
	}
	for _, dir := range []string{filepath.Join(home, ".claude", "projects"), filepath.Join(home, ".codex", "sessions")} {
		if !strings.Contains(stderr.String(), dir) {
			t.Errorf("stderr does not say it found %s:\n%s", dir, stderr.String())
		}
	}
	want := map[string]struct {
		turns int
		model string
	}{
		"cbb6cffc-97bd-402d-8115-d7a42cd07eb1.jsonl":                             {16, "claude-opus-5-5"},
		"fbe4a9f3-0bb3-4f6e-972b-bc98f6817ff8.jsonl":                             {8, "claude-opus-5-5"},
		"agent-ab59b5f993f9b0617.jsonl":                                          {1, "claude-opus-5-5"},
		"agent-ac5f5e8a7447e8603.jsonl":                                          {2, "claude-opus-5-5"},
		"rollout-2026-12-05T04-18-33-01a2446c-d5c5-77a3-a6f7-588b7b7a2746.jsonl": {16, "gpt-5.5"},
		"rollout-2026-12-05T04-18-40-01a2446c-f1fe-7593-92ea-3b584f2173ca.jsonl": {13, "gpt-5.5"},
	}
	if r.Totals.Sessions != len(want) || r.Totals.Failed != 0 || len(r.Skipped) != 2 {
		t.Fatalf("%d sessions, %d failed, %d files skipped; want %d, none, the two sub-agent meta files", r.Totals.Sessions,
			r.Totals.Failed, len(r.Skipped), len(want))
	}
	costs := rewrite.CostConfig{}
	for _, s := range r.Sessions {
		w, ok := want[filepath.Base(s.Name)]
		if !ok {
			t.Errorf("an unexpected session %s", s.Name)
			continue
		}
		if s.Turns != w.turns || s.Direct.Requests != w.turns || s.Ctxpress.Requests != w.turns || s.Model != w.model {
			t.Errorf("%s: %d turns, %d/%d requests, model %s; want %d, %s", s.Name, s.Turns, s.Direct.Requests, s.Ctxpress.Requests,
				s.Model, w.turns, w.model)
		}
		if s.Prices != costs.PricesFor(w.model) {
			t.Errorf("%s: priced at %+v, want %s's list prices", s.Name, s.Prices, w.model)
		}
		if s.CostCtxpress > s.CostDirect {
			t.Errorf("%s: costlier through ctxpress: $%.4f against $%.4f", s.Name, s.CostCtxpress, s.CostDirect)
		}
		if s.Agent == "codex" && !strings.Contains(s.Approximated, "tools") {
			t.Errorf("%s: approximated %q: a rollout does not record the tools", s.Name, s.Approximated)
		}
		if s.Agent == "claude-code" && (s.Approximated != "" || s.Direct.CacheWrite == 0) {
			t.Errorf("%s: approximated %q, %d tokens written to the cache: want it rebuilt as sent, billed for the cache writes its markers ask for",
				s.Name, s.Approximated, s.Direct.CacheWrite)
		}
	}
	if t0 := r.Totals; t0.CostCtxpress >= t0.CostDirect || t0.Ctxpress.AllInput() >= t0.Direct.AllInput() {
		t.Errorf("totals: $%.4f through ctxpress against $%.4f direct, %d tokens against %d: want a saving reported",
			t0.CostCtxpress, t0.CostDirect, t0.Ctxpress.AllInput(), t0.Direct.AllInput())
	}

	// The table says the same to a reader.
	stdout.Reset()
	if code := run([]string{"replay"}, nil, &stdout, &bytes.Buffer{}); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stdout.String())
	}
	for _, line := range []string{"claude-opus-5-5: input $4", "gpt-5.5: input $5", "codex sessions (1): approximated: tools",
		"claude-code sessions (4): rebuilt from the transcript's own records", "SKIPPED 2 files (not a session"} {
		if !strings.Contains(stdout.String(), line) {
			t.Errorf("the report does not say %q:\n%s", line, stdout.String())
		}
	}
}

// With no argument and no sessions where the agents keep them, replay
// says where it looked.
func TestReplayWithNoArgumentAndNoSessionsSaysWhereItLooked(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CODEX_HOME", filepath.Join(home, "codex"))
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	t.Setenv("CTXPRESS_CONFIG", "")
	var stderr bytes.Buffer
	code := run([]string{"replay"}, nil, &bytes.Buffer{}, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), filepath.Join(home, ".claude", "projects")) ||
		!strings.Contains(stderr.String(), filepath.Join(home, "codex", "sessions")) {
		t.Errorf("exit %d, stderr:\n%s", code, stderr.String())
	}
}
