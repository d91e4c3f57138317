package main

import (
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/proxy"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"
)

// dockerGateway is the peer a container sees for a request from its host
// through a published port: the bridge's gateway, not loopback.
const dockerGateway = "172.17.0.1:51234"

// adminFrom drives the handler of a server configured from env with one
// request from peer, as a listener cannot bind a foreign address in a test.
func adminFrom(t *testing.T, env map[string]string, peer, method, uri string, header map[string]string) *fasthttp.Response {
	t.Helper()
	cfg, _, err := loadConfig(newServeFlags(), envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(cfg.proxyConfig(), zerolog.Nop(),
		proxy.Deps{Pipeline: rewrite.New(cfg.pipelineConfig()), Store: state.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(uri)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	addr, err := net.ResolveTCPAddr("tcp", peer)
	if err != nil {
		t.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, addr, nil)
	srv.Handler()(&ctx)
	var resp fasthttp.Response
	ctx.Response.CopyTo(&resp)
	return &resp
}

// From the host, through Docker's port mapping, the admin side answers
// only with the token of CTXPRESS_ADMIN_TOKEN; nothing set, it stays
// loopback-only.
func TestAdminTokenFromTheEnvironmentOpensAdminToTheHost(t *testing.T) {
	const token = "adm-from-env"
	withToken := map[string]string{"CTXPRESS_ADMIN_TOKEN": token}
	bearer := map[string]string{"Authorization": "Bearer " + token}
	for _, tc := range []struct {
		name   string
		env    map[string]string
		peer   string
		uri    string
		header map[string]string
		want   int
	}{
		{"nothing set: the host is refused", nil, dockerGateway, "/ctxpress/stats", nil, http.StatusUnauthorized},
		{"nothing set: its metrics too", nil, dockerGateway, admin.PathMetrics, nil, http.StatusUnauthorized},
		{"nothing set: loopback in the container still answers", nil, "127.0.0.1:40000", "/ctxpress/stats", nil, http.StatusOK},
		{"nothing set: healthz answers anyone", nil, dockerGateway, "/ctxpress/healthz", nil, http.StatusOK},
		{"token set: the host without it is refused", withToken, dockerGateway, "/ctxpress/stats", nil, http.StatusUnauthorized},
		{"token set: a wrong one is refused", withToken, dockerGateway, "/ctxpress/stats",
			map[string]string{"Authorization": "Bearer nope"}, http.StatusUnauthorized},
		{"token set: the host with it is served", withToken, dockerGateway, "/ctxpress/stats", bearer, http.StatusOK},
		{"token set: metrics with it", withToken, dockerGateway, admin.PathMetrics, bearer, http.StatusOK},
		{"token set: the dashboard's cookie", withToken, dockerGateway, "/ctxpress/stats",
			map[string]string{"Cookie": admin.Cookie + "=" + token}, http.StatusOK},
		{"token set: the dashboard login", withToken, dockerGateway, "/ctxpress/ui?token=" + token, nil, http.StatusSeeOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := adminFrom(t, tc.env, tc.peer, http.MethodGet, tc.uri, tc.header)
			if got := resp.StatusCode(); got != tc.want {
				t.Fatalf("GET %s from %s: %d %s, want %d", tc.uri, tc.peer, got, resp.Body(), tc.want)
			}
		})
	}
	// What a refused browser shows says how to get in.
	resp := adminFrom(t, nil, dockerGateway, http.MethodGet, "/ctxpress/stats", nil)
	if !strings.Contains(string(resp.Body()), "CTXPRESS_ADMIN_TOKEN") {
		t.Errorf("the refusal does not name CTXPRESS_ADMIN_TOKEN: %s", resp.Body())
	}
}

// The environment wins over the file, as for every CTXPRESS_* variable.
func TestAdminTokenAndLocalUpstreamFromTheEnvironment(t *testing.T) {
	path := t.TempDir() + "/ctxpress.yml"
	if err := os.WriteFile(path, []byte("admin_token: from-file\nlocal_upstream: \"false\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := loadConfig(newServeFlags(), envOf(map[string]string{"CTXPRESS_CONFIG": path}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AdminToken != "from-file" || cfg.LocalUpstream != "false" {
		t.Fatalf("file only: admin_token %q, local_upstream %q", cfg.AdminToken, cfg.LocalUpstream)
	}
	cfg, _, err = loadConfig(newServeFlags(), envOf(map[string]string{"CTXPRESS_CONFIG": path,
		"CTXPRESS_ADMIN_TOKEN": "from-env", "CTXPRESS_LOCAL_UPSTREAM": "true"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AdminToken != "from-env" || cfg.LocalUpstream != "true" {
		t.Fatalf("env over file: admin_token %q, local_upstream %q", cfg.AdminToken, cfg.LocalUpstream)
	}
	if _, _, err := loadConfig(newServeFlags(), envOf(map[string]string{"CTXPRESS_LOCAL_UPSTREAM": "yes"})); err == nil {
		t.Fatal("CTXPRESS_LOCAL_UPSTREAM=yes accepted; want auto, true or false")
	}
}
