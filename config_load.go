package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// serveFlags are the command-line options of `ctxpress serve`.
type serveFlags struct {
	fs         *flag.FlagSet
	configPath string
	c          config // values of the flags, applied only when set
}

// serveFlagKeys are the config keys the flags of serve set, each with how
// to copy the flag's value: one table, so a value from a flag is named by
// its flag in an error and applied the same way.
var serveFlagKeys = map[string]struct {
	path string
	set  func(dst *config, flags config)
}{
	"listen":              {"listen", func(d *config, f config) { d.Listen = f.Listen }},
	"mode":                {"mode", func(d *config, f config) { d.Mode = f.Mode }},
	"upstream":            {"upstream", func(d *config, f config) { d.Upstream = f.Upstream }},
	"db":                  {"db", func(d *config, f config) { d.DB = f.DB }},
	"threshold-tokens":    {"compaction.threshold_tokens", func(d *config, f config) { d.Compaction.ThresholdTokens = f.Compaction.ThresholdTokens }},
	"keep-recent":         {"compaction.keep_recent", func(d *config, f config) { d.Compaction.KeepRecent = f.Compaction.KeepRecent }},
	"max-body-bytes":      {"max_body_bytes", func(d *config, f config) { d.MaxBodyBytes = f.MaxBodyBytes }},
	"connect-timeout":     {"connect_timeout", func(d *config, f config) { d.ConnectTimeout = f.ConnectTimeout }},
	"upstream-timeout":    {"upstream_timeout", func(d *config, f config) { d.UpstreamTimeout = f.UpstreamTimeout }},
	"stream-idle-timeout": {"stream_idle_timeout", func(d *config, f config) { d.StreamIdleTimeout = f.StreamIdleTimeout }},
	"shutdown-timeout":    {"shutdown_timeout", func(d *config, f config) { d.ShutdownTimeout = f.ShutdownTimeout }},
	"log-level":           {"log.level", func(d *config, f config) { d.Log.Level = f.Log.Level }},
	"log-format":          {"log.format", func(d *config, f config) { d.Log.Format = f.Log.Format }},
}

func newServeFlags() *serveFlags {
	f := &serveFlags{fs: flag.NewFlagSet("serve", flag.ContinueOnError)}
	d := defaultConfig()
	fs := f.fs
	fs.StringVar(&f.configPath, "config", "", "YAML config file (env CTXPRESS_CONFIG)")
	fs.StringVar(&f.c.Listen, "listen", d.Listen, "address to listen on (env CTXPRESS_LISTEN)")
	fs.StringVar(&f.c.Mode, "mode", d.Mode, "normal, or observe: forward every request as sent and record what ctxpress would have done (env CTXPRESS_MODE)")
	fs.StringVar(&f.c.Upstream, "upstream", d.Upstream, "upstream base URL for every format, as a client would use it; unset, each format goes to its provider (env CTXPRESS_UPSTREAM)")
	fs.StringVar(&f.c.DB, "db", d.DB, `conversation db file; unset, ctxpress.db in the user data directory ($XDG_DATA_HOME/ctxpress, else ~/.local/share/ctxpress; macOS ~/Library/Application Support/ctxpress); "" keeps state in memory only (env CTXPRESS_DB)`)
	fs.IntVar(&f.c.Compaction.ThresholdTokens, "threshold-tokens", d.Compaction.ThresholdTokens, "compaction trigger in tokens; 0 means compaction.threshold_ratio of the model's context window (env CTXPRESS_THRESHOLD_TOKENS)")
	fs.IntVar(&f.c.Compaction.KeepRecent, "keep-recent", d.Compaction.KeepRecent, "the last N messages a compaction always leaves raw (env CTXPRESS_KEEP_RECENT)")
	fs.IntVar(&f.c.MaxBodyBytes, "max-body-bytes", d.MaxBodyBytes, "largest request body; larger ones get 413")
	fs.DurationVar(&f.c.ConnectTimeout, "connect-timeout", d.ConnectTimeout, "upstream dial timeout")
	fs.DurationVar(&f.c.UpstreamTimeout, "upstream-timeout", d.UpstreamTimeout, "wait for the upstream's response headers (a whole non-streamed completion)")
	fs.DurationVar(&f.c.StreamIdleTimeout, "stream-idle-timeout", d.StreamIdleTimeout, "cut a stream after the upstream is silent this long")
	fs.DurationVar(&f.c.ShutdownTimeout, "shutdown-timeout", d.ShutdownTimeout, "on SIGINT/SIGTERM, how long in-flight requests may finish")
	fs.StringVar(&f.c.Log.Level, "log-level", d.Log.Level, "trace|debug|info|warn|error (env CTXPRESS_LOG_LEVEL)")
	fs.StringVar(&f.c.Log.Format, "log-format", d.Log.Format, "auto|console|json: auto is console on a terminal, json otherwise (env CTXPRESS_LOG_FORMAT)")
	return f
}

// origin is where a value came from: a line of the file, an environment
// variable or a flag.
type origin struct {
	file string
	line int
	name string // the variable, or the flag with its dashes
}

// loadConfig builds the effective config: defaults, then the file, then the
// environment, then the flags the user set; then the default db path when
// none of them named one. It returns the warnings to log (deprecated keys)
// even with an error. An error names the key by its YAML path and where
// its value came from ("c.yml:3: …", "… (from --keep-recent)").
func loadConfig(f *serveFlags, getenv func(string) string) (config, []string, error) {
	c := defaultConfig()
	from := map[string]origin{}
	var warnings []string
	path := f.configPath
	if path == "" {
		path = getenv("CTXPRESS_CONFIG")
	}
	if path != "" {
		info, err := readConfigFile(&c, path)
		for _, d := range info.deprecated {
			warnings = append(warnings, fmt.Sprintf("%s:%d: %s", path, d.Line, d.Msg))
		}
		if err != nil {
			return c, warnings, err
		}
		for p, line := range info.lines {
			from[p] = origin{file: path, line: line}
		}
	}
	if err := applyEnv(&c, getenv, from); err != nil {
		return c, warnings, err
	}
	f.fs.Visit(func(fl *flag.Flag) {
		if k, ok := serveFlagKeys[fl.Name]; ok {
			k.set(&c, f.c)
			from[k.path] = origin{name: "--" + fl.Name}
		}
	})
	if _, named := from["db"]; !named {
		db, err := defaultDBPath(runtime.GOOS, getenv)
		if err != nil {
			return c, warnings, err
		}
		c.DB = db
	}
	if err := checkConfig(c); err != nil {
		return c, warnings, whereFrom(err, from)
	}
	// The packages' own checks, after ours, which say it in the file's
	// terms; they should find nothing left.
	if err := c.proxyConfig().Validate(); err != nil {
		return c, warnings, err
	}
	if err := c.compactionConfig().Validate(); err != nil {
		return c, warnings, err
	}
	if err := c.pipelineConfig().Validate(); err != nil {
		return c, warnings, err
	}
	return c, warnings, nil
}

// readConfigFile merges the file at path over c; an error names the file
// and, when it is about a line, the line ("c.yml:3: …").
func readConfigFile(c *config, path string) (fileInfo, error) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fileInfo{}, fmt.Errorf("no config file at %s: check --config (env CTXPRESS_CONFIG); config.example.yml shows every key", path)
	case err != nil:
		return fileInfo{}, fmt.Errorf("cannot read the config file: %w", err)
	}
	info, err := decodeConfigFile(c, data)
	var l *located
	switch {
	case errors.As(err, &l):
		return info, fmt.Errorf("%s:%d: %s", path, l.Line, l.Msg)
	case err != nil:
		return info, fmt.Errorf("%s: %w", path, err)
	}
	return info, nil
}

// whereFrom puts where a bad value came from into err when it is a
// *valueError: the file's name and line before, a variable or flag after.
func whereFrom(err error, from map[string]origin) error {
	var ve *valueError
	if !errors.As(err, &ve) {
		return err
	}
	o, ok := from[ve.Path]
	switch {
	case !ok:
		return err
	case o.file != "":
		return fmt.Errorf("%s:%d: %s", o.file, o.line, ve.Msg)
	}
	return fmt.Errorf("%s (from %s)", ve.Msg, o.name)
}

// envVar is one CTXPRESS_* variable: the key it sets and how.
type envVar struct {
	name, path string
	set        func(c *config, v string) error
}

// envVars are the variables applyEnv reads, in order.
var envVars = []envVar{
	{"CTXPRESS_LISTEN", "listen", func(c *config, v string) error { c.Listen = v; return nil }},
	{"CTXPRESS_MODE", "mode", func(c *config, v string) error { c.Mode = v; return nil }},
	{"CTXPRESS_UPSTREAM", "upstream", func(c *config, v string) error { c.Upstream = v; return nil }},
	{"CTXPRESS_UPSTREAM_API_KEY", "upstream_api_key", func(c *config, v string) error { c.UpstreamAPIKey = v; return nil }},
	{"CTXPRESS_DB", "db", func(c *config, v string) error { c.DB = v; return nil }},
	// A Redis URL in the environment is what a container deployment sets:
	// it selects the backend too.
	{"CTXPRESS_REDIS_URL", "state.url", func(c *config, v string) error {
		c.State.Backend, c.State.URL = backendRedis, v
		return nil
	}},
	// Keys are comma-separated, so a list of them fits one variable (keys
	// hold no commas: they are tokens).
	{"CTXPRESS_AUTH_KEYS", "auth.keys", func(c *config, v string) error {
		c.Auth.Keys = c.Auth.Keys[:0:0]
		for _, k := range strings.Split(v, ",") {
			if k = strings.TrimSpace(k); k != "" {
				c.Auth.Keys = append(c.Auth.Keys, k)
			}
		}
		return nil
	}},
	{"CTXPRESS_MAX_BODY_BYTES", "max_body_bytes", func(c *config, v string) error { return envInt(v, &c.MaxBodyBytes) }},
	{"CTXPRESS_THRESHOLD_TOKENS", "compaction.threshold_tokens", func(c *config, v string) error { return envInt(v, &c.Compaction.ThresholdTokens) }},
	{"CTXPRESS_KEEP_RECENT", "compaction.keep_recent", func(c *config, v string) error { return envInt(v, &c.Compaction.KeepRecent) }},
	{"CTXPRESS_DEBUG_PPROF", "debug.pprof", func(c *config, v string) error {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return errors.New("want true or false")
		}
		c.Debug.Pprof = on
		return nil
	}},
	{"CTXPRESS_LOG_LEVEL", "log.level", func(c *config, v string) error { c.Log.Level = v; return nil }},
	{"CTXPRESS_LOG_FORMAT", "log.format", func(c *config, v string) error { c.Log.Format = v; return nil }},
	{"CTXPRESS_REPLICA", "replica", func(c *config, v string) error { c.Replica = v; return nil }},
	{"CTXPRESS_ADMIN_TOKEN", "admin_token", func(c *config, v string) error { c.AdminToken = v; return nil }},
	{"CTXPRESS_LOCAL_UPSTREAM", "local_upstream", func(c *config, v string) error { c.LocalUpstream = v; return nil }},
}

func envInt(v string, dst *int) error {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return errors.New("want a whole number")
	}
	*dst = n
	return nil
}

// applyEnv applies the CTXPRESS_* variables that are set (an empty one is
// unset), noting in from which keys they set.
func applyEnv(c *config, getenv func(string) string, from map[string]origin) error {
	for _, e := range envVars {
		v := getenv(e.name)
		if v == "" {
			continue
		}
		if err := e.set(c, v); err != nil {
			return fmt.Errorf("%s %q: %w (it sets %s)", e.name, v, err, e.path)
		}
		if from != nil {
			from[e.path] = origin{name: e.name}
		}
	}
	return nil
}
