package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/squash"
)

// config.example.yml is the defaults, key for key: loading it changes nothing,
// and every key the code knows appears in it.
func TestConfigExampleMatchesDefaults(t *testing.T) {
	data, err := os.ReadFile("config.example.yml")
	if err != nil {
		t.Fatal(err)
	}
	c := config{}
	if err := decodeConfigFile(&c, data); err != nil {
		t.Fatalf("config.example.yml does not load: %v", err)
	}
	if !reflect.DeepEqual(c, defaultConfig()) {
		t.Fatalf("config.example.yml differs from the defaults:\n file:    %+v\n default: %+v", c, defaultConfig())
	}
	for _, key := range yamlKeys(reflect.TypeOf(config{}), "") {
		leaf := key[strings.LastIndex(key, ".")+1:]
		if !strings.Contains(string(data), leaf+":") {
			t.Errorf("config.example.yml does not mention %s", key)
		}
	}
}

func yamlKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
			keys = append(keys, yamlKeys(f.Type, prefix+name+".")...)
			continue
		}
		keys = append(keys, prefix+name)
	}
	return keys
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
	c, err := loadConfig(f, func(k string) string { return env[k] })
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

func TestConfigErrorsAreClear(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ yaml, want string }{
		"typo":      {"upstrem: http://x/v1\n", "upstrem"},
		"bad url":   {"upstream: localhost:1234\n", "scheme"},
		"bad level": {"log: {level: loud}\n", "log level"},
		"bad dur":   {"upstream_timeout: soon\n", "line 1"},
	} {
		file := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yml")
		os.WriteFile(file, []byte(tc.yaml), 0o600)
		f := newServeFlags()
		f.fs.Parse([]string{"--config", file})
		_, err := loadConfig(f, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want mention of %q", name, err, tc.want)
		}
	}
}

// auth.keys come from the file or, comma-separated, from CTXPRESS_AUTH_KEYS,
// and reach the proxy; an empty key is refused.
func TestAuthKeysConfig(t *testing.T) {
	f := newServeFlags()
	c, err := loadConfig(f, func(k string) string {
		return map[string]string{"CTXPRESS_AUTH_KEYS": " cx-one, cx-two ,,"}[k]
	})
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
	if _, err := loadConfig(f, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "auth.keys") {
		t.Fatalf("an empty key: %v", err)
	}
}

// models: {name: {reasoning: …}} reaches the summariser; an entry without
// it leaves the family table in charge.
func TestModelsReasoningReachesTheSummarizer(t *testing.T) {
	c := defaultConfig()
	yml := "models: {my-azure-o3: {reasoning: true}, gpt-5-chat: {reasoning: false}, local: {context_window: 8192}}\n"
	if err := decodeConfigFile(&c, []byte(yml)); err != nil {
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
		if err := decodeConfigFile(&c, []byte(tt.file)); err != nil {
			t.Fatal(err)
		}
		if kept := squash.New(*c.pipelineConfig().Squash).ApplyCall(call(tt.cmd), out).Text == out; kept != tt.kept {
			t.Errorf("%q, %s: kept %v, want %v", tt.file, tt.cmd, kept, tt.kept)
		}
	}
}

func TestModelPricesFromConfig(t *testing.T) {
	c := defaultConfig()
	if err := decodeConfigFile(&c, []byte("models:\n  my-azure-gpt: {prices: {input: 3, cached_input: 0.3, output: 12}}\n  small: {context_window: 8192}\n")); err != nil {
		t.Fatal(err)
	}
	cost := c.proxyConfig().Cost
	if got := cost.PricesFor("my-azure-gpt"); got != (rewrite.Prices{Input: 3, CachedInput: 0.3, CacheWrite: 3, Output: 12}) {
		t.Errorf("my-azure-gpt prices = %+v", got)
	}
	if got := cost.PricesFor("small"); got != rewrite.DefaultPrices {
		t.Errorf("a models: entry without prices keeps the table's: %+v", got)
	}
	if err := decodeConfigFile(&c, []byte("models:\n  x: {prices: {input: -1}}\n")); err != nil {
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
