package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ctxpress/ctxpress/proxy"
	"github.com/ctxpress/ctxpress/replay"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/rs/zerolog"
)

const replayUsage = `Usage:
  ctxpress replay [flags] [FILE|DIR...]

Replays recorded sessions turn by turn, once straight to the provider and
once through ctxpress (the real pipeline, in-process, with your config), and
prints per session and in total: tokens sent, the share the provider served
from its prompt cache, ctxpress's summary calls, and the cost at the
session's model's prices.

With no FILE or DIR, it replays the sessions your agents keep: Claude Code's
(~/.claude/projects, or $CLAUDE_CONFIG_DIR/projects) and codex's
($CODEX_HOME/sessions, or ~/.codex/sessions), and says which it found.

A file is told by its content. A Claude Code transcript or a codex rollout
is rebuilt into the requests the agent sent, one per model call (a Claude
Code transcript's sidechains are sessions of their own); what the file does
not record is filled in from that agent's own, and the report says what.
A .jsonl file of request bodies holds them one a line, in order (chat
completions, Responses or Messages); any other file one chat/Responses/
Messages body holding a whole run (as the corpus traces do), sent turn by
turn: cut before each assistant message, then whole. A DIR is every *.json
and *.jsonl under it; the files there that hold no session are listed.

The provider is by default simulated: a fresh cache per session and leg that
serves the longest prefix (the model, each tool, each message) a request
shares with an earlier one, when it is at least 1024 tokens, as OpenAI does
(on Messages, what it did not serve up to the last cache_control marker is
billed as written to the cache, as Anthropic bills it); bodies are checked as
strictly as the real APIs check them, and a refused one fails its session.
With -upstream, both legs go to a real server instead and its usage is read
as it reports it.

A summary ctxpress prepares in the background is sent from the third
request after the one that started it (or from the one that crosses the
trigger, if sooner), however long its call takes: a request that comes
while it still runs waits for it, live as here. The simulated provider
times turns (the tool time, and the model's time for the recorded answer at
-output-rate plus -latency) on a clock of its own, so such waits happen and
a replay is still fast; with -upstream, the turns are paced for real by the
tool time. No figure depends on these.

Flags:
  -config FILE            ctxpress config, loaded as serve loads it (env CTXPRESS_CONFIG)
  -threshold-tokens N     compaction.threshold_tokens for the replay (env CTXPRESS_THRESHOLD_TOKENS)
  -keep-recent N          compaction.keep_recent for the replay (env CTXPRESS_KEEP_RECENT)
  -model NAME             the model every request names (default: a transcript's
                          own; request bodies %q, unknown to ctxpress's
                          tables, so a 128k window and the default prices)
  -prices MODEL           the price row to cost every session with (default: each
                          session's model's, the config's models: first; a local
                          -upstream: prefill tokens)
  -format F               request bodies' format: chat, responses or messages
                          (default: by each file's shape)
  -upstream URL           replay against a real upstream base URL, e.g. http://127.0.0.1:8080/v1
                          (the config's upstream_api_key is its key on both legs)
  -summary-tokens N       length of a simulated summary (default %d)
  -tool-time D            time between an answer and the agent's next request
                          (default %v)
  -output-rate N          tokens a second the simulated provider writes, summaries
                          and agent answers alike (default %v)
  -latency D              the simulated provider's time to its first token
                          (default %v)
  -parallel N             sessions replayed at once (default: one per CPU)
  -json                   print JSON instead of tables

The exit status is 1 when any session failed.
`

// defaultReplayModel is a model name no table of ctxpress knows.
const defaultReplayModel = "replay-model"

// replayFlags are the options of `ctxpress replay`.
type replayFlags struct {
	config, model, prices, format, upstream string
	threshold, keepRecent                   int
	summaryTokens, parallel                 int
	json                                    bool
	toolTime, latency                       time.Duration
	outputRate                              float64
}

func cmdReplay(args []string, stdout, stderr io.Writer) int {
	var f replayFlags
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.config, "config", "", "")
	fs.IntVar(&f.threshold, "threshold-tokens", -1, "")
	fs.IntVar(&f.keepRecent, "keep-recent", -1, "")
	fs.StringVar(&f.model, "model", "", "")
	fs.StringVar(&f.prices, "prices", "", "")
	fs.StringVar(&f.format, "format", "", "")
	fs.StringVar(&f.upstream, "upstream", "", "")
	fs.IntVar(&f.summaryTokens, "summary-tokens", replay.DefaultSummaryTokens, "")
	fs.DurationVar(&f.toolTime, "tool-time", replay.DefaultToolTime, "")
	fs.Float64Var(&f.outputRate, "output-rate", replay.DefaultOutputRate, "")
	fs.DurationVar(&f.latency, "latency", replay.DefaultLatency, "")
	fs.IntVar(&f.parallel, "parallel", 0, "")
	fs.BoolVar(&f.json, "json", false, "")
	help := fmt.Sprintf(replayUsage, defaultReplayModel, replay.DefaultSummaryTokens,
		replay.DefaultToolTime, replay.DefaultOutputRate, replay.DefaultLatency)
	paths, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, help)
		return 0
	}
	if err == nil && len(paths) == 0 {
		paths, err = defaultSessionDirs(stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ctxpress replay: %v\n\n%s", err, help)
		return 2
	}
	opts, err := replayOptions(f)
	if err != nil {
		fmt.Fprintf(stderr, "ctxpress replay: %v\n", err)
		return 2
	}
	format, err := replay.ParseFormat(f.format)
	if err != nil {
		fmt.Fprintf(stderr, "ctxpress replay: %v\n", err)
		return 2
	}
	found, err := replay.Load(paths, replay.LoadOptions{Format: format, Model: f.model, BodyModel: defaultReplayModel})
	if err != nil {
		for _, s := range found.Skipped {
			fmt.Fprintf(stderr, "skipped %s: %s\n", s.Path, s.Reason)
		}
		fmt.Fprintf(stderr, "ctxpress replay: %v\n", err)
		return 1
	}
	report := replay.Run(found.Sessions, opts)
	report.Skipped = found.Skipped
	if f.json {
		err = replay.WriteJSON(stdout, report)
	} else {
		err = replay.WriteText(stdout, report)
	}
	if err != nil || report.Failed() {
		return 1
	}
	return 0
}

// replayOptions builds the replay from the flags and the config as serve
// would load it.
func replayOptions(f replayFlags) (replay.Options, error) {
	sf := newServeFlags()
	sf.configPath = f.config
	// Each session's ctxpress gets a db of its own (replayStart): none
	// is looked for.
	_ = sf.fs.Set("db", "")
	// -1 is the flags' "not given"; any other value goes through serve's
	// flag, so that it is checked and named as serve's would be.
	if f.threshold != -1 {
		_ = sf.fs.Set("threshold-tokens", strconv.Itoa(f.threshold))
	}
	if f.keepRecent != -1 {
		_ = sf.fs.Set("keep-recent", strconv.Itoa(f.keepRecent))
	}
	cfg, _, err := loadConfig(sf, os.Getenv)
	if err != nil {
		return replay.Options{}, err
	}
	if f.outputRate <= 0 || f.toolTime < 0 || f.latency < 0 {
		return replay.Options{}, errors.New("-output-rate must be above 0, -tool-time and -latency not below 0")
	}
	if f.upstream != "" {
		if u, err := url.Parse(f.upstream); err != nil || u.Host == "" {
			return replay.Options{}, fmt.Errorf("-upstream %q: want a base URL such as http://127.0.0.1:8080/v1", f.upstream)
		}
	}
	// The upstream ctxpress sees is the replay's meter, on loopback: say
	// where the provider really is, unless the config does.
	local := f.upstream != "" && isLoopbackURL(f.upstream)
	if cfg.LocalUpstream == "auto" {
		cfg.LocalUpstream = fmt.Sprint(local)
	}
	priceModel := f.prices
	if priceModel == "" {
		priceModel = cmp.Or(f.model, defaultReplayModel)
	}
	costs := cfg.costConfig() // the config's prices, as ctxpress itself uses them
	costs.Local = local && f.prices == ""
	o := replay.Options{
		Start: replayStart(cfg), Upstream: f.upstream, APIKey: cfg.UpstreamAPIKey,
		SummaryTokens: f.summaryTokens, Parallel: f.parallel,
		Timing: replay.Timing{ToolTime: orNone(f.toolTime), OutputRate: f.outputRate, Latency: orNone(f.latency)},
		Prices: costs.PricesFor(priceModel), SummaryPrices: costs.PricesFor(priceModel),
	}
	if f.prices == "" && !costs.Local {
		o.PricesFor = costs.PricesFor
	}
	if s := cfg.Compaction.Summarizer; s.BaseURL != "" {
		o.Summariser, o.SummariserUpstream = true, s.BaseURL
		if s.Model != "" {
			o.SummaryPrices = costs.PricesFor(s.Model)
		}
	}
	return o, nil
}

// defaultSessionDirs are the directories where this user's agents keep
// their sessions, those that exist, each said on w.
func defaultSessionDirs(w io.Writer) ([]string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, fmt.Errorf("no FILE or DIR, and no home directory to look in: %w", err)
	}
	var dirs, looked []string
	for _, src := range replay.DefaultSources(home, os.Getenv("CLAUDE_CONFIG_DIR"), os.Getenv("CODEX_HOME")) {
		looked = append(looked, src.Dir)
		if st, err := os.Stat(src.Dir); err != nil || !st.IsDir() {
			fmt.Fprintf(w, "no %s sessions in %s\n", src.Agent, src.Dir)
			continue
		}
		fmt.Fprintf(w, "replaying the %s sessions in %s\n", src.Agent, src.Dir)
		dirs = append(dirs, src.Dir)
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no FILE or DIR, and no sessions in %s", strings.Join(looked, " or "))
	}
	return dirs, nil
}

// orNone is d as a Timing field: a flag's 0 is none, a field's 0 the default.
func orNone(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func isLoopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// replayStart starts, for each session, a ctxpress of cfg in-process on
// an ephemeral loopback port, its db in a temporary directory, no client
// keys asked (the replay is its only client).
func replayStart(cfg config) replay.StartFunc {
	return func(upstream, summariser string) (replay.Proxy, error) {
		c := cfg
		// Every format goes to the replay's meter, and ctxpress acts
		// (observe mode would replay nothing but the direct leg).
		c.Upstream, c.Upstreams, c.Mode = upstream, upstreamsConfig{}, proxy.ModeNormal
		if summariser != "" {
			c.Compaction.Summarizer.BaseURL = summariser
		}
		c.Auth.Keys = []string{}
		dir, err := os.MkdirTemp("", "ctxpress-replay-")
		if err != nil {
			return nil, err
		}
		c.DB = filepath.Join(dir, "ctxpress.db")
		p := &replayProxy{dir: dir}
		if err := p.start(c); err != nil {
			_ = p.Close()
			return nil, err
		}
		return p, nil
	}
}

// replayProxy is one session's ctxpress.
type replayProxy struct {
	dir   string
	store interface{ Close() error }
	srv   *proxy.Server
	ln    net.Listener
}

func (p *replayProxy) start(c config) error {
	log := zerolog.Nop()
	store, err := openStore(c, log)
	if err != nil {
		return err
	}
	p.store = store
	srv, err := proxy.New(c.proxyConfig(), log, proxy.Deps{Pipeline: rewrite.New(c.pipelineConfig()), Store: store})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	p.srv, p.ln = srv, ln
	go func() { _ = srv.Serve(ln) }()
	return nil
}

func (p *replayProxy) BaseURL() string { return "http://" + p.ln.Addr().String() + "/v1" }

func (p *replayProxy) WaitIdle() { p.srv.WaitIdle() }

func (p *replayProxy) WaitRecorded() { p.srv.WaitRecorded() }

func (p *replayProxy) Background() int { return p.srv.Background() }

func (p *replayProxy) Waiting() int { return p.srv.Waiting() }

func (p *replayProxy) Close() error {
	var err error
	if p.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = p.srv.Shutdown(ctx)
		cancel()
	}
	if p.store != nil {
		err = errors.Join(err, p.store.Close())
	}
	return errors.Join(err, os.RemoveAll(p.dir))
}
