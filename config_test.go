package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/proxy"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/squash"
)

// config.example.yml is the defaults, key for key: loading it changes nothing,
// every key the code knows appears in it, and no deprecated one does.
func TestConfigExampleMatchesDefaults(t *testing.T) {
	data, err := os.ReadFile("config.example.yml")
	if err != nil {
		t.Fatal(err)
	}
	c := config{}
	info, err := decodeConfigFile(&c, data)
	if err != nil {
		t.Fatalf("config.example.yml does not load: %v", err)
	}
	if !reflect.DeepEqual(c, defaultConfig()) {
		t.Fatalf("config.example.yml differs from the defaults:\n file:    %+v\n default: %+v", c, defaultConfig())
	}
	if len(info.deprecated) > 0 {
		t.Errorf("config.example.yml sets deprecated keys: %v", info.deprecated)
	}
	for _, key := range configPaths() {
		leaf := key[strings.LastIndex(key, ".")+1:]
		_, deprecated := deprecatedKeys[key]
		if mentioned := strings.Contains(string(data), leaf+":"); mentioned == deprecated && !strings.HasPrefix(key, "models.") {
			t.Errorf("config.example.yml: %s mentioned %v, deprecated %v", key, mentioned, deprecated)
		}
	}
}

// testEnv is a getenv of vars with HOME in a temp dir unless vars set
// it, so that the default db path resolves away from the real one.
func testEnv(t *testing.T, vars map[string]string) func(string) string {
	home := t.TempDir()
	return func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		if k == "HOME" {
			return home
		}
		return ""
	}
}

func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yml")
	os.WriteFile(file, []byte("listen: 127.0.0.1:9001\nupstream: http://file:1/v1\nstream_idle_timeout: 42s\nlog: {level: debug}\n"), 0o600)
	env := map[string]string{"CTXPRESS_UPSTREAM": "http://env:2/v1", "CTXPRESS_LISTEN": "127.0.0.1:9002"}
	f := newServeFlags()
	if err := f.fs.Parse([]string{"--config", file, "--listen", "127.0.0.1:9003"}); err != nil {
		t.Fatal(err)
	}
	c, _, err := loadConfig(f, testEnv(t, env))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:9003" {
		t.Errorf("listen = %s: flag should win", c.Listen)
	}
	if c.Upstream != "http://env:2/v1" {
		t.Errorf("upstream = %s: env should beat the file", c.Upstream)
	}
	if c.StreamIdleTimeout != 42*time.Second || c.Log.Level != "debug" {
		t.Errorf("file values lost: %v %s", c.StreamIdleTimeout, c.Log.Level)
	}
	if c.UpstreamTimeout != defaultConfig().UpstreamTimeout {
		t.Errorf("default lost: %v", c.UpstreamTimeout)
	}
}

// auth.keys come from the file or, comma-separated, from CTXPRESS_AUTH_KEYS,
// and reach the proxy; an empty key is refused.
func TestAuthKeysConfig(t *testing.T) {
	f := newServeFlags()
	c, _, err := loadConfig(f, testEnv(t, map[string]string{"CTXPRESS_AUTH_KEYS": " cx-one, cx-two ,,"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.proxyConfig().AuthKeys; !reflect.DeepEqual(got, []string{"cx-one", "cx-two"}) {
		t.Fatalf("auth keys from env: %q", got)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yml")
	os.WriteFile(file, []byte("auth: {keys: [\"\"]}\n"), 0o600)
	f = newServeFlags()
	f.fs.Parse([]string{"--config", file})
	if _, _, err := loadConfig(f, testEnv(t, nil)); err == nil || !strings.Contains(err.Error(), "auth.keys") {
		t.Fatalf("an empty key: %v", err)
	}
}

// models: {name: {reasoning: …}} reaches the summariser; an entry without
// it leaves the family table in charge.
func TestModelsReasoningReachesTheSummarizer(t *testing.T) {
	c := defaultConfig()
	yml := "models: {my-azure-o3: {reasoning: true}, gpt-5-chat: {reasoning: false}, local: {context_window: 8192}}\n"
	if _, err := decodeConfigFile(&c, []byte(yml)); err != nil {
		t.Fatal(err)
	}
	got := c.compactionConfig()
	want := map[string]bool{"my-azure-o3": true, "gpt-5-chat": false}
	if !reflect.DeepEqual(got.Summarizer.Reasoning, want) {
		t.Errorf("summarizer reasoning %v, want %v", got.Summarizer.Reasoning, want)
	}
	if got.Trigger.ContextWindow("local") != 8192 {
		t.Errorf("context window of local: %d", got.Trigger.ContextWindow("local"))
	}
}

// The squash read options reach the squasher: a read command added in the
// file makes its calls reads, kept whole; read_max_bytes -1 squashes reads
// by shape again.
func TestSquashReadOptions(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 300; i++ {
		b.WriteString("2024-03-17 16:13:00 INFO worker: processed job " + strings.Repeat("x", i%7) + "\n")
	}
	out := b.String()
	call := func(cmd string) squash.Call {
		args, _ := json.Marshal(map[string]string{"command": cmd})
		return squash.Call{Tool: "bash", Args: string(args)}
	}
	for _, tt := range []struct {
		file, cmd string
		kept      bool
	}{
		{"", "cat app.log", true},
		{"", "journalctl -u app", false},
		{"squash:\n  read_commands: [zcat]\n", "zcat app.log.gz", true},
		{"squash:\n  read_commands: [zcat]\n", "cat app.log", false},
		{"squash:\n  read_max_bytes: -1\n", "cat app.log", false},
		{"squash:\n  shell_tools: [run]\n", "cat app.log", false},
	} {
		c := defaultConfig()
		if _, err := decodeConfigFile(&c, []byte(tt.file)); err != nil {
			t.Fatal(err)
		}
		if kept := squash.New(*c.pipelineConfig().Squash).ApplyCall(call(tt.cmd), out).Text == out; kept != tt.kept {
			t.Errorf("%q, %s: kept %v, want %v", tt.file, tt.cmd, kept, tt.kept)
		}
	}
}

func TestModelPricesFromConfig(t *testing.T) {
	c := defaultConfig()
	if _, err := decodeConfigFile(&c, []byte("models:\n  my-azure-gpt: {prices: {input: 3, cached_input: 0.3, output: 12}}\n  small: {context_window: 8192}\n")); err != nil {
		t.Fatal(err)
	}
	cost := c.proxyConfig().Cost
	if got := cost.PricesFor("my-azure-gpt"); got != (rewrite.Prices{Input: 3, CachedInput: 0.3, CacheWrite: 3, Output: 12}) {
		t.Errorf("my-azure-gpt prices = %+v", got)
	}
	if got := cost.PricesFor("small"); got != rewrite.DefaultPrices {
		t.Errorf("a models: entry without prices keeps the table's: %+v", got)
	}
	if _, err := decodeConfigFile(&c, []byte("models:\n  x: {prices: {input: -1}}\n")); err != nil {
		t.Fatal(err)
	}
	if err := c.proxyConfig().Validate(); err == nil || !strings.Contains(err.Error(), "models: x") {
		t.Errorf("a negative price: Validate = %v, want an error naming the model", err)
	}
}

func TestReplicaNameIsTheOptionElseHostAndListenPort(t *testing.T) {
	for _, c := range []struct {
		replica, hostname, listen, want string
	}{
		{"gw-1", "vm", "127.0.0.1:8484", "gw-1"}, // the option wins
		{"", "vm", "127.0.0.1:8484", "vm:8484"},  // two replicas on one host differ by port
		{"", "vm", "[::]:9000", "vm:9000"},       // any listen address
		{"", "vm", "not an address", "vm"},       // no port to tell: the host
		{"", "", "127.0.0.1:8484", ""},           // no hostname: the proxy's default
	} {
		if got := replicaName(c.replica, c.hostname, c.listen); got != c.want {
			t.Errorf("replicaName(%q, %q, %q) = %q, want %q", c.replica, c.hostname, c.listen, got, c.want)
		}
	}
}

// A deprecated key still loads, and comes back as one warning naming its
// line and what replaces it.
func TestDeprecatedKeyWarns(t *testing.T) {
	c, warnings, err := loadYAML(t, "listen: 127.0.0.1:8484\nui:\n  price_per_million_tokens: -1\n", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"FILE:3: ui.price_per_million_tokens is deprecated: " + deprecatedKeys["ui.price_per_million_tokens"]}
	if !reflect.DeepEqual(warnings, want) {
		t.Errorf("warnings %q, want %q", warnings, want)
	}
	if c.UI.PricePerMillionTokens != -1 {
		t.Errorf("the deprecated value was not read: %v", c.UI.PricePerMillionTokens)
	}
	if _, warnings, _ := loadYAML(t, "ui: {currency: €}\n", nil, nil); len(warnings) != 0 {
		t.Errorf("warnings without a deprecated key: %q", warnings)
	}
}

// The trigger, keep_recent and mode come from the file, the environment
// or a flag, in that order of precedence, and reach the proxy.
func TestTriggerKeepRecentAndModeFromEachSource(t *testing.T) {
	const file = "mode: observe\ncompaction: {threshold_tokens: 1000, keep_recent: 4}\n"
	env := map[string]string{"CTXPRESS_THRESHOLD_TOKENS": "2000", "CTXPRESS_KEEP_RECENT": "8", "CTXPRESS_MODE": "normal"}
	for _, r := range []struct {
		rule            string
		yaml            string
		args            []string
		env             map[string]string
		threshold, keep int
		mode            string
	}{
		{"the defaults", "", nil, nil, 0, 6, "normal"},
		{"the file", file, nil, nil, 1000, 4, "observe"},
		{"the environment over the file", file, nil, env, 2000, 8, "normal"},
		{"flags over both", file, []string{"--threshold-tokens", "3000", "--keep-recent", "2", "--mode", "observe"}, env, 3000, 2, "observe"},
	} {
		c, _, err := loadYAML(t, r.yaml, r.args, r.env)
		if err != nil {
			t.Errorf("%s: %v", r.rule, err)
			continue
		}
		pc := c.proxyConfig()
		if pc.Compaction.Trigger.ThresholdTokens != r.threshold || pc.Compaction.KeepRecent != r.keep || pc.Mode != r.mode {
			t.Errorf("%s: threshold %d keep_recent %d mode %q, want %d %d %q", r.rule,
				pc.Compaction.Trigger.ThresholdTokens, pc.Compaction.KeepRecent, pc.Mode, r.threshold, r.keep, r.mode)
		}
	}
}

// No upstream by default (each format goes to its provider); upstreams:
// entries that say something become the proxy's routes.
func TestUpstreamsBecomeRoutes(t *testing.T) {
	c, _, err := loadYAML(t, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pc := c.proxyConfig(); pc.Upstream != "" || pc.Routes != nil {
		t.Fatalf("defaults: upstream %q, routes %v", pc.Upstream, pc.Routes)
	}
	c, _, err = loadYAML(t, "upstream: http://127.0.0.1:8080/v1\nupstreams:\n"+
		"  messages: {base_url: \"https://api.anthropic.com/v1\", api_key: sk-ant, local: false}\n"+
		"  responses: {local: true}\n"+
		"  gemini: {base_url: \"https://generativelanguage.googleapis.com\", api_key: AIza-up}\n", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	no, yes := false, true
	want := map[string]proxy.Route{
		proxy.RouteMessages:  {Upstream: "https://api.anthropic.com/v1", APIKey: "sk-ant", Local: &no},
		proxy.RouteResponses: {Local: &yes},
		proxy.RouteGemini:    {Upstream: "https://generativelanguage.googleapis.com", APIKey: "AIza-up"},
	}
	if got := c.proxyConfig(); got.Upstream != "http://127.0.0.1:8080/v1" || !reflect.DeepEqual(got.Routes, want) {
		t.Errorf("upstream %q, routes %+v, want %+v", got.Upstream, got.Routes, want)
	}
}
