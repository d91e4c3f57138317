// Package baseurl reads the base URLs ctxpress forwards to (the upstream,
// a summariser): scheme, host and the path every forwarded path is
// appended to.
package baseurl

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/ctxpress/ctxpress/internal/geminipath"
)

// URL is a parsed base URL: scheme and host, and the base path every
// forwarded path is appended to (no trailing slash).
type URL struct {
	Scheme string
	Host   string
	Base   string
}

// Parse reads raw as a base URL: http or https, a host, no query,
// fragment or credentials.
func Parse(raw string) (URL, error) {
	if raw == "" {
		return URL{}, errors.New("upstream is required (e.g. http://localhost:1234/v1)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return URL{}, fmt.Errorf("upstream %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return URL{}, fmt.Errorf("upstream %q: scheme must be http or https", raw)
	}
	if u.Host == "" {
		return URL{}, fmt.Errorf("upstream %q: no host", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return URL{}, fmt.Errorf("upstream %q: must not carry a query, fragment or credentials", raw)
	}
	return URL{Scheme: u.Scheme, Host: u.Host, Base: strings.TrimRight(u.EscapedPath(), "/")}, nil
}

// Target maps a client's request path to the upstream URL: /v1/X and /X
// both become {base}/X, so clients configured with or without /v1 work
// alike.
func (u URL) Target(dst []byte, path, query []byte) []byte {
	rest := path
	if len(rest) >= 3 && string(rest[:3]) == "/v1" && (len(rest) == 3 || rest[3] == '/') {
		rest = rest[3:]
	}
	dst = append(dst, u.Scheme...)
	dst = append(dst, "://"...)
	dst = append(dst, u.Host...)
	dst = append(dst, u.Base...)
	dst = append(dst, rest...)
	if len(query) > 0 {
		dst = append(dst, '?')
		dst = append(dst, query...)
	}
	return dst
}

// WithVersion is the base URL raw with version as its last path segment,
// in place of a version segment it ends with (http://host/v1 with v1beta
// is http://host/v1beta): where an API whose paths carry their version
// (Gemini's) is served, for a caller that appends the path under it.
func WithVersion(raw, version string) string {
	base := strings.TrimRight(raw, "/")
	if i := strings.LastIndexByte(base, '/'); i >= 0 && i > strings.Index(base, "://")+2 && geminipath.Versioned([]byte(base[i+1:])) {
		base = base[:i]
	}
	return base + "/" + version
}

// TargetVersioned maps the path of an API whose paths carry their own
// version (Gemini's /v1beta/… and /v1/…) to the upstream URL: the base's
// last segment, when it is a version (http://host/v1), is left out and the
// path appended whole, so that one base URL given for every format serves
// Gemini's /v1beta/… from the host's /v1beta/…, not from /v1/v1beta/….
func (u URL) TargetVersioned(dst []byte, path, query []byte) []byte {
	base := u.Base
	if i := strings.LastIndexByte(base, '/'); i >= 0 && geminipath.Versioned([]byte(base[i+1:])) {
		base = base[:i]
	}
	dst = append(dst, u.Scheme...)
	dst = append(dst, "://"...)
	dst = append(dst, u.Host...)
	dst = append(dst, base...)
	dst = append(dst, path...)
	if len(query) > 0 {
		dst = append(dst, '?')
		dst = append(dst, query...)
	}
	return dst
}

// Same reports whether two base URLs name the same upstream.
func Same(a, b string) bool {
	ua, erra := Parse(a)
	ub, errb := Parse(b)
	return erra == nil && errb == nil && ua.Scheme == ub.Scheme && strings.EqualFold(ua.Host, ub.Host) && ua.Base == ub.Base
}

// IsLocalHost reports whether host (a URL's host, port optional) is this
// machine: localhost or a loopback address.
func IsLocalHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
