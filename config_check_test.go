package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// loadYAML loads yml as the config file, with the serve flags args and
// the environment env; FILE in the error stands for the file's path.
func loadYAML(t *testing.T, yml string, args []string, env map[string]string) (config, []string, error) {
	t.Helper()
	f := newServeFlags()
	if yml != "" {
		file := filepath.Join(t.TempDir(), "c.yml")
		if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append([]string{"--config", file}, args...)
	}
	if err := f.fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	c, warnings, err := loadConfig(f, testEnv(t, env))
	if err != nil && f.configPath != "" {
		err = fmt.Errorf("%s", strings.ReplaceAll(err.Error(), f.configPath, "FILE"))
	}
	for i := range warnings {
		warnings[i] = strings.ReplaceAll(warnings[i], f.configPath, "FILE")
	}
	return c, warnings, err
}

// A bad value, a typo or a value of the wrong kind stops loading with a
// message that names the key by its path, where it came from and, for a
// typo, the key meant; an enumeration lists its values.
func TestConfigErrorMessages(t *testing.T) {
	for _, c := range []struct {
		yaml string
		args []string
		env  map[string]string
		want string
	}{
		// Numbers and durations out of range.
		{yaml: "compaction:\n  threshold_tokens: -5\n", want: "FILE:2: compaction.threshold_tokens must be ≥ 0, got -5"},
		{yaml: "compaction: {keep_recent: -3}\n", want: "FILE:1: compaction.keep_recent must be ≥ 0, got -3"},
		{yaml: "cache_bytes: -1\n", want: "FILE:1: cache_bytes must be ≥ 0, got -1"},
		{yaml: "retention: -5h\n", want: "FILE:1: retention must be ≥ 0, got -5h0m0s"},
		{yaml: "default_context_window: -100\n", want: "FILE:1: default_context_window must be ≥ 0, got -100"},
		{yaml: "models:\n  m: {context_window: -5}\n", want: "FILE:2: models.m.context_window must be ≥ 0 (0: the built-in table's), got -5"},
		{yaml: "compaction:\n  summarizer:\n    max_tokens: -1\n", want: "FILE:3: compaction.summarizer.max_tokens must be ≥ 0, got -1"},
		{yaml: "max_body_bytes: -1\n", want: "FILE:1: max_body_bytes must be ≥ 0, got -1"},
		{yaml: "connect_timeout: -1s\n", want: "FILE:1: connect_timeout must be ≥ 0, got -1s"},
		{yaml: "shutdown_timeout: -30s\n", want: "FILE:1: shutdown_timeout must be ≥ 0, got -30s"},
		{yaml: "state: {read_timeout: 0s}\n", want: "FILE:1: state.read_timeout must be > 0, got 0s"},
		{yaml: "squash: {read_max_bytes: -2}\n", want: "FILE:1: squash.read_max_bytes must be ≥ -1 (-1: reads are squashed like any output), got -2"},
		{yaml: "dedup: {min_tokens: -2}\n", want: "FILE:1: dedup.min_tokens must be ≥ -1 (-1: no minimum), got -2"},
		{yaml: "prune: {min_tokens: -3}\n", want: "FILE:1: prune.min_tokens must be ≥ -1 (-1: any result its line is shorter than), got -3"},
		{yaml: "expand: {max_bytes: -2}\n", want: "FILE:1: expand.max_bytes must be ≥ -1 (-1: no cap), got -2"},
		{yaml: "compaction: {threshold_ratio: 1.5}\n", want: "FILE:1: compaction.threshold_ratio must be between 0 and 1, got 1.5"},
		{yaml: "compaction: {precompact_ratio: .nan}\n", want: "FILE:1: compaction.precompact_ratio must be between 0 and 1, got NaN"},
		{yaml: "compaction:\n  summarizer: {timeout: -2m}\n", want: "FILE:2: compaction.summarizer.timeout must be ≥ 0, got -2m0s"},
		{yaml: "max_history_messages: -1\n", want: "FILE:1: max_history_messages must be ≥ 0, got -1"},
		{yaml: "models:\n  m:\n    prices: {input: 3, output: -15}\n", want: "FILE:3: models.m.prices.output must be ≥ 0, got -15"},
		// From the environment and from flags.
		{env: map[string]string{"CTXPRESS_THRESHOLD_TOKENS": "-5"}, want: "compaction.threshold_tokens must be ≥ 0, got -5 (from CTXPRESS_THRESHOLD_TOKENS)"},
		{args: []string{"--keep-recent", "-3"}, want: "compaction.keep_recent must be ≥ 0, got -3 (from --keep-recent)"},
		{env: map[string]string{"CTXPRESS_KEEP_RECENT": "six"}, want: `CTXPRESS_KEEP_RECENT "six": want a whole number (it sets compaction.keep_recent)`},
		{args: []string{"--mode", "watch"}, want: `mode "watch": want normal or observe (from --mode)`},
		{yaml: "compaction: {threshold_tokens: 100}\n", args: []string{"--threshold-tokens", "-1"}, want: "compaction.threshold_tokens must be ≥ 0, got -1 (from --threshold-tokens)"},
		// Unknown keys.
		{yaml: "compaction:\n  treshold_tokens: 100\n", want: `FILE:2: compaction: unknown key "treshold_tokens" (did you mean "threshold_tokens"?)`},
		{yaml: "upstrem: http://x/v1\n", want: `FILE:1: unknown key "upstrem" (did you mean "upstream"?)`},
		{yaml: "listen: 127.0.0.1:1\nthreshold_tokens: 100\n", want: `FILE:2: unknown key "threshold_tokens" (did you mean compaction.threshold_tokens?)`},
		{yaml: "enabled: false\n", want: `FILE:1: unknown key "enabled" (did you mean squash.enabled, dedup.enabled, prune.enabled or compaction.enabled?)`},
		{yaml: "compaction:\n  summarizer: {modle: x}\n", want: `FILE:2: compaction.summarizer: unknown key "modle" (did you mean "model"?)`},
		{yaml: "upstreams: {chat: {url: http://x/v1}}\n", want: `FILE:1: upstreams.chat: unknown key "url" (did you mean "base_url"?)`},
		{yaml: "models:\n  m: {window: 8192}\n", want: `FILE:2: models.m: unknown key "window" (did you mean "context_window"?)`},
		{yaml: "upstreams: {gemeni: {base_url: http://x/v1}}\n", want: `FILE:1: upstreams: unknown key "gemeni" (did you mean "gemini"?)`},
		{yaml: "log: {colour: true}\n", want: `FILE:1: log: unknown key "colour"; its keys are level, format`},
		{yaml: "frobnicate: 1\n", want: `FILE:1: unknown key "frobnicate"; config.example.yml lists every key`},
		// Values of the wrong kind.
		{yaml: "upstream_timeout: soon\n", want: `FILE:1: upstream_timeout: "soon" is not a duration; write it with a unit, e.g. 30s, 5m or 1h30m`},
		{yaml: "compaction:\n  summarizer:\n    timeout: 30\n", want: `FILE:3: compaction.summarizer.timeout: "30" is not a duration; write it with a unit, e.g. 30s, 5m or 1h30m`},
		{yaml: "compaction: {keep_recent: many}\n", want: `FILE:1: compaction.keep_recent: "many" is not a whole number`},
		{yaml: "compaction: {keep_recent: 2.5}\n", want: `FILE:1: compaction.keep_recent: "2.5" is not a whole number`},
		{yaml: "compaction: {enabled: sometimes}\n", want: `FILE:1: compaction.enabled: "sometimes": want true or false`},
		{yaml: "squash: {exempt_tools: read}\n", want: `FILE:1: squash.exempt_tools: want a list such as [a, b], got "read"`},
		{yaml: "log: debug\n", want: `FILE:1: log: want a section of keys (level, format), got "debug"`},
		{yaml: "- listen: 127.0.0.1:1\n", want: `FILE:1: want keys such as listen: 127.0.0.1:8484 (config.example.yml lists them), got a list`},
		{yaml: "compaction:\n  threshold_tokens: 5\n keep_recent: 3\n", want: `FILE:2: not valid YAML: did not find expected key`},
		// Enumerations list their values.
		{yaml: "mode: watch\n", want: `FILE:1: mode "watch": want normal or observe`},
		{yaml: "identify: fingerprint\n", want: `FILE:1: identify "fingerprint": want auto or header`},
		{yaml: "namespace: user\n", want: `FILE:1: namespace "user": want authorization, none or header NAME (e.g. header X-User)`},
		{yaml: "local_upstream: yes\n", want: `FILE:1: local_upstream "yes": want auto, true or false`},
		{yaml: "upstreams: {messages: {local: maybe}}\n", want: `FILE:1: upstreams.messages.local "maybe": want auto, true or false`},
		{yaml: "compaction: {summary_placement: top}\n", want: `FILE:1: compaction.summary_placement "top": want auto, system or user`},
		{yaml: "compaction: {summarizer: {base_url: \"http://x/v1\", api: anthropic}}\n", want: `FILE:1: compaction.summarizer.api "anthropic": want chat, responses or messages`},
		{yaml: "state: {backend: sqlite}\n", want: `FILE:1: state.backend "sqlite": want bolt, memory or redis`},
		{yaml: "log: {level: loud}\n", want: `FILE:1: log.level "loud": want trace, debug, info, warn or error`},
		{yaml: "log: {format: yaml}\n", want: `FILE:1: log.format "yaml": want auto, console or json`},
		// URLs and addresses.
		{yaml: "upstream: localhost:1234\n", want: `FILE:1: upstream "localhost:1234": scheme must be http or https; want a base URL as a client would use it, e.g. http://localhost:1234/v1`},
		{yaml: "upstreams: {responses: {base_url: \"ftp://h/v1\"}}\n", want: `FILE:1: upstreams.responses.base_url "ftp://h/v1": scheme must be http or https; want a base URL as a client would use it, e.g. http://localhost:1234/v1`},
		{yaml: "upstreams: {gemini: {base_url: \"generativelanguage.googleapis.com\"}}\n", want: `FILE:1: upstreams.gemini.base_url "generativelanguage.googleapis.com": scheme must be http or https; want a base URL as a client would use it, e.g. http://localhost:1234/v1`},
		{args: []string{"--listen", "8484"}, want: `listen "8484": want host:port, e.g. 127.0.0.1:8484 (0.0.0.0:8484 for every interface) (from --listen)`},
	} {
		name := c.yaml + strings.Join(c.args, " ") + fmt.Sprint(c.env)
		_, _, err := loadYAML(t, c.yaml, c.args, c.env)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got: %v\nwant: %s", name, err, c.want)
		}
	}
}

// Every number and duration of the config is range-checked: a value far
// below any valid one, at each key, is refused naming that key.
func TestEveryNumberIsChecked(t *testing.T) {
	checked := 0
	defer func() {
		if checked < 29 {
			t.Errorf("%d numbers checked: the walk over the config lost some", checked)
		}
		t.Logf("%d numbers checked", checked)
	}()
	for _, path := range configPaths() {
		if _, ok := deprecatedKeys[path]; ok {
			continue
		}
		bad := defaultConfig()
		var v reflect.Value
		if rest, ok := strings.CutPrefix(path, "models.NAME."); ok {
			m := &modelConfig{}
			v = fieldAt(reflect.ValueOf(m).Elem(), rest)
			bad.Models = map[string]modelConfig{"m": {}}
			path = "models.m." + rest
			setNegative(v)
			bad.Models["m"] = *m
		} else if path != "models" {
			v = fieldAt(reflect.ValueOf(&bad).Elem(), path)
			setNegative(v)
		}
		if !v.IsValid() || !isNumber(v) {
			continue
		}
		checked++
		err := checkConfig(bad)
		if ve, ok := err.(*valueError); !ok || ve.Path != path {
			t.Errorf("%s = a negative value: checkConfig = %v", path, err)
		}
	}
}

func isNumber(v reflect.Value) bool { return v.CanInt() || v.CanFloat() }

// setNegative sets a number far below any valid value; other kinds stay.
func setNegative(v reflect.Value) {
	switch {
	case v.Type() == durationType:
		v.SetInt(int64(-time.Hour))
	case v.CanInt():
		v.SetInt(-1000)
	case v.CanFloat():
		v.SetFloat(-1)
	}
}

// fieldAt is the settable field at a YAML path under the struct v,
// pointers on the way made.
func fieldAt(v reflect.Value, path string) reflect.Value {
	for _, p := range strings.Split(path, ".") {
		f, ok := fieldByKey(v.Type(), p)
		if !ok {
			panic("no key " + p + " in " + path)
		}
		v = v.FieldByIndex(f.Index)
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
	}
	return v
}
