package proxy

import (
	"bytes"
	"strings"

	"github.com/ctxpress/ctxpress/compaction"
	"github.com/ctxpress/ctxpress/internal/baseurl"
	"github.com/ctxpress/ctxpress/internal/geminipath"
	"github.com/ctxpress/ctxpress/internal/localserver"
)

// route is where one format's requests go: its upstream client (shared
// by the formats that go to the same base URL), the key that replaces the
// client's, and what the upstream is (a local model server or not, and
// how that was found).
type route struct {
	name   string
	base   string
	up     *upstreamClient
	apiKey string
	class  localserver.Class
	// gate keeps summary calls and live requests to a local upstream
	// apart; nil for a hosted one. Formats on one server share it.
	gate *compaction.Gate
}

// routeNames are the formats that take a route, in the order the startup
// lines name them.
var routeNames = []string{RouteChat, RouteResponses, RouteMessages, RouteGemini}

// routeBase is the base URL and key of format name in cfg: its own route,
// else Upstream, else its provider's API; provider reports the last.
func routeBase(cfg Config, name string) (base, apiKey string, provider bool) {
	r := cfg.Routes[name]
	switch {
	case r.Upstream != "":
		return r.Upstream, r.APIKey, false
	case cfg.Upstream != "":
		return cfg.Upstream, firstNonEmpty(r.APIKey, cfg.UpstreamAPIKey), false
	}
	return DefaultRoutes[name], firstNonEmpty(r.APIKey, cfg.UpstreamAPIKey), true
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// newRoutes builds cfg's routes: one upstream client (and one gate, when
// local) per distinct base URL, each upstream classified once.
func newRoutes(cfg Config) (map[string]*route, error) {
	routes := map[string]*route{}
	clients := map[string]*upstreamClient{}
	classes := map[string]localserver.Class{}
	gates := map[string]*compaction.Gate{}
	for _, name := range routeNames {
		base, key, provider := routeBase(cfg, name)
		norm := strings.TrimRight(base, "/")
		up, ok := clients[norm]
		if !ok {
			var err error
			if up, err = newUpstreamClient(cfg, base); err != nil {
				return nil, err
			}
			clients[norm] = up
		}
		class, ok := classes[norm]
		if !ok {
			class = classify(cfg, name, up, provider)
			classes[norm] = class
		}
		r := &route{name: name, base: base, up: up, apiKey: key, class: class}
		if class.Local {
			if gates[norm] == nil {
				gates[norm] = compaction.NewGate()
			}
			r.gate = gates[norm]
		}
		routes[name] = r
	}
	return routes, nil
}

// classify says what a route's upstream is: as configured (the route's
// local, else local_upstream), a provider's own API, or what it answers
// a probe with.
func classify(cfg Config, name string, up *upstreamClient, provider bool) localserver.Class {
	if l := cfg.Routes[name].Local; l != nil {
		return localserver.Class{Local: *l, Kind: "as configured", Why: "upstreams." + name + ".local"}
	}
	if l := cfg.LocalUpstream; l != nil {
		return localserver.Class{Local: *l, Kind: "as configured", Why: "local_upstream"}
	}
	if provider {
		return localserver.Class{Kind: "provider", Why: "the provider's own API"}
	}
	return localserver.Classify(probe(up, cfg.ProbeTimeout), baseurl.IsLocalHost(up.url.Host))
}

// routeOf is the route of a request path (with or without /v1): the
// Messages API and under it (count_tokens) to Messages, the Responses
// API and under it (compact, input_tokens) to Responses, Gemini's
// (geminipath.Is: /v1beta/…, a model's method) to Gemini's, anything else
// (models, embeddings, chat completions) to chat's.
func (s *Server) routeOf(path []byte) *route {
	rest := withoutV1(path)
	switch {
	case messagesPath(path):
		return s.routes[RouteMessages]
	case geminipath.Is(path):
		return s.routes[RouteGemini]
	case bytes.Equal(rest, []byte(pathResponses)) || bytes.HasPrefix(rest, []byte(pathResponses+"/")):
		return s.routes[RouteResponses]
	}
	return s.routes[RouteChat]
}

// compactionRoutes are the routes as the compaction engine knows them:
// by API name, each format's summariser default, key and gate. Gemini's
// summary calls go under its version's base (v1beta, as its clients').
func compactionRoutes(routes map[string]*route) map[string]compaction.Route {
	out := map[string]compaction.Route{}
	for name, r := range routes {
		base := r.base
		if name == RouteGemini {
			base = baseurl.WithVersion(base, "v1beta")
		}
		out[name] = compaction.Route{Upstream: base, APIKey: r.apiKey, Local: r.class.Local, Gate: r.gate}
	}
	return out
}

// allLocal reports whether every route goes to a local model server (the
// bill then counts prefill tokens, not money).
func allLocal(routes map[string]*route) bool {
	for _, r := range routes {
		if !r.class.Local {
			return false
		}
	}
	return len(routes) > 0
}

// gateWaiting is how many live requests wait for a summary call to their
// local upstream, over every route's gate.
func (s *Server) gateWaiting() int64 {
	var n int64
	seen := map[*compaction.Gate]bool{}
	for _, r := range s.routes {
		if r.gate != nil && !seen[r.gate] {
			seen[r.gate] = true
			n += r.gate.WaitingNow()
		}
	}
	return n
}

// logRoutes says, once at startup, where each format goes and what that
// upstream is.
func (s *Server) logRoutes() {
	for _, name := range routeNames {
		r := s.routes[name]
		kind := "hosted"
		if r.class.Local {
			kind = "local"
		}
		s.log.Info().Str("format", name).Str("upstream", r.base).Str("upstream_is", kind).Str("found", r.class.Kind).
			Str("because", r.class.Why).Msg("route")
	}
}
