package main

import (
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ctxpress/ctxpress/compaction"
	"github.com/ctxpress/ctxpress/internal/baseurl"
	"github.com/ctxpress/ctxpress/proxy"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// valueError is a value outside what its key takes. Path is the key's
// YAML path, so loadConfig can say where the value came from.
type valueError struct {
	Path string
	Msg  string // the whole message, starting with the path
}

func (e *valueError) Error() string { return e.Msg }

// checker keeps the first problem found.
type checker struct{ err *valueError }

func (ch *checker) fail(path, format string, args ...any) {
	if ch.err == nil {
		ch.err = &valueError{Path: path, Msg: path + fmt.Sprintf(format, args...)}
	}
}

// atLeast checks an integer against its least value; note, when not
// empty, says what the least value means.
func atLeast[T int | int64](ch *checker, path string, v, least T, note string) {
	if v < least {
		if note != "" {
			note = " (" + note + ")"
		}
		ch.fail(path, " must be ≥ %d%s, got %d", least, note, v)
	}
}

// notNegative checks a duration that may be 0 (which means its default,
// or none: the field's comment in config.example.yml says which).
func (ch *checker) notNegative(path string, d time.Duration) {
	if d < 0 {
		ch.fail(path, " must be ≥ 0, got %v", d)
	}
}

func (ch *checker) positive(path string, d time.Duration) {
	if d <= 0 {
		ch.fail(path, " must be > 0, got %v", d)
	}
}

// fraction checks a ratio (NaN fails too).
func (ch *checker) fraction(path string, v float64) {
	if !(v >= 0 && v <= 1) {
		ch.fail(path, " must be between 0 and 1, got %v", v)
	}
}

func (ch *checker) price(path string, v float64) {
	if !(v >= 0) || math.IsInf(v, 0) {
		ch.fail(path, " must be ≥ 0, got %v", v)
	}
}

// oneOf checks an enumeration and lists its values.
func (ch *checker) oneOf(path, v string, values ...string) {
	for _, ok := range values {
		if v == ok {
			return
		}
	}
	ch.fail(path, " %q: want %s", v, orList(values))
}

// baseURL checks an upstream base URL ("" allowed: none).
func (ch *checker) baseURL(path, v string) {
	if v == "" {
		return
	}
	if _, err := baseurl.Parse(v); err != nil {
		why := strings.TrimPrefix(err.Error(), fmt.Sprintf("upstream %q: ", v))
		ch.fail(path, " %q: %s; want a base URL as a client would use it, e.g. http://localhost:1234/v1", v, why)
	}
}

// checkConfig reports the first value of c outside what its key takes,
// in the order of config.example.yml, naming the key by its YAML path.
// The packages validate their own configs too (loadConfig asks them);
// this says it in the file's terms, for every number, duration and
// enumeration.
func checkConfig(c config) error {
	var ch checker
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		ch.fail("listen", " %q: want host:port, e.g. 127.0.0.1:8484 (0.0.0.0:8484 for every interface)", c.Listen)
	}
	ch.oneOf("mode", c.Mode, proxy.ModeNormal, proxy.ModeObserve)
	ch.baseURL("upstream", c.Upstream)
	for _, r := range []struct {
		name string
		r    routeConfig
	}{{proxy.RouteChat, c.Upstreams.Chat}, {proxy.RouteResponses, c.Upstreams.Responses}, {proxy.RouteMessages, c.Upstreams.Messages},
		{proxy.RouteGemini, c.Upstreams.Gemini}} {
		ch.baseURL("upstreams."+r.name+".base_url", r.r.BaseURL)
		ch.oneOf("upstreams."+r.name+".local", r.r.Local, localAuto, localTrue, localFalse)
	}
	atLeast(&ch, "max_body_bytes", c.MaxBodyBytes, 0, "")
	ch.notNegative("connect_timeout", c.ConnectTimeout)
	ch.notNegative("upstream_timeout", c.UpstreamTimeout)
	ch.notNegative("stream_idle_timeout", c.StreamIdleTimeout)
	ch.notNegative("shutdown_timeout", c.ShutdownTimeout)
	ch.notNegative("retention", c.Retention)
	checkState(&ch, c.State)
	ch.oneOf("identify", c.Identify, rewrite.ModeAuto, rewrite.ModeHeader)
	for _, h := range c.ConversationHdrs {
		if h == "" || strings.ContainsAny(h, " :\t\r\n") {
			ch.fail("conversation_headers", ": %q is not a header name", h)
		}
	}
	atLeast(&ch, "cache_bytes", c.CacheBytes, 0, "")
	atLeast(&ch, "squash.min_bytes", c.Squash.MinBytes, 0, "")
	atLeast(&ch, "squash.read_max_bytes", c.Squash.ReadMaxBytes, -1, "-1: reads are squashed like any output")
	atLeast(&ch, "dedup.min_tokens", c.Dedup.MinTokens, -1, "-1: no minimum")
	atLeast(&ch, "prune.min_tokens", c.Prune.MinTokens, -1, "-1: any result its line is shorter than")
	atLeast(&ch, "expand.max_bytes", c.Expand.MaxBytes, -1, "-1: no cap")
	checkCompaction(&ch, c.Compaction)
	atLeast(&ch, "max_history_messages", c.MaxHistory, 0, "")
	if u := c.Events.WebhookURL; u != "" {
		if p, err := url.Parse(u); err != nil || p.Host == "" || p.Scheme != "http" && p.Scheme != "https" {
			ch.fail("events.webhook_url", " %q: want an http:// or https:// URL", u)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Models)) {
		m := c.Models[name]
		atLeast(&ch, "models."+name+".context_window", m.ContextWindow, 0, "0: the built-in table's")
		if p := m.Prices; p != nil {
			ch.price("models."+name+".prices.input", p.Input)
			ch.price("models."+name+".prices.cached_input", p.CachedInput)
			ch.price("models."+name+".prices.cache_write", p.CacheWrite)
			ch.price("models."+name+".prices.output", p.Output)
		}
	}
	atLeast(&ch, "default_context_window", c.DefaultWindow, 0, "")
	for _, k := range c.Auth.Keys {
		if k == "" || strings.ContainsAny(k, " \t\r\n,") {
			ch.fail("auth.keys", ": a key must be non-empty, without spaces or commas")
		}
	}
	if f := strings.Fields(c.Namespace); !(len(f) == 1 && (strings.EqualFold(f[0], "authorization") || strings.EqualFold(f[0], "none")) ||
		len(f) == 2 && strings.EqualFold(f[0], "header")) {
		ch.fail("namespace", " %q: want authorization, none or header NAME (e.g. header X-User)", c.Namespace)
	}
	ch.oneOf("local_upstream", c.LocalUpstream, localAuto, localTrue, localFalse)
	ch.oneOf("expand.files", c.Expand.Files, localAuto, localTrue, localFalse)
	if u := c.Expand.URL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		ch.fail("expand.url", " %q: want the base URL agents reach ctxpress at (http://host:port)", u)
	}
	ch.oneOf("log.level", c.Log.Level, "trace", "debug", "info", "warn", "error")
	ch.oneOf("log.format", c.Log.Format, "auto", "console", "json")
	if ch.err == nil {
		return nil
	}
	return ch.err
}

func checkState(ch *checker, s stateConfig) {
	ch.oneOf("state.backend", s.Backend, backendBolt, backendMemory, backendRedis)
	if s.Backend == backendRedis {
		if s.URL == "" {
			ch.fail("state.url", " is needed with state.backend redis (or set CTXPRESS_REDIS_URL), e.g. redis://localhost:6379/0")
		} else if err := state.CheckRedisURL(s.URL); err != nil {
			ch.fail("state.url", ": %v", err)
		}
	}
	ch.positive("state.read_timeout", s.ReadTimeout)
	ch.positive("state.write_timeout", s.WriteTimeout)
}

func checkCompaction(ch *checker, cc compactionCfg) {
	atLeast(ch, "compaction.threshold_tokens", cc.ThresholdTokens, 0, "")
	ch.fraction("compaction.threshold_ratio", cc.ThresholdRatio)
	ch.fraction("compaction.target_ratio", cc.TargetRatio)
	atLeast(ch, "compaction.min_reclaim_tokens", cc.MinReclaimTokens, 0, "")
	atLeast(ch, "compaction.keep_recent", cc.KeepRecent, 0, "")
	atLeast(ch, "compaction.keep_recent_tokens", cc.KeepRecentTokens, 0, "")
	ch.fraction("compaction.precompact_ratio", cc.PrecompactRatio)
	ch.oneOf("compaction.summary_placement", cc.SummaryPlacement, rewrite.PlacementAuto, rewrite.PlacementSystem, rewrite.PlacementUser)
	s := cc.Summarizer
	ch.baseURL("compaction.summarizer.base_url", s.BaseURL)
	if s.API != "" {
		ch.oneOf("compaction.summarizer.api", s.API, compaction.APIChat, compaction.APIResponses, compaction.APIMessages, compaction.APIGemini)
		if s.BaseURL == "" {
			ch.fail("compaction.summarizer.api", " %q: only with compaction.summarizer.base_url (without one, the summary call speaks the conversation's own API)", s.API)
		}
	}
	ch.notNegative("compaction.summarizer.timeout", s.Timeout)
	atLeast(ch, "compaction.summarizer.max_tokens", s.MaxTokens, 0, "")
}
