package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/proxy"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
	"github.com/rs/zerolog"
)

// startServer runs a ctxpress server, wired from cfg as serve wires it, on
// 127.0.0.1, and returns its address and a stop function (also run at
// cleanup).
func startServer(t *testing.T, cfg config) (addr string, stop func()) {
	t.Helper()
	srv, err := proxy.New(cfg.proxyConfig(), zerolog.Nop(),
		proxy.Deps{Pipeline: rewrite.New(cfg.pipelineConfig()), Store: state.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-served
	}
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

// envOf is the environment m, over the image's own (its CTXPRESS_DB).
func envOf(m map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := m[k]; ok || k != "CTXPRESS_DB" {
			return v
		}
		return "/data/ctxpress.db"
	}
}

// healthcheck runs `ctxpress healthcheck args` with env and returns its exit
// code and output.
func healthcheck(env map[string]string, args ...string) (int, string) {
	var out, errb strings.Builder
	code := cmdHealthcheck(args, envOf(env), &out, &errb)
	return code, out.String() + errb.String()
}

func TestHealthcheckAsksTheRunningServer(t *testing.T) {
	addr, stop := startServer(t, defaultConfig())
	_, port, _ := net.SplitHostPort(addr)

	if code, out := healthcheck(nil, "--addr", addr); code != 0 || strings.TrimSpace(out) != "ok" {
		t.Fatalf("--addr %s: exit %d, %q", addr, code, out)
	}
	// In the image: no flag, the listen address from CTXPRESS_LISTEN, on
	// every interface; the check asks loopback.
	env := map[string]string{"CTXPRESS_LISTEN": "0.0.0.0:" + port}
	if code, out := healthcheck(env); code != 0 {
		t.Fatalf("CTXPRESS_LISTEN=0.0.0.0:%s: exit %d, %q", port, code, out)
	}
	// Where ctxpress listens by default, nothing does: unhealthy.
	if code, out := healthcheck(map[string]string{"CTXPRESS_LISTEN": "127.0.0.1:1"}); code != 1 || !strings.Contains(out, "127.0.0.1:1") {
		t.Fatalf("nothing listening: exit %d, %q", code, out)
	}

	stop()
	if code, out := healthcheck(env); code != 1 || !strings.Contains(out, "/ctxpress/healthz") {
		t.Fatalf("server stopped: exit %d, %q", code, out)
	}
}

// A config file's listen counts, as it does for serve; the environment wins
// over it, as it does for serve.
func TestHealthcheckReadsTheConfigFile(t *testing.T) {
	addr, _ := startServer(t, defaultConfig())
	path := t.TempDir() + "/ctxpress.yml"
	if err := os.WriteFile(path, []byte("listen: "+addr+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := healthcheck(map[string]string{"CTXPRESS_CONFIG": path}); code != 0 {
		t.Fatalf("listen from the config file: exit %d, %q", code, out)
	}
	if code, _ := healthcheck(map[string]string{"CTXPRESS_CONFIG": path, "CTXPRESS_LISTEN": "127.0.0.1:1"}); code != 1 {
		t.Fatalf("CTXPRESS_LISTEN should win over the file's listen")
	}
	if code, out := healthcheck(map[string]string{"CTXPRESS_CONFIG": path + ".missing"}); code != 1 || !strings.Contains(out, "config") {
		t.Fatalf("unreadable config: exit %d, %q", code, out)
	}
}

// Only ctxpress's own answer is healthy: an error status, or a 200 from
// something else on the port, is not.
func TestHealthcheckWantsCtxpressAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   int
	}{
		{"ok", http.StatusOK, `{"status":"ok"}`, 0},
		{"error status", http.StatusServiceUnavailable, `{"status":"ok"}`, 1},
		{"another server's page", http.StatusOK, `<html>hello</html>`, 1},
		{"another status", http.StatusOK, `{"status":"starting"}`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/ctxpress/healthz" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			addr := strings.TrimPrefix(srv.URL, "http://")
			if code, out := healthcheck(nil, "--addr", addr); code != tc.want {
				t.Fatalf("exit %d, want %d: %q", code, tc.want, out)
			}
		})
	}
}
