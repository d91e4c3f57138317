package proxy

import (
	"crypto/subtle"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/ctxpress/ctxpress/internal/geminipath"
	"github.com/ctxpress/ctxpress/internal/hop"
	"github.com/ctxpress/ctxpress/state"
)

// HeaderClientKey carries a client's ctxpress key when its Authorization
// header holds something else (its own provider key, say).
const HeaderClientKey = "X-Ctxpress-Key"

// HeaderAPIKey is the credential header of Anthropic's API, where Claude
// Code and the Anthropic SDKs send their key (ANTHROPIC_API_KEY).
const HeaderAPIKey = "X-Api-Key"

const codeInvalidKey = "invalid_api_key"

// authenticate checks the client's key when cfg.AuthKeys is set, answers 401
// when it is missing or wrong (nothing is forwarded; the request ends, in
// finish, as every other), and sets x.credential,
// the value that names the client's conversation namespace.
//
// A client presents its key in X-Ctxpress-Key, else as "Authorization:
// Bearer <key>", else in x-api-key (Claude Code: ANTHROPIC_API_KEY, or
// ANTHROPIC_AUTH_TOKEN for the Bearer form), else in x-goog-api-key
// (Gemini CLI: GEMINI_API_KEY) or Gemini's key= query parameter. X-Ctxpress-Key, when sent,
// is the key; without it the first of the other two holding a configured
// key is. Every header holding a ctxpress key is removed before the
// request is forwarded: a ctxpress key is not a provider key. The others
// go upstream as sent (unless upstream_api_key replaces them). Every
// spelling of one key gives the same namespace, and two keys never share
// one.
func (s *Server) authenticate(ctx *fasthttp.RequestCtx, x *exchange) bool {
	h := &ctx.Request.Header
	if len(s.cfg.AuthKeys) == 0 {
		h.Del(HeaderClientKey) // ctxpress's own header, never the upstream's
		x.credential = s.namespace.credential(x.credential[:0], &ctx.Request)
		return true
	}
	var key string
	var ok bool
	if v := h.Peek(HeaderClientKey); v != nil {
		key, ok = s.matchKey(v)
	} else if key, ok = s.matchKey(bearerToken(h.Peek(fasthttp.HeaderAuthorization))); !ok {
		if key, ok = s.matchKey(h.Peek(HeaderAPIKey)); !ok {
			if key, ok = s.matchKey(h.Peek(geminipath.HeaderAPIKey)); !ok {
				key, ok = s.matchKey([]byte(geminipath.KeyOf(nil, ctx.URI().QueryString())))
			}
		}
	}
	if !ok {
		x.status = fasthttp.StatusUnauthorized
		writeClientError(ctx, fasthttp.StatusUnauthorized, codeInvalidKey,
			"missing or unknown client key: send one of ctxpress's auth.keys as \"Authorization: Bearer <key>\", \"x-api-key: <key>\", \"x-goog-api-key: <key>\" or \""+HeaderClientKey+": <key>\"")
		ctx.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer realm="ctxpress"`)
		s.finish(x)
		return false
	}
	h.Del(HeaderClientKey)
	if _, own := s.matchKey(bearerToken(h.Peek(fasthttp.HeaderAuthorization))); own {
		h.Del(fasthttp.HeaderAuthorization)
	}
	if _, own := s.matchKey(h.Peek(HeaderAPIKey)); own {
		h.Del(HeaderAPIKey)
	}
	if _, own := s.matchKey(h.Peek(geminipath.HeaderAPIKey)); own {
		h.Del(geminipath.HeaderAPIKey)
	}
	if _, own := s.matchKey([]byte(geminipath.KeyOf(nil, ctx.URI().QueryString()))); own {
		ctx.URI().SetQueryStringBytes(geminipath.WithoutKey(nil, ctx.URI().QueryString()))
		h.SetRequestURIBytes(ctx.URI().RequestURI()) // what a summary call reads its credentials from
	}
	// The namespace hashes what a client would have sent as Authorization,
	// so it is the same whichever header carried the key.
	x.credential = append(append(x.credential[:0], "Bearer "...), key...)
	return true
}

// matchKey returns the configured key equal to presented. Every key is
// compared in constant time, so timing tells nothing about which nearly
// matched.
func (s *Server) matchKey(presented []byte) (string, bool) {
	found := -1
	for i, k := range s.cfg.AuthKeys {
		if subtle.ConstantTimeCompare(presented, []byte(k)) == 1 {
			found = i
		}
	}
	if found < 0 || len(presented) == 0 {
		return "", false
	}
	return s.cfg.AuthKeys[found], true
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// value (scheme case-insensitive), or nil.
func bearerToken(v []byte) []byte {
	const scheme = "bearer "
	if len(v) <= len(scheme) {
		return nil
	}
	for i := range len(scheme) {
		c := v[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != scheme[i] {
			return nil
		}
	}
	return hop.TrimOWS(v[len(scheme):])
}

// namespaceMode is Config.Namespace, parsed.
type namespaceMode struct {
	header string // the header whose value names the namespace; "" with none
	none   bool
}

// parseNamespace reads "authorization" (or ""), "none" or "header NAME".
func parseNamespace(s string) (namespaceMode, error) {
	switch f := strings.Fields(s); {
	case len(f) == 0 || (len(f) == 1 && strings.EqualFold(f[0], "authorization")):
		return namespaceMode{header: fasthttp.HeaderAuthorization}, nil
	case len(f) == 1 && strings.EqualFold(f[0], "none"):
		return namespaceMode{none: true}, nil
	case len(f) == 2 && strings.EqualFold(f[0], "header"):
		return namespaceMode{header: f[1]}, nil
	}
	return namespaceMode{}, fmt.Errorf("namespace %q: want authorization, none, or header NAME", s)
}

// credential appends what names the namespace of a client's request to
// dst: the configured header's value (empty when absent), or nothing for
// none. The default, Authorization, falls back on x-api-key for a client
// that sends no Authorization (Claude Code and the Anthropic SDKs with an
// API key), then on Gemini's key, in x-goog-api-key or the key= query
// parameter (one key, one namespace, wherever it was sent).
func (m namespaceMode) credential(dst []byte, req *fasthttp.Request) []byte {
	h := &req.Header
	switch {
	case m.none:
		return dst
	case m.header != fasthttp.HeaderAuthorization:
		// Apart from every Authorization value: a header's value never
		// names the namespace of a client that sends it as its key.
		dst = append(append(append(dst, "header "...), m.header...), 0)
	case len(h.Peek(fasthttp.HeaderAuthorization)) > 0:
	case len(h.Peek(HeaderAPIKey)) > 0:
		// Apart from every Authorization value too, as the header form is.
		return append(append(dst, "x-api-key\x00"...), h.Peek(HeaderAPIKey)...)
	case len(h.Peek(geminipath.HeaderAPIKey)) > 0:
		return append(append(dst, "x-goog-api-key\x00"...), h.Peek(geminipath.HeaderAPIKey)...)
	default:
		if key, ok := geminipath.QueryKey(req.URI().QueryString()); ok && key != "" {
			return append(append(dst, "x-goog-api-key\x00"...), key...)
		}
	}
	return append(dst, h.Peek(m.header)...)
}

// namespaceMemo remembers the namespace of the last credential it was
// asked about: a proxy mostly serves one client key, and the namespace is
// a sha256 of it (state.Namespace), which every identified request made
// again, with an allocation for its digits.
type namespaceMemo struct {
	last atomic.Pointer[namespaced]
}

type namespaced struct{ credential, namespace string }

// of is state.Namespace(credential).
func (m *namespaceMemo) of(credential []byte) string {
	if p := m.last.Load(); p != nil && p.credential == string(credential) {
		return p.namespace
	}
	ns := state.Namespace(credential)
	m.last.Store(&namespaced{credential: string(credential), namespace: ns})
	return ns
}
