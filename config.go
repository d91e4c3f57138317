package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/compaction"
	"github.com/ctxpress/ctxpress/wire/chat"

	"go.yaml.in/yaml/v3"

	"github.com/ctxpress/ctxpress/proxy"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/state"
)

// config is the whole of ctxpress's configuration as the YAML file spells it.
// Precedence: flags > environment (CTXPRESS_*) > file > defaults. Every key is
// optional; config.example.yml lists them all with their defaults (a test
// keeps the two in step).
type config struct {
	Listen            string                 `yaml:"listen"`
	Upstream          string                 `yaml:"upstream"`
	UpstreamAPIKey    string                 `yaml:"upstream_api_key"`
	MaxBodyBytes      int                    `yaml:"max_body_bytes"`
	ConnectTimeout    time.Duration          `yaml:"connect_timeout"`
	UpstreamTimeout   time.Duration          `yaml:"upstream_timeout"`
	StreamIdleTimeout time.Duration          `yaml:"stream_idle_timeout"`
	ShutdownTimeout   time.Duration          `yaml:"shutdown_timeout"`
	DB                string                 `yaml:"db"`
	Retention         time.Duration          `yaml:"retention"`
	State             stateConfig            `yaml:"state"`
	Identify          string                 `yaml:"identify"`
	ConversationHdrs  []string               `yaml:"conversation_headers"`
	CacheBytes        int64                  `yaml:"cache_bytes"`
	Squash            squashConfig           `yaml:"squash"`
	Dedup             dedupConfig            `yaml:"dedup"`
	Prune             pruneConfig            `yaml:"prune"`
	Compaction        compactionCfg          `yaml:"compaction"`
	MaxHistory        int                    `yaml:"max_history_messages"`
	Events            eventsConfig           `yaml:"events"`
	Models            map[string]modelConfig `yaml:"models"`
	DefaultWindow     int                    `yaml:"default_context_window"`
	ConciseOutput     bool                   `yaml:"concise_output"`
	Auth              authConfig             `yaml:"auth"`
	Namespace         string                 `yaml:"namespace"`
	LocalUpstream     string                 `yaml:"local_upstream"`
	AdminToken        string                 `yaml:"admin_token"`
	Metrics           metricsConfig          `yaml:"metrics"`
	Debug             debugConfig            `yaml:"debug"`
	UI                admin.UIConfig         `yaml:"ui"`
	Log               logConfig              `yaml:"log"`
	Replica           string                 `yaml:"replica"`
}

// stateConfig is the state: section: where the conversation records live.
type stateConfig struct {
	// Backend is bolt (the db: file, or memory when db is ""), memory or
	// redis (shared by replicas).
	Backend      string        `yaml:"backend"`
	URL          string        `yaml:"url"`
	Prefix       string        `yaml:"prefix"`
	ReadTimeout  time.Duration `yaml:"read_timeout"`
	WriteTimeout time.Duration `yaml:"write_timeout"`
}

// Backends of state.backend.
const (
	backendBolt   = "bolt"
	backendMemory = "memory"
	backendRedis  = "redis"
)

// validate checks the state: section.
func (s stateConfig) validate() error {
	switch s.Backend {
	case backendBolt, backendMemory:
	case backendRedis:
		if s.URL == "" {
			return errors.New("state.backend redis needs state.url (or CTXPRESS_REDIS_URL), e.g. redis://localhost:6379/0")
		}
		if err := state.CheckRedisURL(s.URL); err != nil {
			return fmt.Errorf("state.url: %w", err)
		}
	default:
		return fmt.Errorf("state.backend %q: want bolt, memory or redis", s.Backend)
	}
	if s.ReadTimeout <= 0 || s.WriteTimeout <= 0 {
		return errors.New("state.read_timeout and state.write_timeout must be positive: a slow store must not hold requests")
	}
	return nil
}

// compactionCfg is the compaction: section; with models:,
// default_context_window, max_history_messages, concise_output and events:
// it becomes a compaction.Config (compactionConfig).
type compactionCfg struct {
	Enabled          bool             `yaml:"enabled"`
	ThresholdTokens  int              `yaml:"threshold_tokens"`
	ThresholdRatio   float64          `yaml:"threshold_ratio"`
	TargetRatio      float64          `yaml:"target_ratio"`
	MinReclaimTokens int              `yaml:"min_reclaim_tokens"`
	KeepRecent       int              `yaml:"keep_recent"`
	KeepRecentTokens int              `yaml:"keep_recent_tokens"`
	Precompact       bool             `yaml:"precompact"`
	PrecompactRatio  float64          `yaml:"precompact_ratio"`
	SummaryPlacement string           `yaml:"summary_placement"`
	Summarizer       summarizerConfig `yaml:"summarizer"`
}

// summarizerConfig is compaction.summarizer: (compaction.SummarizerConfig; the
// reasoning rules come from models:).
type summarizerConfig struct {
	BaseURL   string        `yaml:"base_url"`
	API       string        `yaml:"api"`
	Model     string        `yaml:"model"`
	APIKey    string        `yaml:"api_key"`
	Timeout   time.Duration `yaml:"timeout"`
	MaxTokens int           `yaml:"max_tokens"`
}

// debugConfig holds diagnostics that are off unless asked for.
type debugConfig struct {
	Pprof bool `yaml:"pprof"`
}

// authConfig: when Keys is non-empty, every client must present one of them;
// the provider's key then lives only in upstream_api_key.
type authConfig struct {
	Keys []string `yaml:"keys"`
}

// metricsConfig: /metrics follows the admin rule unless Public.
type metricsConfig struct {
	Public bool `yaml:"public"`
}

// eventsConfig: where compaction events are POSTed.
type eventsConfig struct {
	WebhookURL string `yaml:"webhook_url"`
}

// modelConfig is one models: entry. Reasoning, when set, says whether the
// model takes the reasoning parameter rules in a summary call
// (max_completion_tokens, no temperature); unset, the built-in family table
// decides.
type modelConfig struct {
	ContextWindow int   `yaml:"context_window"`
	Reasoning     *bool `yaml:"reasoning"`
	// Prices, when set, are the model's (USD per million tokens) over the
	// built-in table and the local-server pricing.
	Prices *rewrite.Prices `yaml:"prices"`
}

// squashConfig is the squash: section (squash.Config, and whether to
// squash at all).
type squashConfig struct {
	Enabled      bool     `yaml:"enabled"`
	MinBytes     int      `yaml:"min_bytes"`
	ExemptTools  []string `yaml:"exempt_tools"`
	ShellTools   []string `yaml:"shell_tools"`
	ReadCommands []string `yaml:"read_commands"`
	ReadMaxBytes int      `yaml:"read_max_bytes"`
}

// dedupConfig is the dedup: section (rewrite.DedupConfig).
type dedupConfig struct {
	Enabled       bool     `yaml:"enabled"`
	ReadOnlyTools []string `yaml:"read_only_tools"`
	MinTokens     int      `yaml:"min_tokens"`
}

// pruneConfig is the prune: section (rewrite.PruneConfig; the tools it
// never prunes are squash's exempt tools and shell reads).
type pruneConfig struct {
	Enabled   bool `yaml:"enabled"`
	MinTokens int  `yaml:"min_tokens"`
}

// logConfig is the log: section, read by newLogger.
type logConfig struct {
	Level  string `yaml:"level"`  // trace | debug | info | warn | error
	Format string `yaml:"format"` // auto | console | json
}

// defaultListen is where serve listens unless told otherwise: loopback, so
// a fresh install is not an open relay.
const defaultListen = "127.0.0.1:8484"

// defaultConfig is the config before the file, environment and flags: the
// packages' own defaults, spelled out so that config.example.yml can be
// checked against them, plus the few that only main uses.
func defaultConfig() config {
	return config{
		Listen:            defaultListen,
		Upstream:          "https://api.openai.com/v1",
		MaxBodyBytes:      proxy.DefaultMaxBodyBytes,
		ConnectTimeout:    proxy.DefaultConnectTimeout,
		UpstreamTimeout:   proxy.DefaultUpstreamTimeout,
		StreamIdleTimeout: proxy.DefaultStreamIdleTimeout,
		ShutdownTimeout:   30 * time.Second,
		DB:                "ctxpress.db",
		Retention:         state.DefaultRetention,
		State: stateConfig{Backend: backendBolt, Prefix: state.DefaultRedisPrefix,
			ReadTimeout: state.DefaultRedisReadTimeout, WriteTimeout: state.DefaultRedisWriteTimeout},
		Identify:         rewrite.ModeAuto,
		ConversationHdrs: rewrite.DefaultConversationHeaders(),
		CacheBytes:       rewrite.DefaultCacheBytes,
		Squash: squashConfig{
			Enabled:      true,
			MinBytes:     squash.DefaultMinBytes,
			ExemptTools:  append([]string(nil), squash.DefaultExemptTools...),
			ShellTools:   append([]string(nil), squash.DefaultShellTools...),
			ReadCommands: append([]string(nil), squash.DefaultReadCommands...),
			ReadMaxBytes: squash.DefaultReadMaxBytes,
		},
		Dedup: dedupConfig{
			Enabled:       true,
			ReadOnlyTools: rewrite.DefaultReadOnlyTools(),
			MinTokens:     rewrite.DefaultMinDedupTokens,
		},
		Prune: pruneConfig{Enabled: true, MinTokens: rewrite.DefaultPruneMinTokens},
		Compaction: compactionCfg{
			Enabled:          true,
			ThresholdRatio:   rewrite.DefaultThresholdRatio,
			TargetRatio:      proxy.DefaultTargetRatio,
			KeepRecent:       proxy.DefaultKeepRecent,
			Precompact:       true,
			SummaryPlacement: rewrite.PlacementAuto,
			Summarizer:       summarizerConfig{Timeout: compaction.DefaultSummaryTimeout},
		},
		Auth:          authConfig{Keys: []string{}},
		Namespace:     proxy.DefaultNamespace,
		LocalUpstream: "auto",
		UI:            admin.UIConfig{PricePerMillionTokens: admin.DefaultPricePerMillionTokens, Currency: admin.DefaultCurrency},
		Models:        map[string]modelConfig{},
		DefaultWindow: rewrite.DefaultContextWindow,
		Log:           logConfig{Level: "info", Format: "auto"},
	}
}

// compactionConfig is the proxy's view of the compaction options.
func (c config) compactionConfig() compaction.Config {
	models := make(map[string]int, len(c.Models))
	var reasoning map[string]bool
	for name, m := range c.Models {
		models[name] = m.ContextWindow
		if m.Reasoning != nil {
			if reasoning == nil {
				reasoning = map[string]bool{}
			}
			reasoning[name] = *m.Reasoning
		}
	}
	cc := c.Compaction
	return compaction.Config{
		Enabled: cc.Enabled,
		Trigger: rewrite.TriggerConfig{ThresholdTokens: cc.ThresholdTokens, ThresholdRatio: cc.ThresholdRatio,
			Models: models, DefaultContextWindow: c.DefaultWindow},
		TargetRatio: cc.TargetRatio, MinReclaimTokens: cc.MinReclaimTokens,
		KeepRecent: cc.KeepRecent, KeepRecentTokens: cc.KeepRecentTokens,
		Precompact: cc.Precompact, PrecompactRatio: cc.PrecompactRatio,
		SummaryPlacement: cc.SummaryPlacement,
		Summarizer: compaction.SummarizerConfig{BaseURL: cc.Summarizer.BaseURL, API: cc.Summarizer.API, Model: cc.Summarizer.Model,
			APIKey: cc.Summarizer.APIKey, Timeout: cc.Summarizer.Timeout, MaxTokens: cc.Summarizer.MaxTokens,
			Reasoning: reasoning},
		MaxHistoryMessages: c.MaxHistory,
		ConciseOutput:      c.ConciseOutput,
		WebhookURL:         c.Events.WebhookURL,
	}
}

// pipelineConfig is the part of c the rewrite pipeline runs on; the
// pipeline builds the squasher from Squash with its own token counter.
func (c config) pipelineConfig() rewrite.Config {
	rc := rewrite.Config{
		Format: chat.Format{},
		Dedup: rewrite.DedupConfig{
			Enabled: c.Dedup.Enabled, ReadOnlyTools: nonNil(c.Dedup.ReadOnlyTools), MinTokens: c.Dedup.MinTokens,
		},
		Prune:      rewrite.PruneConfig{Enabled: c.Prune.Enabled, MinTokens: c.Prune.MinTokens},
		CacheBytes: c.CacheBytes,
		Identify:   rewrite.IdentifyConfig{Headers: nonNil(c.ConversationHdrs), Mode: c.Identify},
	}
	if c.Squash.Enabled {
		rc.Squash = &squash.Config{MinBytes: c.Squash.MinBytes, ExemptTools: nonNil(c.Squash.ExemptTools),
			ShellTools: nonNil(c.Squash.ShellTools), ReadCommands: nonNil(c.Squash.ReadCommands),
			ReadMaxBytes: c.Squash.ReadMaxBytes}
	}
	return rc
}

// localUpstream maps local_upstream (auto, true, false) to the proxy's
// setting: nil for auto (the upstream's host is this machine).
func localUpstream(s string) *bool {
	switch s {
	case "true":
		v := true
		return &v
	case "false":
		v := false
		return &v
	}
	return nil
}

// nonNil keeps an empty list from the file meaning "none" rather than
// "the defaults", which is what nil means to the packages.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// proxyConfig is the part of c the proxy package runs on.
func (c config) proxyConfig() proxy.Config {
	return proxy.Config{
		Upstream:          c.Upstream,
		UpstreamAPIKey:    c.UpstreamAPIKey,
		MaxBodyBytes:      c.MaxBodyBytes,
		ConnectTimeout:    c.ConnectTimeout,
		UpstreamTimeout:   c.UpstreamTimeout,
		StreamIdleTimeout: c.StreamIdleTimeout,
		AdminToken:        c.AdminToken,
		MetricsPublic:     c.Metrics.Public,
		Pprof:             c.Debug.Pprof,
		UI:                c.UI,
		AuthKeys:          c.Auth.Keys,
		Namespace:         c.Namespace,
		LocalUpstream:     localUpstream(c.LocalUpstream),
		Compaction:        c.compactionConfig(),
		Cost:              c.costConfig(),
		Replica:           replicaName(c.Replica, hostname(), c.Listen),
	}
}

// replicaName is replica:, or hostname:port of listen: stable across
// restarts, and apart for two replicas on one host. "" leaves it to the
// proxy (the hostname).
func replicaName(replica, hostname, listen string) string {
	if replica != "" || hostname == "" {
		return replica
	}
	if _, port, err := net.SplitHostPort(listen); err == nil && port != "" {
		return hostname + ":" + port
	}
	return hostname
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// costConfig is the models: entries that give prices.
func (c config) costConfig() rewrite.CostConfig {
	var cc rewrite.CostConfig
	for name, m := range c.Models {
		if m.Prices == nil {
			continue
		}
		if cc.Models == nil {
			cc.Models = map[string]rewrite.Prices{}
		}
		cc.Models[name] = *m.Prices
	}
	return cc
}

// decodeConfigFile merges the YAML in data over c. Unknown keys are an error,
// so a typo does not silently fall back to a default.
func decodeConfigFile(c *config, data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	// An empty or comment-only file decodes as io.EOF: all defaults.
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// serveFlags are the command-line options of `ctxpress serve`.
type serveFlags struct {
	fs         *flag.FlagSet
	configPath string
	c          config // values of the flags, applied only when set
}

func newServeFlags() *serveFlags {
	f := &serveFlags{fs: flag.NewFlagSet("serve", flag.ContinueOnError)}
	d := defaultConfig()
	fs := f.fs
	fs.StringVar(&f.configPath, "config", "", "YAML config file (env CTXPRESS_CONFIG)")
	fs.StringVar(&f.c.Listen, "listen", d.Listen, "address to listen on (env CTXPRESS_LISTEN)")
	fs.StringVar(&f.c.Upstream, "upstream", d.Upstream, "upstream base URL, as a client would use it (env CTXPRESS_UPSTREAM)")
	fs.StringVar(&f.c.DB, "db", d.DB, `conversation state file; "" keeps state in memory only (env CTXPRESS_DB)`)
	fs.IntVar(&f.c.MaxBodyBytes, "max-body-bytes", d.MaxBodyBytes, "largest request body; larger ones get 413")
	fs.DurationVar(&f.c.ConnectTimeout, "connect-timeout", d.ConnectTimeout, "upstream dial timeout")
	fs.DurationVar(&f.c.UpstreamTimeout, "upstream-timeout", d.UpstreamTimeout, "wait for the upstream's response headers (a whole non-streamed completion)")
	fs.DurationVar(&f.c.StreamIdleTimeout, "stream-idle-timeout", d.StreamIdleTimeout, "cut a stream after the upstream is silent this long")
	fs.DurationVar(&f.c.ShutdownTimeout, "shutdown-timeout", d.ShutdownTimeout, "on SIGINT/SIGTERM, how long in-flight requests may finish")
	fs.StringVar(&f.c.Log.Level, "log-level", d.Log.Level, "trace|debug|info|warn|error (env CTXPRESS_LOG_LEVEL)")
	fs.StringVar(&f.c.Log.Format, "log-format", d.Log.Format, "auto|console|json: auto is console on a terminal, json otherwise (env CTXPRESS_LOG_FORMAT)")
	return f
}

// loadConfig builds the effective config: defaults, then the file, then the
// environment, then the flags the user set.
func loadConfig(f *serveFlags, getenv func(string) string) (config, error) {
	c := defaultConfig()
	path := f.configPath
	if path == "" {
		path = getenv("CTXPRESS_CONFIG")
	}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return c, fmt.Errorf("config: %w", err)
		}
		if err := decodeConfigFile(&c, data); err != nil {
			return c, fmt.Errorf("config %s: %w", path, err)
		}
	}
	if err := applyEnv(&c, getenv); err != nil {
		return c, err
	}
	f.fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "listen":
			c.Listen = f.c.Listen
		case "upstream":
			c.Upstream = f.c.Upstream
		case "db":
			c.DB = f.c.DB
		case "max-body-bytes":
			c.MaxBodyBytes = f.c.MaxBodyBytes
		case "connect-timeout":
			c.ConnectTimeout = f.c.ConnectTimeout
		case "upstream-timeout":
			c.UpstreamTimeout = f.c.UpstreamTimeout
		case "stream-idle-timeout":
			c.StreamIdleTimeout = f.c.StreamIdleTimeout
		case "shutdown-timeout":
			c.ShutdownTimeout = f.c.ShutdownTimeout
		case "log-level":
			c.Log.Level = f.c.Log.Level
		case "log-format":
			c.Log.Format = f.c.Log.Format
		}
	})
	if err := c.proxyConfig().Validate(); err != nil {
		return c, err
	}
	if err := c.compactionConfig().Validate(); err != nil {
		return c, err
	}
	if err := c.pipelineConfig().Validate(); err != nil {
		return c, err
	}
	switch c.LocalUpstream {
	case "auto", "true", "false":
	default:
		return c, fmt.Errorf("local_upstream %q: want auto, true or false", c.LocalUpstream)
	}
	if err := c.State.validate(); err != nil {
		return c, err
	}
	if c.Squash.MinBytes < 0 {
		return c, errors.New("squash.min_bytes must not be negative")
	}
	if _, err := logSettings(c.Log, nil); err != nil {
		return c, err
	}
	return c, nil
}

// applyEnv applies the CTXPRESS_* variables that are set.
func applyEnv(c *config, getenv func(string) string) error {
	str := map[string]*string{
		"CTXPRESS_LISTEN":           &c.Listen,
		"CTXPRESS_UPSTREAM":         &c.Upstream,
		"CTXPRESS_DB":               &c.DB,
		"CTXPRESS_UPSTREAM_API_KEY": &c.UpstreamAPIKey,
		"CTXPRESS_LOG_LEVEL":        &c.Log.Level,
		"CTXPRESS_LOG_FORMAT":       &c.Log.Format,
		"CTXPRESS_REPLICA":          &c.Replica,
		"CTXPRESS_ADMIN_TOKEN":      &c.AdminToken,
		"CTXPRESS_LOCAL_UPSTREAM":   &c.LocalUpstream,
	}
	for name, dst := range str {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	// A Redis URL in the environment is what a container deployment sets:
	// it selects the backend too.
	if v := getenv("CTXPRESS_REDIS_URL"); v != "" {
		c.State.Backend, c.State.URL = backendRedis, v
	}
	// Keys are comma-separated, so a list of them fits one variable (keys
	// hold no commas: they are tokens).
	if v := getenv("CTXPRESS_AUTH_KEYS"); v != "" {
		c.Auth.Keys = c.Auth.Keys[:0:0]
		for _, k := range strings.Split(v, ",") {
			if k = strings.TrimSpace(k); k != "" {
				c.Auth.Keys = append(c.Auth.Keys, k)
			}
		}
	}
	if v := getenv("CTXPRESS_MAX_BODY_BYTES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("CTXPRESS_MAX_BODY_BYTES: %w", err)
		}
		c.MaxBodyBytes = n
	}
	if v := getenv("CTXPRESS_DEBUG_PPROF"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("CTXPRESS_DEBUG_PPROF: %w", err)
		}
		c.Debug.Pprof = on
	}
	return nil
}
