package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// state: picks where records live; CTXPRESS_REDIS_URL selects Redis; a
// backend that cannot work is refused at load, naming the key.
func TestStateBackendConfig(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, yaml, redisURL string
		backend, url         string // wanted, when no error
		err                  string // wanted mention in the error
	}{
		{name: "default is the bolt db", backend: "bolt"},
		{name: "memory", yaml: "state: {backend: memory}\n", backend: "memory"},
		{name: "redis from the file", yaml: "state: {backend: redis, url: \"redis://cache:6379/2\"}\n", backend: "redis", url: "redis://cache:6379/2"},
		{name: "the env's url selects redis", redisURL: "redis://cache:6379/0", backend: "redis", url: "redis://cache:6379/0"},
		{name: "redis without a url", yaml: "state: {backend: redis}\n", err: "state.url"},
		{name: "a url that is not redis", yaml: "state: {backend: redis, url: \"http://cache\"}\n", err: "state.url"},
		{name: "a bad url, quoted without its password", yaml: "state: {backend: redis, url: \"redis://u:s3cret@cache:port/0\"}\n", err: "state.url: not a redis:// URL: invalid port"},
		{name: "unknown backend", yaml: "state: {backend: sqlite}\n", err: "state.backend"},
		{name: "no timeout", yaml: "state: {read_timeout: 0s}\n", err: "read_timeout"},
	} {
		f := newServeFlags()
		if c.yaml != "" {
			file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".yml")
			if err := os.WriteFile(file, []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			f.fs.Parse([]string{"--config", file})
		}
		cfg, _, err := loadConfig(f, testEnv(t, map[string]string{"CTXPRESS_REDIS_URL": c.redisURL}))
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s: err = %v, want mention of %q", c.name, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case cfg.State.Backend != c.backend || cfg.State.URL != c.url:
			t.Errorf("%s: backend %q url %q, want %q %q", c.name, cfg.State.Backend, cfg.State.URL, c.backend, c.url)
		}
	}
}

// A Redis that cannot be reached at start stops startup with the reason,
// as a db that cannot be opened does.
func TestUnreachableRedisStopsStartup(t *testing.T) {
	cfg := defaultConfig()
	cfg.State.Backend, cfg.State.URL = backendRedis, "redis://127.0.0.1:1/0"
	st, err := openStore(cfg, zerolog.Nop())
	if err == nil {
		st.Close()
		t.Fatal("openStore on a port nothing listens on: no error")
	}
	if !strings.Contains(err.Error(), "redis") {
		t.Fatalf("error %q does not say it is the redis store", err)
	}
}
