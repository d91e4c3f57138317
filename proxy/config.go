package proxy

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/compaction"
	"github.com/ctxpress/ctxpress/internal/baseurl"

	"github.com/ctxpress/ctxpress/rewrite"
)

// Config is what the proxy needs to run. The zero value of every field
// means "use the default" written on the field.
type Config struct {
	// Upstream is the base URL a client would use against the upstream
	// directly, e.g. http://localhost:1234/v1, for every format that has
	// no route of its own (Routes). Empty: each format goes to its
	// provider (DefaultRoutes: chat completions and Responses to OpenAI,
	// Messages to Anthropic, Gemini to Google). A client's /v1/X and bare
	// /X both go to {Upstream}/X; Gemini's paths carry their version, so
	// its /v1beta/X goes to /v1beta/X on Upstream's host (under its path
	// without a last version segment).
	Upstream string
	// UpstreamAPIKey, when set, replaces the client's Authorization header
	// upstream (on the Messages API, its x-api-key, with any Authorization
	// removed; on Gemini's, its key= query parameter, else its
	// x-goog-api-key), so the provider key lives only in ctxpress; for the
	// formats without a route of their own.
	UpstreamAPIKey string
	// Routes gives a format (RouteChat, RouteResponses, RouteMessages,
	// RouteGemini) an upstream of its own, over Upstream.
	Routes map[string]Route
	// ProbeTimeout bounds the startup probe that finds out whether an
	// upstream is a local model server; 0 means DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// Mode is ModeNormal ("" too) or ModeObserve: every request is
	// forwarded exactly as sent, and ctxpress records, meters and shows
	// what it would have done.
	Mode string
	// MaxBodyBytes caps a request body; larger ones get 413. 0 means 64 MiB.
	MaxBodyBytes int
	// ConnectTimeout bounds dialing the upstream; 0 means 10s.
	ConnectTimeout time.Duration
	// UpstreamTimeout bounds the wait for the upstream's response headers
	// (a non-streamed completion arrives whole, so this is its full time);
	// 0 means 10m.
	UpstreamTimeout time.Duration
	// StreamIdleTimeout cuts a streamed answer when the upstream sends nothing
	// for this long; 0 means 5m.
	StreamIdleTimeout time.Duration
	// MaxConnsPerHost caps upstream connections, of chat requests and of
	// everything else each; 0 means 512.
	MaxConnsPerHost int
	// AdminToken, when set, is required (Authorization: Bearer …) on the
	// /ctxpress/ endpoints but healthz; when empty they answer loopback
	// clients only.
	AdminToken string
	// MetricsPublic serves /metrics to anyone who can reach the listener;
	// false (the default) applies the admin rule above to it.
	MetricsPublic bool
	// Pprof serves Go's runtime profiles under /ctxpress/debug/pprof/,
	// behind the admin rule, for a heap or CPU profile of a live process.
	Pprof bool
	// UI configures the dashboard at /ctxpress/ui.
	UI admin.UIConfig
	// AuthKeys, when not empty, are the keys a client must present
	// (Authorization: Bearer …, X-Ctxpress-Key, or x-api-key as Claude
	// Code sends ANTHROPIC_API_KEY) on every path but healthz
	// and the admin endpoints (which have AdminToken); others get 401 and
	// nothing is forwarded. The client's key is never sent upstream, and it
	// names the client's conversation namespace.
	AuthKeys []string
	// Namespace says what separates clients' conversations when AuthKeys is
	// empty (with AuthKeys, each key is a namespace): "authorization" (""
	// too) hashes the Authorization header (x-api-key when there is none:
	// Claude Code's), so two API keys never share a record; "none" puts
	// every client in one namespace; "header NAME"
	// uses that header's value. Credentials that rotate (Azure, Vertex and
	// Copilot tokens change hourly) would otherwise forget every summary
	// at each change.
	Namespace string
	// LocalUpstream says whether the upstream is a local model server whose
	// slots share one KV cache (llama-server, LM Studio), so that summary
	// calls to it and live chat requests never overlap; nil means "when
	// the upstream's host is this machine" (localhost, loopback).
	LocalUpstream *bool
	// Cost prices the models: its Models overrides; Local is set by New
	// from LocalUpstream (a local server is priced by prefill tokens).
	Cost rewrite.CostConfig
	// Compaction: when and how conversations are summarised.
	Compaction compaction.Config
	// ExpandTool offers the retrieval tool ctxpress answers itself (turn.Turns.ExpandTool); false: not offered.
	ExpandTool bool
	// Clock is the time ctxpress decides by: summariser backoff, the pause
	// after a failed store write, the times of turns, branches and events,
	// and the rate of repeated warnings. nil means time.Now. Durations it
	// measures (logs, metrics) and network timeouts use the real clock.
	Clock func() time.Time
	// Replica names this process in its events (the replica field), so a
	// dashboard behind a load balancer tells whose compaction it shows;
	// "" means the hostname (ctxpress serve defaults it to hostname:port).
	Replica string
}

// Defaults applied by withDefaults.
const (
	DefaultMaxBodyBytes      = 64 << 20
	DefaultConnectTimeout    = 10 * time.Second
	DefaultUpstreamTimeout   = 10 * time.Minute
	DefaultStreamIdleTimeout = 5 * time.Minute
	DefaultMaxConnsPerHost   = 512
)

// Defaults of CompactionConfig's fields: rewrite.Policy's, which applies
// them.
const (
	DefaultTargetRatio     = rewrite.DefaultTargetRatio
	DefaultKeepRecent      = rewrite.DefaultKeepRecent
	DefaultPrecompactRatio = rewrite.DefaultPrecompactRatio
)

// Route is one format's upstream.
type Route struct {
	// Upstream is its base URL, as Config.Upstream.
	Upstream string
	// APIKey is its upstream_api_key, as Config.UpstreamAPIKey.
	APIKey string
	// Local says whether it is a local model server (Config.LocalUpstream);
	// nil: found out.
	Local *bool
}

// The formats that take a route: their names in Config.Routes (and in
// the config file's upstreams: section).
const (
	RouteChat      = "chat"
	RouteResponses = "responses"
	RouteMessages  = "messages"
	RouteGemini    = "gemini"
)

// DefaultRoutes are the upstreams of the formats when neither Upstream
// nor a route sets theirs: each format's provider.
var DefaultRoutes = map[string]string{
	RouteChat:      "https://api.openai.com/v1",
	RouteResponses: "https://api.openai.com/v1",
	RouteMessages:  "https://api.anthropic.com/v1",
	// Gemini's paths carry their version (/v1beta/…): the base is the host.
	RouteGemini: "https://generativelanguage.googleapis.com",
}

// Modes: Config.Mode.
const (
	ModeNormal  = "normal"
	ModeObserve = "observe"
)

// DefaultNamespace is Namespace's default ("" means it too).
const DefaultNamespace = "authorization"

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.UpstreamTimeout == 0 {
		c.UpstreamTimeout = DefaultUpstreamTimeout
	}
	if c.StreamIdleTimeout == 0 {
		c.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	if c.MaxConnsPerHost == 0 {
		c.MaxConnsPerHost = DefaultMaxConnsPerHost
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Replica == "" {
		c.Replica = hostname()
	}
	return c
}

// Validate reports the first problem with c, after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.Upstream != "" {
		if _, err := baseurl.Parse(c.Upstream); err != nil {
			return err
		}
	}
	for name, r := range c.Routes {
		if _, ok := DefaultRoutes[name]; !ok {
			return fmt.Errorf("upstreams.%s: no such format; want chat, responses, messages or gemini", name)
		}
		if r.Upstream == "" {
			continue
		}
		if _, err := baseurl.Parse(r.Upstream); err != nil {
			return fmt.Errorf("upstreams.%s.base_url: %w", name, err)
		}
	}
	switch c.Mode {
	case "", ModeNormal, ModeObserve:
	default:
		return fmt.Errorf("mode %q: want normal or observe", c.Mode)
	}
	for _, k := range c.AuthKeys {
		if k == "" || strings.ContainsAny(k, " \t\r\n,") {
			return errors.New("auth.keys: a key must be non-empty, without spaces or commas")
		}
	}
	if _, err := parseNamespace(c.Namespace); err != nil {
		return err
	}
	if c.MaxBodyBytes < 0 {
		return errors.New("max_body_bytes must not be negative")
	}
	for name, d := range map[string]time.Duration{
		"connect_timeout": c.ConnectTimeout, "upstream_timeout": c.UpstreamTimeout,
		"stream_idle_timeout": c.StreamIdleTimeout,
	} {
		if d < 0 {
			return fmt.Errorf("%s must not be negative", name)
		}
	}
	for name, p := range c.Cost.Models {
		if p.Input < 0 || p.CachedInput < 0 || p.CacheWrite < 0 || p.Output < 0 {
			return fmt.Errorf("models: %s: prices must not be negative", name)
		}
	}
	return nil
}

// hostname is the default replica name.
func hostname() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "ctxpress"
}
