// Command ctxpress-load drives a real ctxpress binary with simulated coding
// agents against a fast in-process OpenAI-compatible upstream, and compares
// its pass-through throughput with the upstream reached directly and through
// nginx (when installed). It needs no external service.
//
//	go run ./cmd/ctxpress-load -agents 32 -duration 5m
//
// It reports requests/s, p50/p99 latency and the latency ctxpress adds,
// errors, compactions, and the ctxpress process's RSS after warm-up, at the
// end and at its peak (VmHWM). It exits 1 when a request failed or RSS grew
// more than 20% after warm-up.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

type options struct {
	bin, nginx          string
	agents, maxTurns    int
	duration, warmup    time.Duration
	warmupMax           time.Duration
	compare, latency    time.Duration
	conc                int
	threshold           int
	logLevel            string
	rssTolerance        float64
	compareTurns        int
	keep                bool
	pin                 bool
	skipAgents, noNginx bool
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "", "ctxpress binary (default: build this module's)")
	flag.StringVar(&o.nginx, "nginx", "", "nginx binary (default: nginx on PATH or /usr/sbin/nginx)")
	flag.BoolVar(&o.noNginx, "no-nginx", false, "skip the nginx comparison")
	flag.IntVar(&o.agents, "agents", 32, "concurrent simulated agents in the agent phase")
	flag.IntVar(&o.maxTurns, "turns", 40, "turns per conversation before an agent starts a new one")
	flag.DurationVar(&o.duration, "duration", 5*time.Minute, "agent phase length after the warm-up")
	flag.DurationVar(&o.warmup, "warmup", 30*time.Second, "shortest warm-up; it lasts until ctxpress's rewrite cache is full too (at most -warmup-max), and RSS is compared with its value then")
	flag.DurationVar(&o.warmupMax, "warmup-max", 5*time.Minute, "longest warm-up, when the rewrite cache does not fill")
	flag.DurationVar(&o.compare, "compare", 20*time.Second, "length of each pass-through comparison run (0: skip)")
	flag.DurationVar(&o.latency, "latency", 5*time.Second, "length of each one-client latency run (0: skip)")
	flag.IntVar(&o.conc, "conc", 32, "concurrent clients in the pass-through comparison")
	flag.IntVar(&o.compareTurns, "compare-turns", 8, "history length (turns) of the comparison request")
	flag.IntVar(&o.threshold, "threshold", 8000, "ctxpress compaction.threshold_tokens for the run")
	flag.StringVar(&o.logLevel, "log-level", "info", "ctxpress log level (info logs every request, as deployed)")
	flag.Float64Var(&o.rssTolerance, "rss-tolerance", 0.20, "allowed RSS growth from warm-up to end")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (db, configs, nginx logs)")
	flag.BoolVar(&o.skipAgents, "skip-agents", false, "only the comparison")
	flag.BoolVar(&o.pin, "pin", false, "run this tool (its clients and fake upstream) on CPU 0 and ctxpress and nginx on the other CPUs: steadier comparisons (Linux, taskset)")
	flag.Parse()
	if o.pin {
		if err := pinCPUs(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	os.Exit(run(o))
}

func run(o options) int {
	dir, err := os.MkdirTemp("", "ctxpress-load-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if o.keep {
		fmt.Printf("work directory: %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	up, err := startUpstream()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer up.Close()
	if o.bin == "" {
		fmt.Println("building ctxpress …")
		if o.bin, err = buildCtxpress(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	cfg := fmt.Sprintf("db: %s\ncompaction:\n  threshold_tokens: %d\n", filepath.Join(dir, "ctxpress.db"), o.threshold)
	if err := os.WriteFile(filepath.Join(dir, "ctxpress.yml"), []byte(cfg), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cmd, cxURL, logs, err := startCtxpress(o.bin, up.BaseURL(), dir, []string{"--log-level", o.logLevel})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	pid := cmd.Process.Pid
	fmt.Printf("%s, GOMAXPROCS %d; ctxpress pid %d at %s; upstream %s\n", runtime.GOOS+"/"+runtime.GOARCH, runtime.GOMAXPROCS(0), pid, cxURL, up.BaseURL())

	failed := false
	if o.compare > 0 {
		if !compare(o, dir, up, cxURL) {
			failed = true
		}
	}
	if !o.skipAgents && o.duration > 0 {
		if !agentPhase(o, pid, up, cxURL) {
			failed = true
		}
	}
	warns, errs, sample := logs.counts()
	fmt.Printf("\nctxpress log: %d warnings, %d errors\n", warns, errs)
	for _, l := range sample {
		fmt.Println("  " + l)
	}
	if failed {
		fmt.Println("RESULT: FAIL")
		return 1
	}
	fmt.Println("RESULT: PASS")
	return 0
}

// comparisonBody is one agent request of compareTurns turns whose tool
// outputs are small, so ctxpress forwards it as sent: a pass-through of
// the chat path (parse, count, identify, record) on identical bytes.
func comparisonBody(turns int) []byte {
	a := newSimAgent(1_000_000, 1<<30)
	for a.turns < turns {
		a.advance()
	}
	// Keep only the small (unsquashed) tool results: drop squashable turns.
	kept := a.msgs[:2]
	for i := 2; i+1 < len(a.msgs); i += 2 {
		if len(a.msgs[i+1]) < 1200 {
			kept = append(kept, a.msgs[i], a.msgs[i+1])
		}
	}
	a.msgs = kept
	return a.body(false)
}

type target struct{ name, url string }

// compareRounds is how many rounds a comparison's time per target is cut
// into, the targets taking turns within each: run one after another for
// the whole time, targets met different phases of the machine's load
// (docs/measurements.md).
const compareRounds = 4

// roundRatios is cx's rate over base's, round by round.
func roundRatios(cx, base []*stats) []float64 {
	out := make([]float64, 0, len(cx))
	for i := range min(len(cx), len(base)) {
		if b := base[i].rate(); b > 0 {
			out = append(out, cx[i].rate()/b)
		}
	}
	return out
}

// medianOf is the median of xs (the mean of the middle two for an even
// count), 0 for none.
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func formatRatios(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, " ")
}

func compare(o options, dir string, up *fakeUpstream, cxURL string) bool {
	targets := []target{{"direct", up.BaseURL()}}
	switch bin := findNginx(o.nginx); {
	case o.noNginx:
		fmt.Println("nginx: skipped (-no-nginx)")
	case bin == "":
		fmt.Println("nginx: not installed, no nginx comparison (apt-get install -y nginx)")
	default:
		ncmd, nURL, err := startNginx(bin, dir, up.Addr())
		if err != nil {
			fmt.Printf("nginx: cannot start %s: %v\n", bin, err)
			break
		}
		defer stopNginx(ncmd)
		if out, err := exec.Command(bin, "-v").CombinedOutput(); err == nil {
			fmt.Printf("nginx: %s", out)
		}
		targets = append(targets, target{"nginx", nURL})
	}
	targets = append(targets, target{"ctxpress", cxURL})
	embed := []byte(`{"model":"text-embedding-3-small","input":"` + strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20) + `"}`)
	ok := true
	// target is the ratio to nginx each path aims at: pass-through does
	// nginx's work, the chat path parses, counts and records besides.
	for _, w := range []struct {
		title, path string
		body        []byte
		target      float64
	}{
		{"pass-through (POST /v1/embeddings, forwarded untouched)", "/embeddings", embed, 0.8},
		{"chat path (POST /v1/chat/completions: parsed, counted, identified, recorded; no rewrite needed)", "/chat/completions", comparisonBody(o.compareTurns), 0.6},
	} {
		fmt.Printf("\n== %s\n   the same %d-byte request, %d concurrent clients, %v per target in %d interleaved rounds\n",
			w.title, len(w.body), o.conc, o.compare, compareRounds)
		for _, t := range targets {
			fixedLoad(t.url, w.path, w.body, o.conc, 2*time.Second) // warm connection pools
		}
		rounds := map[string][]*stats{}
		for r := range compareRounds {
			for i := range targets {
				t := targets[(i+r)%len(targets)] // each target leads in turn
				rounds[t.name] = append(rounds[t.name], fixedLoad(t.url, w.path, w.body, o.conc, o.compare/compareRounds))
			}
		}
		res := map[string]summary{}
		for _, t := range targets {
			s := mergedSummary(rounds[t.name])
			res[t.name] = s
			fmt.Printf("   %-9s %9.0f req/s   p50 %9v   p99 %9v   errors %d\n", t.name, s.rps, s.p50.Round(time.Microsecond), s.p99.Round(time.Microsecond), s.errs)
			if s.errs > 0 {
				fmt.Printf("             first error: %s\n", s.firstErr)
				ok = false
			}
		}
		cx := res["ctxpress"]
		fmt.Printf("   ratio ctxpress/direct %.2fx", cx.rps/res["direct"].rps)
		if _, found := res["nginx"]; found {
			// The verdict is the median round's: the machine's load moves
			// every target's rate, and a round compares them within seconds.
			ratios := roundRatios(rounds["ctxpress"], rounds["nginx"])
			median := medianOf(ratios)
			verdict := "meets"
			if median < w.target {
				verdict = "below"
			}
			fmt.Printf("   ctxpress/nginx %.2fx, rounds %s: median %.2fx (%s %.1fx)   nginx/direct %.2fx",
				cx.rps/res["nginx"].rps, formatRatios(ratios), median, verdict, w.target, res["nginx"].rps/res["direct"].rps)
		}
		fmt.Println()
		if o.latency <= 0 {
			continue
		}
		fmt.Printf("   one client, %v per target:\n", o.latency)
		lat := map[string]summary{}
		for _, t := range targets {
			fixedLoad(t.url, w.path, w.body, 1, 500*time.Millisecond)
			lat[t.name] = fixedLoad(t.url, w.path, w.body, 1, o.latency).summary()
		}
		d := lat["direct"]
		fmt.Printf("   %-9s p50 %9v   p99 %9v\n", "direct", d.p50.Round(time.Microsecond), d.p99.Round(time.Microsecond))
		for _, name := range []string{"nginx", "ctxpress"} {
			if s, found := lat[name]; found {
				fmt.Printf("   %-9s p50 %9v   p99 %9v   added p50 %9v   p99 %9v\n", name, s.p50.Round(time.Microsecond), s.p99.Round(time.Microsecond),
					(s.p50 - d.p50).Round(time.Microsecond), (s.p99 - d.p99).Round(time.Microsecond))
			}
		}
	}
	return ok
}

// agentPhase runs the simulated agents for o.duration, sampling ctxpress's
// RSS every second.
func agentPhase(o options, pid int, up *fakeUpstream, cxURL string) bool {
	fmt.Printf("\n== agents: %d concurrent, %d turns per conversation, stream and not, %v after a warm-up of at least %v that fills the rewrite cache\n", o.agents, o.maxTurns, o.duration, o.warmup)
	st := &stats{start: time.Now()}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { agentLoad(cxURL, o.agents, o.maxTurns, st, stop); close(done) }()
	var warmRSS, endRSS, hwm, minRSS, maxRSS, warmAnon, endAnon int64
	summariesAtWarm := up.summaries.Load()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var deadline time.Time // set when the warm-up ends
	lastReport := time.Now()
	for now := range tick.C {
		rss, h, anon, err := procMem(pid)
		if err != nil {
			fmt.Printf("ctxpress is gone: %v\n", err)
			st.fail("ctxpress exited")
			break
		}
		hwm, endRSS, endAnon = h, rss, anon
		if elapsed := now.Sub(st.start); warmRSS == 0 && elapsed >= o.warmup {
			// Warm means the rewrite cache has filled to its bound: until
			// then memory grows by design, up to cache_bytes.
			used, limit, err := cacheFill(cxURL)
			if full := err == nil && used >= 0.95*limit; full || elapsed >= o.warmupMax {
				warmRSS, minRSS, maxRSS, warmAnon = rss, rss, rss, anon
				summariesAtWarm = up.summaries.Load()
				deadline = now.Add(o.duration)
				fmt.Printf("  %4.0fs  warm-up over: rewrite cache %.1f of %.1f MiB (full: %v); RSS %.1f MiB\n",
					elapsed.Seconds(), used/(1<<20), limit/(1<<20), full, mib(rss))
			}
		}
		if warmRSS > 0 {
			minRSS, maxRSS = min(minRSS, rss), max(maxRSS, rss)
		}
		if now.Sub(lastReport) >= 30*time.Second {
			lastReport = now
			fmt.Printf("  %4.0fs  %6d requests  %d errors  RSS %d MiB  summaries %d\n", now.Sub(st.start).Seconds(), st.completed.Load(), st.errs.Load(), rss>>10, up.summaries.Load())
		}
		if !deadline.IsZero() && now.After(deadline) {
			break
		}
	}
	close(stop)
	<-done
	st.stop = time.Now()
	s := st.summary()
	fmt.Printf("requests   %d (%d streamed), %.0f req/s\n", s.n, st.streamed.Load(), s.rps)
	fmt.Printf("latency    p50 %v   p99 %v (client-side, agents in a closed loop: queueing included)\n", s.p50.Round(time.Microsecond), s.p99.Round(time.Microsecond))
	fmt.Printf("errors     %d\n", s.errs)
	if s.errs > 0 {
		fmt.Printf("           first: %s\n", s.firstErr)
	}
	fmt.Printf("compactions %d summary calls (%d after warm-up), %d answers marked compacted (the rest were precompacted in the background)\n",
		up.summaries.Load(), up.summaries.Load()-summariesAtWarm, st.compacted.Load())
	ok := s.errs == 0
	if warmRSS > 0 {
		growth := float64(endRSS-warmRSS) / float64(warmRSS)
		verdict := "flat"
		if growth > o.rssTolerance {
			verdict = "GREW"
			ok = false
		}
		fmt.Printf("RSS        after warm-up %.1f MiB, end %.1f MiB (%+.1f%%, %s), range after warm-up %.1f–%.1f MiB, peak (VmHWM) %.1f MiB\n",
			mib(warmRSS), mib(endRSS), 100*growth, verdict, mib(minRSS), mib(maxRSS), mib(hwm))
		fmt.Printf("           of which anonymous (heap, stacks): %.1f → %.1f MiB; the rest is the mapped db file and binary\n", mib(warmAnon), mib(endAnon))
	} else {
		fmt.Println("RSS        the run ended before the warm-up did: no memory verdict")
	}
	return ok
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// cacheFill reads ctxpress's rewrite cache bytes and bound from /metrics.
func cacheFill(cxURL string) (used, limit float64, err error) {
	status, body, err := fasthttp.GetTimeout(nil, strings.TrimSuffix(cxURL, "/v1")+"/metrics", 5*time.Second)
	if err != nil {
		return 0, 0, err
	}
	if status != fasthttp.StatusOK {
		return 0, 0, fmt.Errorf("/metrics: status %d", status)
	}
	for _, line := range strings.Split(string(body), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		switch name {
		case "ctxpress_rewrite_cache_bytes":
			used, err = strconv.ParseFloat(value, 64)
		case "ctxpress_rewrite_cache_limit_bytes":
			limit, err = strconv.ParseFloat(value, 64)
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if limit <= 0 {
		return 0, 0, fmt.Errorf("/metrics has no rewrite cache figures")
	}
	return used, limit, nil
}
