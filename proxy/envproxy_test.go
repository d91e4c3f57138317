package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/ctxpress/ctxpress/internal/openaitest"
)

// connectProxy is an outbound HTTP proxy on loopback that tunnels every
// CONNECT to one address, whatever host was asked for, and records the
// hosts asked for.
type connectProxy struct {
	addr   string
	mu     sync.Mutex
	asked  []string // guarded by mu
	target string
}

func startConnectProxy(t *testing.T, target string) *connectProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &connectProxy{addr: ln.Addr().String(), target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.tunnel(c)
		}
	}()
	return p
}

func (p *connectProxy) tunnel(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return
	}
	for { // the rest of the CONNECT request's header
		h, err := br.ReadString('\n')
		if err != nil {
			return
		}
		if h == "\r\n" {
			break
		}
	}
	method, rest, _ := strings.Cut(line, " ")
	host, _, _ := strings.Cut(rest, " ")
	if method != http.MethodConnect {
		io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	p.mu.Lock()
	p.asked = append(p.asked, host)
	p.mu.Unlock()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer up.Close()
	io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	go io.Copy(up, br)
	io.Copy(c, up)
}

func (p *connectProxy) hosts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.asked...)
}

// Behind a corporate proxy: with HTTPS_PROXY/HTTP_PROXY set, the upstream
// (and the summariser) are reached through it, as with any net/http client;
// a loopback upstream is still reached directly.
func TestUpstreamThroughEnvironmentProxy(t *testing.T) {
	up := openaitest.New(t)
	outbound := startConnectProxy(t, strings.TrimPrefix(up.URL, "http://"))
	for _, name := range []string{"HTTPS_PROXY", "https_proxy", "http_proxy", "NO_PROXY", "no_proxy"} {
		t.Setenv(name, "")
	}
	t.Setenv("HTTP_PROXY", "http://"+outbound.addr)

	deps, _ := chatDeps(t)
	// A name only the proxy can reach: ctxpress never resolves it.
	p := startProxyWith(t, Config{Upstream: "http://api.provider.test/v1"}, deps)
	status, body, _ := send(t, "POST", p.URL+"/v1/chat/completions",
		`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, map[string]string{"Content-Type": "application/json"})
	if status != http.StatusOK || !strings.Contains(body, up.Reply) {
		t.Fatalf("through the proxy: %d %s", status, body)
	}
	if got := outbound.hosts(); len(got) == 0 || got[0] != "api.provider.test:80" {
		t.Fatalf("the proxy was asked for %q", got)
	}

	// A loopback upstream is not proxied.
	before := len(outbound.hosts())
	deps2, _ := chatDeps(t)
	direct := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps2)
	if status, body, _ := send(t, "GET", direct.URL+"/v1/models", "", nil); status != http.StatusOK {
		t.Fatalf("loopback upstream: %d %s", status, body)
	}
	if got := outbound.hosts(); len(got) != before {
		t.Fatalf("a loopback upstream went through the proxy: %q", got[before:])
	}
}
