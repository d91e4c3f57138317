package main

import (
	"net"
	"os"
	"time"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/compaction"
	"github.com/ctxpress/ctxpress/wire/chat"

	"github.com/ctxpress/ctxpress/proxy"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/state"
)

// config is the whole of ctxpress's configuration as the YAML file spells it.
// Precedence: flags > environment (CTXPRESS_*) > file > defaults. Every key is
// optional; config.example.yml lists them all with their defaults (a test
// keeps the two in step). A value's checks are checkConfig's, by the key's
// YAML path.
type config struct {
	Listen            string                 `yaml:"listen"`
	Mode              string                 `yaml:"mode"`
	Upstream          string                 `yaml:"upstream"`
	UpstreamAPIKey    string                 `yaml:"upstream_api_key"`
	Upstreams         upstreamsConfig        `yaml:"upstreams"`
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
	Expand            expandConfig           `yaml:"expand"`
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

// upstreamsConfig is the upstreams: section: an upstream per format, over
// upstream (proxy.Config.Routes).
type upstreamsConfig struct {
	Chat      routeConfig `yaml:"chat"`
	Responses routeConfig `yaml:"responses"`
	Messages  routeConfig `yaml:"messages"`
	Gemini    routeConfig `yaml:"gemini"`
}

// routeConfig is one upstreams: entry (proxy.Route).
type routeConfig struct {
	BaseURL string `yaml:"base_url"`
	APIKey  string `yaml:"api_key"`
	// Local is auto (found out), true or false, as local_upstream.
	Local string `yaml:"local"`
}

// routes are the upstreams: entries that say something, by the proxy's
// format names.
func (u upstreamsConfig) routes() map[string]proxy.Route {
	var routes map[string]proxy.Route
	for name, r := range map[string]routeConfig{proxy.RouteChat: u.Chat, proxy.RouteResponses: u.Responses, proxy.RouteMessages: u.Messages,
		proxy.RouteGemini: u.Gemini} {
		if r.BaseURL == "" && r.APIKey == "" && (r.Local == "" || r.Local == localAuto) {
			continue
		}
		if routes == nil {
			routes = map[string]proxy.Route{}
		}
		routes[name] = proxy.Route{Upstream: r.BaseURL, APIKey: r.APIKey, Local: localUpstream(r.Local)}
	}
	return routes
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

// expandConfig is the expand: section: what squash, prune and dedup
// replace is kept, and the ways back a marker names (expand.Ways).
type expandConfig struct {
	Keep     bool   `yaml:"keep"`
	MaxBytes int64  `yaml:"max_bytes"` // state's OriginalsMaxBytes
	Dir      string `yaml:"dir"`
	Files    string `yaml:"files"` // auto | true | false
	Tool     bool   `yaml:"tool"`
	URL      string `yaml:"url"`
}

// logConfig is the log: section, read by newLogger.
type logConfig struct {
	Level  string `yaml:"level"`  // trace | debug | info | warn | error
	Format string `yaml:"format"` // auto | console | json
}

// defaultListen is where serve listens unless told otherwise: loopback, so
// a fresh install is not an open relay.
const defaultListen = "127.0.0.1:8484"

// Values of local_upstream and upstreams.*.local.
const (
	localAuto  = "auto"
	localTrue  = "true"
	localFalse = "false"
)

// defaultConfig is the config before the file, environment and flags: the
// packages' own defaults, spelled out so that config.example.yml can be
// checked against them, plus the few that only main uses. No upstream:
// each format goes to its provider (proxy.DefaultRoutes). DB is empty
// here: its default is in the user's data directory (defaultDBPath),
// which loadConfig fills in when nothing names a db (empty after loading
// means memory only).
func defaultConfig() config {
	return config{
		Listen: defaultListen,
		Mode:   proxy.ModeNormal,
		Upstreams: upstreamsConfig{Chat: routeConfig{Local: localAuto}, Responses: routeConfig{Local: localAuto},
			Messages: routeConfig{Local: localAuto}, Gemini: routeConfig{Local: localAuto}},
		MaxBodyBytes:      proxy.DefaultMaxBodyBytes,
		ConnectTimeout:    proxy.DefaultConnectTimeout,
		UpstreamTimeout:   proxy.DefaultUpstreamTimeout,
		StreamIdleTimeout: proxy.DefaultStreamIdleTimeout,
		ShutdownTimeout:   30 * time.Second,
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
		Prune:  pruneConfig{Enabled: true, MinTokens: rewrite.DefaultPruneMinTokens},
		Expand: expandConfig{Keep: true, MaxBytes: state.DefaultOriginalsMaxBytes, Files: localAuto},
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
		LocalUpstream: localAuto,
		UI:            admin.UIConfig{Currency: admin.DefaultCurrency},
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

// localUpstream maps local_upstream or upstreams.*.local (auto, true,
// false) to the proxy's setting: nil for auto (the proxy finds out).
func localUpstream(s string) *bool {
	switch s {
	case localTrue:
		v := true
		return &v
	case localFalse:
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
		Routes:            c.Upstreams.routes(),
		Mode:              c.Mode,
		ExpandTool:        c.Expand.Keep && c.Expand.Tool,
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
