package proxy

import (
	"crypto/subtle"
	"fmt"
	"strings"

	"github.com/valyala/fasthttp"
)

// HeaderClientKey carries a client's ctxpress key when its Authorization
// header holds something else (its own provider key, say).
const HeaderClientKey = "X-Ctxpress-Key"

const codeInvalidKey = "invalid_api_key"

// authenticate checks the client's key when cfg.AuthKeys is set, answers 401
// when it is missing or wrong (nothing is forwarded; the request ends, in
// finish, as every other), and sets x.credential,
// the value that names the client's conversation namespace.
//
// The header that carried the key is removed from the request before it is
// forwarded: a ctxpress key is not a provider key. A key in X-Ctxpress-Key
// wins over Authorization, which then goes upstream as sent (unless
// upstream_api_key replaces it). Both spellings of one key give the same
// namespace, and two keys never share one.
func (s *Server) authenticate(ctx *fasthttp.RequestCtx, x *exchange) bool {
	h := &ctx.Request.Header
	viaHeader := h.Peek(HeaderClientKey)
	if len(s.cfg.AuthKeys) == 0 {
		if viaHeader != nil {
			h.Del(HeaderClientKey) // ctxpress's own header, never the upstream's
		}
		x.credential = s.namespace.credential(x.credential[:0], h)
		return true
	}
	var presented []byte
	if viaHeader != nil {
		presented = viaHeader
	} else {
		presented = bearerToken(h.Peek(fasthttp.HeaderAuthorization))
	}
	key, ok := s.matchKey(presented)
	if !ok {
		x.status = fasthttp.StatusUnauthorized
		writeError(ctx, fasthttp.StatusUnauthorized, codeInvalidKey,
			"missing or unknown client key: send one of ctxpress's auth.keys as \"Authorization: Bearer <key>\" or \""+HeaderClientKey+": <key>\"")
		ctx.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer realm="ctxpress"`)
		s.finish(x)
		return false
	}
	if viaHeader != nil {
		h.Del(HeaderClientKey)
	} else {
		h.Del(fasthttp.HeaderAuthorization)
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
	return trimSpace(v[len(scheme):])
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

// credential appends what names a client's namespace to dst: the
// configured header's value (empty when absent), or nothing for none.
func (m namespaceMode) credential(dst []byte, h *fasthttp.RequestHeader) []byte {
	switch {
	case m.none:
		return dst
	case m.header != fasthttp.HeaderAuthorization:
		// Apart from every Authorization value: a header's value never
		// names the namespace of a client that sends it as its key.
		dst = append(append(append(dst, "header "...), m.header...), 0)
	}
	return append(dst, h.Peek(m.header)...)
}
