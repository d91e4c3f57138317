package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"

	"github.com/ctxpress/ctxpress/state"
	"github.com/rs/zerolog"
)

func TestListenErrorSaysWhatToDo(t *testing.T) {
	inUse := &net.OpError{Op: "listen", Net: "tcp", Err: &os.SyscallError{Syscall: "bind", Err: syscall.EADDRINUSE}}
	for _, r := range []struct {
		rule     string
		addr     string
		err      error
		ctxpress bool
		want     string
	}{
		{"another program on the port", "127.0.0.1:8484", inUse, false,
			"cannot listen on 127.0.0.1:8484: the address is already in use by another program; stop it, or pick another address with --listen (env CTXPRESS_LISTEN), e.g. --listen 127.0.0.1:8485"},
		{"a ctxpress on the port", "127.0.0.1:8484", inUse, true,
			"cannot listen on 127.0.0.1:8484: a ctxpress already serves there (use it, or stop it); to run a second one, pick another address with --listen (env CTXPRESS_LISTEN), e.g. --listen 127.0.0.1:8485"},
		{"a privileged port", "0.0.0.0:80", syscall.EACCES, false,
			"cannot listen on 0.0.0.0:80: permission denied (ports below 1024 need privileges); pick another address with --listen (env CTXPRESS_LISTEN), e.g. --listen 0.0.0.0:81"},
		{"an address of another machine", "192.0.2.1:8484", syscall.EADDRNOTAVAIL, false,
			"cannot listen on 192.0.2.1:8484: no network interface of this machine has that address; pick another with --listen (env CTXPRESS_LISTEN), e.g. --listen 127.0.0.1:8484, or 0.0.0.0:8484 for every interface"},
		{"anything else keeps its reason", "[::1]:9000", errors.New("boom"), false,
			"cannot listen on [::1]:9000: boom; pick another address with --listen (env CTXPRESS_LISTEN), e.g. --listen [::1]:9001"},
	} {
		if got := listenError(r.addr, r.err, r.ctxpress).Error(); got != r.want {
			t.Errorf("%s:\n got: %s\nwant: %s", r.rule, got, r.want)
		}
	}
}

// On an address a real listener holds, start says which address, whether
// a ctxpress is the one there, and how to pick another.
func TestStartOnAnAddressInUse(t *testing.T) {
	for _, r := range []struct {
		rule    string
		healthz int
		want    string
	}{
		{"another program", http.StatusNotFound, "the address is already in use by another program; stop it, or pick another address with --listen"},
		{"a ctxpress", http.StatusOK, "a ctxpress already serves there (use it, or stop it); to run a second one, pick another address with --listen"},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.URL.Path == "/ctxpress/healthz" {
				w.WriteHeader(r.healthz)
				return
			}
			http.NotFound(w, req)
		})}
		go srv.Serve(ln)
		cfg := defaultConfig()
		cfg.Listen, cfg.Upstream = ln.Addr().String(), "http://127.0.0.1:1/v1"
		_, err = start(cfg, zerolog.Nop())
		srv.Close()
		port := ln.Addr().(*net.TCPAddr).Port
		want := fmt.Sprintf("cannot listen on %s: %s (env CTXPRESS_LISTEN), e.g. --listen 127.0.0.1:%d", ln.Addr(), r.want, port+1)
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n got: %v\nwant: %s", r.rule, err, want)
		}
	}
}

func TestDBOpenErrorSaysWhatToDo(t *testing.T) {
	const elsewhere = `pass --db FILE (env CTXPRESS_DB) for another file, or --db "" to keep state in memory only`
	perm := &fs.PathError{Op: "open", Path: "/srv/ctx/ctxpress.db", Err: syscall.EACCES}
	for _, r := range []struct {
		rule string
		err  error
		want string
	}{
		{"permission denied names the directory and the fix", perm,
			"cannot open the db /srv/ctx/ctxpress.db: permission denied; let this user write the directory /srv/ctx (e.g. chown $USER /srv/ctx; chmod u+rwx /srv/ctx) and the file, or " + elsewhere},
		{"locked by another process", fmt.Errorf("x: %w", state.ErrLocked),
			"cannot open the db /srv/ctx/ctxpress.db: another process holds it (a ctxpress already serving from it?); stop that one, or give this one its own db: " + elsewhere},
		{"not a db", fmt.Errorf("%w: garbage", state.ErrNotDatabase),
			"cannot open the db /srv/ctx/ctxpress.db: it is not a ctxpress db (not a ctxpress database: garbage); " + elsewhere},
		{"anything else keeps its reason", errors.New("disk on fire"),
			"cannot open the db /srv/ctx/ctxpress.db: disk on fire; " + elsewhere},
	} {
		if got := dbOpenError("/srv/ctx/ctxpress.db", r.err).Error(); got != r.want {
			t.Errorf("%s:\n got: %s\nwant: %s", r.rule, got, r.want)
		}
	}
}

// A db in a directory this user cannot write: the message names the path
// and the fix. Root writes anywhere, so as root the case cannot happen
// and is skipped.
func TestDBInADirectoryWithoutPermission(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: chmod does not deny root")
	}
	dir := filepath.Join(t.TempDir(), "locked")
	if err := os.Mkdir(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.DB = filepath.Join(dir, "ctxpress.db")
	_, err := openStore(cfg, zerolog.Nop())
	want := "cannot open the db " + cfg.DB + ": permission denied; let this user write the directory " + dir
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "--db FILE") {
		t.Fatalf("got %v\nwant %s…", err, want)
	}
}

func TestTriggerSummary(t *testing.T) {
	for _, r := range []struct {
		rule string
		edit func(*config)
		want string
	}{
		{"the default: a share of the window", func(*config) {}, "0.8 of the model's context window (102400 tokens for a model of unknown window)"},
		{"a ratio and a default window of the file", func(c *config) { c.Compaction.ThresholdRatio, c.DefaultWindow = 0.5, 32000 },
			"0.5 of the model's context window (16000 tokens for a model of unknown window)"},
		{"an absolute trigger", func(c *config) { c.Compaction.ThresholdTokens = 24000 }, "24000 tokens"},
		{"compaction off", func(c *config) { c.Compaction.Enabled = false }, "compaction off"},
		{"compaction off with a history cap", func(c *config) { c.Compaction.Enabled, c.MaxHistory = false, 40 }, "compaction off; history capped at 40 messages"},
	} {
		c := defaultConfig()
		r.edit(&c)
		if got := triggerSummary(c); got != r.want {
			t.Errorf("%s: %q, want %q", r.rule, got, r.want)
		}
	}
}

func TestStoreSummary(t *testing.T) {
	wd, _ := os.Getwd()
	for _, r := range []struct {
		rule string
		edit func(*config)
		want string
	}{
		{"a db file, absolute", func(c *config) { c.DB = "x.db" }, filepath.Join(wd, "x.db")},
		{"no db: memory", func(c *config) { c.DB = "" }, "memory (nothing kept across restarts)"},
		{"the memory backend", func(c *config) { c.DB, c.State.Backend = "x.db", backendMemory }, "memory (nothing kept across restarts)"},
		{"redis, without its password", func(c *config) { c.State.Backend, c.State.URL = backendRedis, "redis://u:s3cret@cache:6379/2" }, "redis cache:6379/2"},
	} {
		c := defaultConfig()
		r.edit(&c)
		if got := storeSummary(c); got != r.want {
			t.Errorf("%s: %q, want %q", r.rule, got, r.want)
		}
	}
}

// The startup line says where the dashboard is, which db, the trigger in
// effect and the mode.
func TestStartupLine(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	var out bytes.Buffer
	cfg := defaultConfig()
	cfg.Listen, cfg.Upstream, cfg.DB, cfg.Mode = "127.0.0.1:0", "http://127.0.0.1:1/v1", filepath.Join(t.TempDir(), "c.db"), "observe"
	cfg.Compaction.ThresholdTokens = 24000
	s, err := start(cfg, zerolog.New(&out))
	if err != nil {
		t.Fatal(err)
	}
	addr := s.ln.Addr().String()
	s.srv.Shutdown(context.Background())
	s.store.Close()
	// The proxy's route lines come first; the serving line is the last.
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	var line map[string]any
	if err := json.Unmarshal(lines[len(lines)-1], &line); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	for k, want := range map[string]any{"message": "ctxpress serving", "listen": addr, "dashboard": "http://" + addr + "/ctxpress/ui",
		"db": cfg.DB, "trigger": "24000 tokens", "mode": "observe", "upstream": cfg.Upstream} {
		if line[k] != want {
			t.Errorf("%s = %v, want %v", k, line[k], want)
		}
	}
}

// Every startup error, a bad flag and a bad config included, and the
// warnings before it, are log lines in the format asked for.
func TestStartupErrorsAreLogLines(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("CTXPRESS_LOG_FORMAT", "json")
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	dir := t.TempDir()
	deprecated := filepath.Join(dir, "deprecated.yml")
	os.WriteFile(deprecated, []byte("ui: {price_per_million_tokens: 2}\nupstream: http://127.0.0.1:1/v1\n"), 0o600)
	typo := filepath.Join(dir, "typo.yml")
	os.WriteFile(typo, []byte("compaction:\n  treshold_tokens: 9\n"), 0o600)
	for _, r := range []struct {
		rule  string
		args  []string
		code  int
		lines []string // each line's level and the start of its message or error
	}{
		{"a flag that does not exist", []string{"--frobnicate"}, 2,
			[]string{"error ctxpress cannot start: flag provided but not defined: -frobnicate; run ctxpress serve --help for the flags"}},
		{"a typo in the file", []string{"--config", typo}, 2,
			[]string{`error ctxpress cannot start: ` + typo + `:2: compaction: unknown key "treshold_tokens" (did you mean "threshold_tokens"?)`}},
		{"a deprecated key, then an address in use", []string{"--config", deprecated, "--db", "", "--listen", held.Addr().String()}, 1,
			[]string{"warn " + deprecated + ":1: ui.price_per_million_tokens is deprecated", "error ctxpress cannot start: cannot listen on " + held.Addr().String()}},
	} {
		var stderr bytes.Buffer
		code := run(append([]string{"serve"}, r.args...), nil, &stderr, &stderr)
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if code != r.code || len(lines) != len(r.lines) {
			t.Errorf("%s: exit %d, %d lines, want %d, %d:\n%s", r.rule, code, len(lines), r.code, len(r.lines), stderr.String())
			continue
		}
		for i, l := range lines {
			var ev struct{ Level, Message string }
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Errorf("%s: not a JSON log line: %s", r.rule, l)
				continue
			}
			text := ev.Level + " " + ev.Message
			if !strings.HasPrefix(text, r.lines[i]) {
				t.Errorf("%s: line %d is %q, want it to start %q", r.rule, i, text, r.lines[i])
			}
		}
	}
}

// The log settings startup is reported with: the loaded config's, with
// the environment's and the flags' valid values over them.
func TestStartupLogConfig(t *testing.T) {
	def := defaultConfig().Log
	for _, r := range []struct {
		rule   string
		loaded logConfig
		env    map[string]string
		args   []string
		want   logConfig
	}{
		{"a config that loaded", logConfig{Level: "debug", Format: "json"}, nil, nil, logConfig{Level: "debug", Format: "json"}},
		{"a file that did not load: the defaults", logConfig{}, nil, nil, def},
		{"... with the flag's format", logConfig{}, nil, []string{"--log-format", "console"}, logConfig{Level: "info", Format: "console"}},
		{"... with the environment's", logConfig{}, map[string]string{"CTXPRESS_LOG_FORMAT": "json", "CTXPRESS_LOG_LEVEL": "warn"}, nil, logConfig{Level: "warn", Format: "json"}},
		{"a flag over the environment", logConfig{}, map[string]string{"CTXPRESS_LOG_FORMAT": "json"}, []string{"--log-format", "console"}, logConfig{Level: "info", Format: "console"}},
		{"an invalid value is passed over", logConfig{}, map[string]string{"CTXPRESS_LOG_FORMAT": "yaml"}, []string{"--log-level", "loud"}, def},
	} {
		f := newServeFlags()
		if err := f.fs.Parse(r.args); err != nil {
			t.Fatal(err)
		}
		if got := startupLogConfig(r.loaded, f, func(k string) string { return r.env[k] }); got != r.want {
			t.Errorf("%s: %+v, want %+v", r.rule, got, r.want)
		}
	}
}
