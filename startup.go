package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// listenError says why serve cannot listen on addr and how to pick
// another address; ctxpressThere is whether a ctxpress answers there.
func listenError(addr string, err error, ctxpressThere bool) error {
	other := fmt.Sprintf("pick another address with --listen (env CTXPRESS_LISTEN), e.g. --listen %s", nextPort(addr))
	switch {
	case errors.Is(err, syscall.EADDRINUSE) && ctxpressThere:
		return fmt.Errorf("cannot listen on %s: a ctxpress already serves there (use it, or stop it); to run a second one, %s", addr, other)
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("cannot listen on %s: the address is already in use by another program; stop it, or %s", addr, other)
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("cannot listen on %s: permission denied (ports below 1024 need privileges); %s", addr, other)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Errorf("cannot listen on %s: no network interface of this machine has that address; pick another with --listen (env CTXPRESS_LISTEN), e.g. --listen %s, or 0.0.0.0:8484 for every interface", addr, defaultListen)
	}
	return fmt.Errorf("cannot listen on %s: %w; %s", addr, err, other)
}

// nextPort is addr with the next port, or the default listen address when
// addr has no port to add to.
func nextPort(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || n <= 0 || n >= 65535 {
		return defaultListen
	}
	return net.JoinHostPort(host, strconv.Itoa(n+1))
}

// answersAsCtxpress reports whether a ctxpress answers at the listen
// address addr: its healthz endpoint, asked once and briefly.
func answersAsCtxpress(addr string) bool {
	client := http.Client{Timeout: 500 * time.Millisecond}
	resp, err := client.Get(serverURL(addr) + "/ctxpress/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	// 401: a ctxpress with admin_token asked from beyond loopback.
	return resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized
}

// dbOpenError says why the db at path cannot be opened and what to do.
func dbOpenError(path string, err error) error {
	elsewhere := `pass --db FILE (env CTXPRESS_DB) for another file, or --db "" to keep state in memory only`
	dir := filepath.Dir(path)
	switch {
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return fmt.Errorf("cannot open the db %s: permission denied; let this user write the directory %s (e.g. chown $USER %s; chmod u+rwx %s) and the file, or %s", path, dir, dir, dir, elsewhere)
	case errors.Is(err, state.ErrLocked):
		return fmt.Errorf("cannot open the db %s: another process holds it (a ctxpress already serving from it?); stop that one, or give this one its own db: %s", path, elsewhere)
	case errors.Is(err, state.ErrNotDatabase):
		return fmt.Errorf("cannot open the db %s: it is not a ctxpress db (%v); %s", path, err, elsewhere)
	}
	return fmt.Errorf("cannot open the db %s: %w; %s", path, err, elsewhere)
}

// dashboardURL is where the dashboard of a server listening on addr is.
func dashboardURL(addr string) string { return serverURL(addr) + "/ctxpress/ui" }

// storeSummary says where conversation records are kept, for the startup
// line: the db file's absolute path, memory, or the Redis server (without
// its credentials).
func storeSummary(c config) string {
	switch {
	case c.State.Backend == backendRedis:
		if u, err := url.Parse(c.State.URL); err == nil {
			return "redis " + u.Host + u.Path
		}
		return "redis"
	case c.State.Backend == backendMemory || c.DB == "":
		return "memory (nothing kept across restarts)"
	}
	if abs, err := filepath.Abs(c.DB); err == nil {
		return abs
	}
	return c.DB
}

// triggerSummary is the compaction trigger in effect, for the startup
// line.
func triggerSummary(c config) string {
	cc := c.Compaction
	switch {
	case !cc.Enabled && c.MaxHistory > 0:
		return fmt.Sprintf("compaction off; history capped at %d messages", c.MaxHistory)
	case !cc.Enabled:
		return "compaction off"
	case cc.ThresholdTokens > 0:
		return fmt.Sprintf("%d tokens", cc.ThresholdTokens)
	}
	ratio := cc.ThresholdRatio
	if ratio == 0 {
		ratio = rewrite.DefaultThresholdRatio
	}
	window := c.DefaultWindow
	if window == 0 {
		window = rewrite.DefaultContextWindow
	}
	return fmt.Sprintf("%g of the model's context window (%d tokens for a model of unknown window)", ratio, int(ratio*float64(window)))
}
