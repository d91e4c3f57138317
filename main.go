// Command ctxpress is a transparent OpenAI-compatible reverse proxy that keeps
// LLM agents' context lean. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/ctxpress/ctxpress/internal/logline"
	"github.com/ctxpress/ctxpress/proxy"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
	"github.com/rs/zerolog"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

const usage = `ctxpress: a transparent OpenAI-compatible proxy that keeps LLM context lean

Usage:
  ctxpress serve [--config FILE] [--listen ADDR] [--upstream URL] [--db FILE] [--mode normal|observe] [flags]
  ctxpress squash [--call JSON] [FILE|-]   print what ctxpress forwards for a tool output of that call
  ctxpress count [--model M] [FILE|-]      token count of a text or a chat request
  ctxpress conversations [list|show ID|rm ID|compact ID] [--db FILE] [--json]
  ctxpress expand REF [--lines A-B] [--key KEY]
                                           print an original a marker refers to, exactly
  ctxpress replay [--config FILE] [--threshold-tokens N] [--keep-recent N] [--upstream URL] FILE|DIR...
                                           what recorded sessions cost direct and through ctxpress
  ctxpress healthcheck [--addr HOST:PORT]  exit 0 when a running ctxpress answers its healthz
  ctxpress version

Run "ctxpress serve --help" for every flag.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one sub-command and returns the process exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return cmdServe(args[1:], stderr)
	case "squash":
		return cmdSquash(args[1:], stdin, stdout, stderr)
	case "count":
		return cmdCount(args[1:], stdin, stdout, stderr)
	case "conversations":
		return cmdConversations(args[1:], stdout, stderr)
	case "expand":
		return cmdExpand(args[1:], stdout, stderr)
	case "replay":
		return cmdReplay(args[1:], stdout, stderr)
	case "healthcheck":
		return cmdHealthcheck(args[1:], os.Getenv, stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, versionString())
		return 0
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "ctxpress: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

func versionString() string {
	v := version
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	return "ctxpress " + v
}

func cmdServe(args []string, stderr io.Writer) int {
	f := newServeFlags()
	f.fs.SetOutput(io.Discard) // a bad flag is logged below, as every startup error is
	err := f.fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stderr, "Usage: ctxpress serve [flags]\n\nEach flag sets a key of the config file (config.example.yml lists them all).\n\nFlags:\n")
		f.fs.SetOutput(stderr)
		f.fs.PrintDefaults()
		return 0
	}
	var cfg config
	var warnings []string
	if err != nil {
		err = fmt.Errorf("%w; run ctxpress serve --help for the flags", err)
	} else {
		cfg, warnings, err = loadConfig(f, os.Getenv)
	}
	log, closeLog, _ := newLogger(startupLogConfig(cfg.Log, f, os.Getenv), stderr)
	// Pending lines reach stderr before the process exits.
	defer closeLog()
	for _, w := range warnings {
		log.Warn().Msg(w)
	}
	// The reason is the message, so that a console shows it as written
	// (a field's quotes would be escaped).
	if err != nil {
		log.Error().Msg("ctxpress cannot start: " + err.Error())
		return 2
	}
	s, err := start(cfg, log)
	if err != nil {
		log.Error().Msg("ctxpress cannot start: " + err.Error())
		return 1
	}
	if err := s.run(); err != nil {
		log.Error().Err(err).Msg("ctxpress stopped")
		return 1
	}
	return 0
}

// startupLogConfig is the log: settings to report startup with, so that
// even a config that does not load is reported in the format asked for:
// the loaded config's when they are valid (else the defaults), with the
// environment's and the flags' valid values over them (a file that did
// not load was never overridden by them).
func startupLogConfig(loaded logConfig, f *serveFlags, getenv func(string) string) logConfig {
	c := loaded
	if _, err := logSettings(c, nil); err != nil {
		c = defaultConfig().Log
	}
	over := func(dst *string, v string) {
		old := *dst
		if *dst = v; v == "" {
			*dst = old
		} else if _, err := logSettings(c, nil); err != nil {
			*dst = old
		}
	}
	over(&c.Level, getenv("CTXPRESS_LOG_LEVEL"))
	over(&c.Format, getenv("CTXPRESS_LOG_FORMAT"))
	f.fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "log-level":
			over(&c.Level, f.c.Log.Level)
		case "log-format":
			over(&c.Format, f.c.Log.Format)
		}
	})
	return c
}

// server is a started ctxpress: its store, proxy and listener.
type server struct {
	cfg   config
	log   zerolog.Logger
	store state.Store
	srv   *proxy.Server
	ln    net.Listener
	// stopSweep stops the sweep of the originals' files (a no-op when
	// there are none).
	stopSweep func()
}

// start listens, opens the store, builds the proxy and logs the startup
// line. An error says what failed and what to do about it.
func start(cfg config, log zerolog.Logger) (*server, error) {
	// The address first: a second ctxpress started by mistake is told at
	// once that one serves there, before it waits on the first one's db.
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, listenError(cfg.Listen, err, errors.Is(err, syscall.EADDRINUSE) && answersAsCtxpress(cfg.Listen))
	}
	store, err := openStore(cfg, log)
	if err != nil {
		ln.Close()
		return nil, err
	}
	ways, files := openExpand(cfg, ln.Addr(), log)
	pc := cfg.pipelineConfig()
	pc.Expand = ways
	pipeline := rewrite.New(pc)
	_, _, cacheLimit := pipeline.CacheStats()
	memLimit, fromEnv := applyMemoryLimit(cacheLimit, os.Getenv)
	pxc := cfg.proxyConfig()
	if ways != nil {
		pxc.Compaction.Ways = *ways // a summary block names its kept messages as markers name theirs
	}
	srv, err := proxy.New(pxc, log, proxy.Deps{Pipeline: pipeline, Store: store, Files: files})
	if err != nil {
		ln.Close()
		store.Close()
		return nil, err
	}
	if msg := exposureWarning(ln.Addr(), len(cfg.Auth.Keys), os.Getenv(envPublishedAddr)); msg != "" {
		log.Warn().Str("listen", ln.Addr().String()).Msg(msg)
	}
	ev := log.Info().Str("listen", ln.Addr().String()).Str("dashboard", dashboardURL(ln.Addr().String())).
		Str("mode", cfg.Mode)
	if cfg.Upstream != "" {
		ev = ev.Str("upstream", cfg.Upstream)
	}
	ev.Str("db", storeSummary(cfg)).Str("trigger", triggerSummary(cfg)).Str("version", version).
		Int64("memory_limit", memLimit).Bool("memory_limit_from_env", fromEnv)
	stopSweep := func() {}
	if files != nil {
		ev = ev.Str("originals", files.Dir)
		stopSweep = files.SweepEvery(state.DefaultSweepInterval, func(err error) {
			log.Warn().Err(err).Str("dir", files.Dir).Msg("cannot sweep the originals' files")
		})
	}
	ev.Msg("ctxpress serving")
	return &server{cfg: cfg, log: log, store: store, srv: srv, ln: ln, stopSweep: stopSweep}, nil
}

// run serves until SIGINT or SIGTERM, then drains in-flight requests for
// at most cfg.ShutdownTimeout. A second signal stops at once.
func (s *server) run() error {
	defer s.store.Close()
	defer s.stopSweep()
	cfg, log := s.cfg, s.log
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(s.ln) }()

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	select {
	case err := <-served:
		return err
	case sig := <-sigs:
		logline.Dur(log.Info().Str("signal", sig.String()), "drain_ms", cfg.ShutdownTimeout).
			Msg("shutting down; letting in-flight requests finish")
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	go func() {
		select {
		case <-sigs:
			log.Warn().Msg("second signal: stopping now")
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := s.srv.Shutdown(ctx); err != nil {
		log.Warn().Err(err).Msg("drain incomplete; remaining requests were cut")
	}
	<-served
	log.Info().Msg("ctxpress stopped")
	return nil
}

// openStore opens the conversation store of state.backend: the bolt db
// (in memory when cfg.DB is empty), memory, or Redis. A store that cannot
// be opened stops startup with the reason.
func openStore(cfg config, log zerolog.Logger) (state.Store, error) {
	onSweep := func(removed int, err error) {
		if err != nil {
			log.Warn().Err(err).Msg("retention sweep failed")
		} else if removed > 0 {
			log.Info().Int("removed", removed).Msg("retention sweep removed idle conversations")
		}
	}
	switch cfg.State.Backend {
	case backendRedis:
		st, err := state.OpenRedis(state.RedisOptions{URL: cfg.State.URL, Prefix: cfg.State.Prefix,
			ReadTimeout: cfg.State.ReadTimeout, WriteTimeout: cfg.State.WriteTimeout,
			Retention: cfg.Retention, OnSweep: onSweep, OriginalsMaxBytes: cfg.Expand.MaxBytes})
		if err != nil {
			return nil, fmt.Errorf("cannot reach the redis store (state.url, env CTXPRESS_REDIS_URL): %w; check the URL and that Redis runs there, or use state.backend bolt", err)
		}
		return st, nil
	case backendMemory:
		return state.NewMemoryWithOptions(state.MemoryOptions{Retention: cfg.Retention, OnSweep: onSweep, OriginalsMaxBytes: cfg.Expand.MaxBytes}), nil
	}
	if cfg.DB == "" {
		return state.NewMemoryWithOptions(state.MemoryOptions{Retention: cfg.Retention, OnSweep: onSweep, OriginalsMaxBytes: cfg.Expand.MaxBytes}), nil
	}
	onJournalError := func(err error) {
		log.Warn().Err(err).Msg("no journal beside the db: a crash loses the turns answered in the writer's last interval (up to ~100 ms under load)")
	}
	st, err := state.OpenBolt(cfg.DB, state.BoltOptions{Retention: cfg.Retention, OnSweep: onSweep, OnJournalError: onJournalError,
		OriginalsMaxBytes: cfg.Expand.MaxBytes})
	if err != nil {
		return nil, dbOpenError(cfg.DB, err)
	}
	return st, nil
}

// envPublishedAddr names the host address a container's port is published
// on (docker-compose.yml sets it beside its ports:). A container must listen
// on all its interfaces, so its listener says nothing about who can reach
// it; only whoever publishes the port knows, and says so here.
const envPublishedAddr = "CTXPRESS_PUBLISHED_ADDR"

// exposureWarning is the startup warning for a listener that clients beyond
// this machine can reach while no client key is required, or "" when none is
// due: such a proxy spends its owner's upstream key for anyone. published is
// envPublishedAddr's value: a loopback address there keeps the listener to
// this machine, as listening on loopback does.
func exposureWarning(addr net.Addr, authKeys int, published string) string {
	if isLoopback(addr) || authKeys > 0 || publishedOnLoopback(published) {
		return ""
	}
	reach := addr.String()
	if published != "" {
		reach = published + " (" + envPublishedAddr + ")"
	}
	return "SECURITY: listening beyond loopback WITHOUT auth.keys: anyone who can reach " + reach +
		" can use your upstream (and its key) through ctxpress; set auth.keys (env CTXPRESS_AUTH_KEYS) or listen on 127.0.0.1" +
		" (in a container: publish the port on 127.0.0.1 and set " + envPublishedAddr + ", see docs/docker.md)"
}

// publishedOnLoopback reports whether published (host:port, or a host)
// names a loopback address.
func publishedOnLoopback(published string) bool {
	host := published
	if h, _, err := net.SplitHostPort(published); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
