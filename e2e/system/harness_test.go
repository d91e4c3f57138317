package system

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// These tests run the built ctxpress binary, compaction on with a low
// trigger, in front of strict fake upstreams on 127.0.0.1, and drive
// multi-turn conversations through it: codex-shaped Responses agents with
// the official openai-go client, a Claude-shaped Messages agent over plain
// HTTP. The fakes refuse what the provider refuses (internal/responsestest,
// internal/messagestest, each with the ledger of what the fake issued), so
// a conversation ctxpress breaks fails here as it would for a user.

// binaryProcess is a running `ctxpress serve` and its log lines.
type binaryProcess struct {
	url  string
	mu   sync.Mutex
	logs []string // guarded by mu: every stderr line so far
}

// runBinary starts bin with a config file of upstream (a fake of a
// provider's API: hosted, so not probed at startup), a db in a temp dir and
// extra (YAML), and collects its log.
func runBinary(t *testing.T, bin, upstream, extra string) *binaryProcess {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yml")
	yml := fmt.Sprintf("upstream: %s\nlocal_upstream: false\ndb: %s\n%s", upstream, filepath.Join(dir, "ctxpress.db"), extra)
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	_, url, sc := startBinary(t, bin, "--config", cfg)
	p := &binaryProcess{url: url}
	go func() {
		for sc.Scan() {
			p.mu.Lock()
			p.logs = append(p.logs, sc.Text())
			p.mu.Unlock()
		}
	}()
	return p
}

// checkLog waits for the access-log lines of n requests, then wants no
// panic, no error, every request answered 200, and no warning but those
// allowed says (nil: none).
func (p *binaryProcess) checkLog(t *testing.T, n int, allowed func(msg string) bool) {
	t.Helper()
	var lines []string
	requests := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		p.mu.Lock()
		lines = append(lines[:0], p.logs...)
		p.mu.Unlock()
		requests = 0
		for _, l := range lines {
			if gjson.Get(l, "message").Str == "request" {
				requests++
			}
		}
		if requests >= n {
			break
		}
	}
	if requests != n {
		t.Errorf("the log has %d request lines, want %d", requests, n)
	}
	for _, l := range lines {
		v := gjson.Parse(l)
		msg, level := v.Get("message").Str, v.Get("level").Str
		switch {
		case strings.Contains(strings.ToLower(l), "panic"):
			t.Errorf("the log shows a panic: %s", l)
		case msg == "request" && v.Get("status").Int() != http.StatusOK:
			t.Errorf("a request was not answered 200: %s", l)
		case level == "error" || level == "fatal":
			t.Errorf("the log has an error: %s", l)
		case level == "warn" && (allowed == nil || !allowed(msg)):
			t.Errorf("the log has a warning: %s", l)
		}
	}
}

// count returns how many log lines have message msg.
func (p *binaryProcess) count(msg string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.logs {
		if gjson.Get(l, "message").Str == msg {
			n++
		}
	}
	return n
}

// fakeTurn is one request a fake got and what it answered.
type fakeTurn struct {
	body    []byte
	summary bool
	status  int
	refusal string
	input   int // input tokens reported (or refused at)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// sse writes server-sent events, each flushed.
type sse struct {
	w   http.ResponseWriter
	seq int
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	return &sse{w: w}
}

func (s *sse) send(typ string, fields map[string]any) {
	fields["type"] = typ
	if strings.HasPrefix(typ, "response.") {
		fields["sequence_number"] = s.seq
		s.seq++
	}
	b, _ := json.Marshal(fields)
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", typ, b)
	s.w.(http.Flusher).Flush()
}

// toolText is the n-th tool output of a phase, ~1.2 KB, marked
// "<phase>/out<n>" so a test can tell where it went.
func toolText(phase string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "$ grep -n leap dateparse/*.go # %s/out%03d\n", phase, n)
	for i := 0; b.Len() < 1200; i++ {
		fmt.Fprintf(&b, "dateparse/parse_%d.go:%d: if year%%4 == 0 && (year%%100 != 0 || year%%400 == 0) { days = %d } // %s/out%03d\n", n, 10+i, 28+i%3, phase, n)
	}
	return b.String()
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// binaryCompaction is the config of the compaction scenarios: a trigger
// of 4,000 tokens, no background precompaction (every summary call is on
// the request path, so a test can tell when it came).
const binaryCompaction = "compaction:\n  enabled: true\n  threshold_tokens: 4000\n  precompact: false\n"

// waitForJSON GETs url into v until done says so (or 10 s pass).
func waitForJSON(t *testing.T, url string, v any, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("GET %s: %d %s", url, resp.StatusCode, raw)
		}
		if done() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %s", url, raw)
		}
	}
}

// fakeLog is what a fake upstream got and answered, in order.
type fakeLog struct {
	mu  sync.Mutex
	got []fakeTurn // guarded by mu
}

func (l *fakeLog) turns() []fakeTurn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]fakeTurn(nil), l.got...)
}
