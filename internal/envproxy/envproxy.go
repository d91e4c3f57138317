// Package envproxy gives ctxpress's fasthttp clients the outbound proxy the
// environment names (HTTP_PROXY, HTTPS_PROXY, NO_PROXY, or their lower-case
// forms), as Go's net/http clients have it: fasthttp ignores them. Loopback
// upstreams are never proxied.
package envproxy

import (
	"net"
	"os"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpproxy"
)

// Configured reports whether the environment names a proxy.
func Configured() bool {
	for _, name := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
		if os.Getenv(name) != "" {
			return true
		}
	}
	return false
}

// Dial returns a dial function that tunnels through the environment's
// proxy (HTTP CONNECT, or SOCKS5) to the hosts it applies to and dials the
// others directly, or nil when the environment names no proxy. scheme is
// the clients' "http" or "https"; "" infers it from the port (443 is
// https). timeout bounds the dial and the CONNECT exchange.
func Dial(scheme string, timeout time.Duration) (fasthttp.DialFunc, error) {
	if !Configured() {
		return nil, nil
	}
	d := &fasthttpproxy.Dialer{Timeout: timeout, ConnectTimeout: timeout, DialDualStack: true}
	var proxied fasthttp.DialFunc
	var err error
	if scheme == "" {
		proxied, err = d.GetDialFunc(true)
	} else {
		proxied, err = d.GetDialFuncForTLS(true, scheme == "https")
	}
	if err != nil {
		return nil, err
	}
	// fasthttpproxy decides once for every host when NO_PROXY is empty, so
	// loopback (a local model server) is kept off the proxy here.
	direct := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	return func(addr string) (net.Conn, error) {
		if isLoopback(addr) {
			return direct.Dial("tcp", addr)
		}
		return proxied(addr)
	}, nil
}

// isLoopback reports whether addr (host:port) names this machine.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
