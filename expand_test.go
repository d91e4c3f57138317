package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/internal/redistest"
	"github.com/ctxpress/ctxpress/proxy"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// cliOriginals are what a turn replaced: a log with both line ends and no
// final newline, and bytes that are not text.
var cliOriginals = []expand.Original{
	expand.New(expand.KindSquash, "bash", "=== RUN TestA\n--- FAIL: TestA\r\n    a_test.go:12: want 4, got 5\nFAIL\tpkg\t0.01s"),
	expand.New(expand.KindPrune, "", "\x00\xff not UTF-8 \xc3\x28\n"),
}

var aliceNS = state.Namespace([]byte("Bearer sk-alice"))

func runExpand(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"expand"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// seedOriginals keeps cliOriginals in alice's namespace of the db at path,
// and closes it, as a server that stopped would.
func seedOriginals(t *testing.T, path string) {
	t.Helper()
	st, err := state.OpenBolt(path, state.BoltOptions{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutOriginals(aliceNS, cliOriginals); err != nil {
		t.Fatal(err)
	}
}

// ctxpress expand prints an original byte-exact from the db a server left,
// or the lines asked as sed -n prints them; a key or namespace not its
// own does not find it; mistakes exit non-zero, saying what is wrong.
func TestExpandCLIOnTheDB(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ctxpress.db")
	seedOriginals(t, db)
	for _, o := range cliOriginals {
		for _, extra := range [][]string{nil, {"--key", "sk-alice"}, {"--namespace", aliceNS}} {
			code, out, errs := runExpand(t, append([]string{o.Ref, "--db", db}, extra...)...)
			if code != 0 || out != o.Text {
				t.Fatalf("expand %s %v: %d %q %s; want the original byte-exact", o.Ref, extra, code, out, errs)
			}
		}
	}
	o := cliOriginals[0]
	file := filepath.Join(t.TempDir(), "original.txt")
	if err := os.WriteFile(file, []byte(o.Text), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, lines := range []string{"2-3", "3", "4-", "4-9", "9-12", "1-4", "2,3"} {
		code, out, errs := runExpand(t, o.Ref, "--db", db, "--lines", lines)
		want := expand.Slice(o.Text, mustLines(t, lines))
		if code != 0 || out != want {
			t.Errorf("--lines %s: %d %q %s; want %q", lines, code, out, errs, want)
		}
		if _, err := exec.LookPath("sed"); err == nil {
			script := strings.Replace(lines, "-", ",", 1) + "p" // 2-3 is sed's 2,3p
			if strings.HasSuffix(lines, "-") {
				script = strings.TrimSuffix(lines, "-") + ",$p"
			}
			sed, err := exec.Command("sed", "-n", script, file).Output()
			if err != nil || string(sed) != out {
				t.Errorf("--lines %s: %q, sed -n '%s' prints %q (%v)", lines, out, script, sed, err)
			}
		}
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{o.Ref, "--key", "sk-bob"}, 1, "no original kept under " + o.Ref + " for that key"},
		{[]string{o.Ref, "--namespace", state.Namespace([]byte("Bearer sk-bob"))}, 1, "no original kept"},
		{[]string{expand.Ref("never kept")}, 1, "in any namespace"},
		{[]string{"3F9A2C1B4D5E"}, 2, "is not a reference"},
		{[]string{"squash"}, 2, "is not a reference"},
		{nil, 2, "want one REF"},
		{[]string{o.Ref, o.Ref}, 2, "want one REF"},
		{[]string{o.Ref, "--lines", "9-2"}, 2, "--lines"},
		{[]string{o.Ref, "--key", "a", "--namespace", "b"}, 2, "give one"},
	} {
		code, out, errs := runExpand(t, append(c.args, "--db", db)...)
		if code != c.code || out != "" || !strings.Contains(errs, c.says) {
			t.Errorf("expand %v: %d %q %q; want %d saying %q", c.args, code, out, errs, c.code, c.says)
		}
	}
	if code, out, _ := runExpand(t, "--help"); code != 0 || !strings.Contains(out, "ctxpress expand REF") {
		t.Errorf("--help: %d %s", code, out)
	}
}

func mustLines(t *testing.T, s string) expand.Lines {
	t.Helper()
	l, err := expand.ParseLines(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// While a server holds the db, ctxpress expand asks its admin API (the
// config's listen address and admin token), and prints the same bytes.
func TestExpandCLIWhileServing(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "ctxpress.db")
	seedOriginals(t, db)
	st, err := state.OpenBolt(db, state.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := proxy.New(proxy.Config{Upstream: "http://127.0.0.1:1/v1", AdminToken: "tok"}, zerolog.Nop(), proxy.Deps{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	cfg := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("listen: %s\ndb: %s\nadmin_token: tok\n", ln.Addr(), db)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, o := range cliOriginals {
		for _, extra := range [][]string{nil, {"--key", "sk-alice"}} {
			if code, out, errs := runExpand(t, append([]string{o.Ref, "--config", cfg}, extra...)...); code != 0 || out != o.Text {
				t.Fatalf("expand %s %v through the server: %d %q %s", o.Ref, extra, code, out, errs)
			}
		}
	}
	o := cliOriginals[0]
	if code, out, _ := runExpand(t, o.Ref, "--config", cfg, "--lines", "3"); code != 0 || out != "    a_test.go:12: want 4, got 5\n" {
		t.Errorf("--lines 3 through the server: %d %q", code, out)
	}
	if code, out, errs := runExpand(t, o.Ref, "--config", cfg, "--key", "sk-bob"); code != 1 || out != "" || !strings.Contains(errs, "no original kept") {
		t.Errorf("another key through the server: %d %q %s", code, out, errs)
	}
	if code, _, errs := runExpand(t, o.Ref, "--server", "http://"+ln.Addr().String(), "--admin-token", "wrong"); code != 1 || !strings.Contains(errs, "--admin-token") {
		t.Errorf("wrong admin token: %d %s", code, errs)
	}
}

// With state.backend redis, ctxpress expand reads what any replica kept.
func TestExpandCLIOnRedis(t *testing.T) {
	r := redistest.Need(t)
	replica, err := state.OpenRedis(state.RedisOptions{URL: r.URL(), Prefix: "cli:", SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Close()
	if err := replica.PutOriginals(aliceNS, cliOriginals); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("state: {backend: redis, url: %q, prefix: \"cli:\"}\n", r.URL())), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, o := range cliOriginals {
		if code, out, errs := runExpand(t, o.Ref, "--config", cfg, "--key", "sk-alice"); code != 0 || out != o.Text {
			t.Errorf("expand %s from Redis: %d %q %s", o.Ref, code, out, errs)
		}
	}
	if code, _, errs := runExpand(t, cliOriginals[0].Ref, "--config", cfg, "--key", "sk-bob"); code != 1 || !strings.Contains(errs, "no original kept") {
		t.Errorf("another key on Redis: %d %s", code, errs)
	}
}

// --key names the namespace the server gives that key's conversations,
// however the client sends it and whatever the namespace mode: checked
// against a real server's records, so the two cannot drift apart.
func TestKeyNamespacesAreTheServers(t *testing.T) {
	up := openaitest.New(t)
	for _, c := range []struct {
		name, yaml string
		key        string
		headers    map[string]string
	}{
		{"a provider key as Bearer", "", "sk-alice", map[string]string{"Authorization": "Bearer sk-alice"}},
		{"a provider key as x-api-key", "", "sk-ant-alice", map[string]string{"x-api-key": "sk-ant-alice"}},
		{"a client key as x-api-key", "auth: {keys: [cx-alice]}\n", "cx-alice", map[string]string{"x-api-key": "cx-alice"}},
		{"a client key in X-Ctxpress-Key", "auth: {keys: [cx-alice]}\n", "cx-alice", map[string]string{proxy.HeaderClientKey: "cx-alice", "Authorization": "Bearer sk-other"}},
		{"a header of the operator's", "namespace: header X-User\n", "u-17", map[string]string{"X-User": "u-17"}},
		{"one namespace for all", "namespace: none\n", "anything", map[string]string{"Authorization": "Bearer sk-x"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "config.yml")
			if err := os.WriteFile(file, []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := cliConfig(file, "")
			if err != nil {
				t.Fatal(err)
			}
			pc := cfg.proxyConfig()
			pc.Upstream, pc.Routes = up.BaseURL(), nil
			local := true
			pc.LocalUpstream = &local
			st := state.NewMemoryWithOptions(state.MemoryOptions{SweepInterval: -1})
			defer st.Close()
			srv, err := proxy.New(pc, zerolog.Nop(), proxy.Deps{Pipeline: rewrite.New(cfg.pipelineConfig()), Store: st})
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go srv.Serve(ln)
			defer srv.Shutdown(context.Background())
			req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/v1/chat/completions",
				strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Conversation-ID", "ns-check")
			for k, v := range c.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			// The turn is handed to the recorder before its answer ends.
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("chat turn: %d", resp.StatusCode)
			}
			srv.WaitRecorded()
			recs, err := st.List(state.ListOptions{ID: "ns-check"})
			if err != nil || len(recs) != 1 {
				t.Fatalf("records: %d, %v", len(recs), err)
			}
			if got, want := recs[0].Key.Namespace, keyNamespaces(cfg, c.key); !slices.Contains(want, got) {
				t.Errorf("the server's namespace %s is not among --key's %v", got, want)
			}
		})
	}
}

// expand.max_bytes bounds the originals of the store serve opens, whatever
// its backend.
func TestExpandMaxBytesReachesTheStore(t *testing.T) {
	first := expand.New(expand.KindSquash, "bash", strings.Repeat("a", 3000))
	second := expand.New(expand.KindSquash, "bash", strings.Repeat("b", 3000))
	for _, backend := range []string{backendBolt, backendMemory} {
		cfg := defaultConfig()
		cfg.State.Backend, cfg.DB = backend, filepath.Join(t.TempDir(), "ctxpress.db")
		cfg.Expand.MaxBytes = 5000
		st, err := openStore(cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range []expand.Original{first, second} {
			if err := st.PutOriginals(aliceNS, []expand.Original{o}); err != nil {
				t.Fatal(err)
			}
		}
		_, firstKept, _ := st.GetOriginal(aliceNS, first.Ref)
		_, secondKept, _ := st.GetOriginal(aliceNS, second.Ref)
		if firstKept || !secondKept {
			t.Errorf("%s: kept first %v, second %v; want only the second within expand.max_bytes", backend, firstKept, secondKept)
		}
		st.Close()
	}
}
