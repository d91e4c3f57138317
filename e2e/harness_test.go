//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// modelName is what the tests call the model; llama-server serves whatever
// it loaded under any name.
const modelName = "stories260K"

// llama is a llama-server process the test controls (it kills and restarts
// it to test faults).
type llama struct {
	t     *testing.T
	bin   string
	model string
	port  int
	cmd   *exec.Cmd
	logf  *os.File
}

func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startLlama starts llama-server on a free loopback port and stops it at the
// end of the test.
func startLlama(t *testing.T) *llama {
	t.Helper()
	bin := os.Getenv("LLAMA_SERVER_BIN")
	if bin == "" {
		t.Fatal("LLAMA_SERVER_BIN is not set: run LLAMA_SERVER_BIN=$(.ci/llama-server.sh build) go test -tags e2e ./e2e/")
	}
	model := os.Getenv("CTXPRESS_MODEL")
	if model == "" {
		model = filepath.Join(repoRoot(t), "..", "shared", "models", "stories260K.gguf")
	}
	l := &llama{t: t, bin: bin, model: model, port: freePort(t)}
	l.start()
	t.Cleanup(l.kill)
	return l
}

func (l *llama) URL() string { return fmt.Sprintf("http://127.0.0.1:%d/v1", l.port) }

func (l *llama) start() {
	l.t.Helper()
	var err error
	l.logf, err = os.CreateTemp(l.t.TempDir(), "llama-*.log")
	if err != nil {
		l.t.Fatal(err)
	}
	l.cmd = exec.Command(l.bin, "-m", l.model, "--host", "127.0.0.1", "--port", fmt.Sprint(l.port),
		"-c", "2048", "-t", "1", "--no-webui")
	l.cmd.Stdout, l.cmd.Stderr = l.logf, l.logf
	if err := l.cmd.Start(); err != nil {
		l.t.Fatalf("starting llama-server: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/health", l.port))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, _ := os.ReadFile(l.logf.Name())
	l.t.Fatalf("llama-server not ready:\n%s", out)
}

// kill stops the server with SIGKILL, as a crash would.
func (l *llama) kill() {
	if l.cmd != nil && l.cmd.Process != nil {
		_ = l.cmd.Process.Kill()
		_ = l.cmd.Wait()
		l.cmd = nil
	}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// ctxpressBinary builds the real binary once per test run.
func ctxpressBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if bin := os.Getenv("CTXPRESS_BIN"); bin != "" { // a binary built elsewhere
			binPath = bin
			return
		}
		dir, err := os.MkdirTemp("", "ctxpress-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "ctxpress")
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// ctxpress is a running ctxpress binary.
type ctxpress struct {
	t    *testing.T
	cmd  *exec.Cmd
	URL  string // http://127.0.0.1:PORT
	mu   sync.Mutex
	logs []map[string]any // guarded by mu: JSON log lines so far
	done chan struct{}
}

// BaseURL is what a client uses as its OpenAI base URL.
func (c *ctxpress) BaseURL() string { return c.URL + "/v1" }

// startCtxpress runs `ctxpress serve` against upstream with the YAML config
// extra (appended to the basics) and db, and waits until it serves.
func startCtxpress(t *testing.T, upstream, db, extra string) *ctxpress {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "ctxpress.yml")
	yml := fmt.Sprintf("listen: 127.0.0.1:0\nupstream: %s\ndb: %s\nlog: {level: debug, format: json}\n%s", upstream, db, extra)
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ctxpressBinary(t), "serve", "--config", cfg)
	cmd.Env = append(os.Environ(), "CTXPRESS_LISTEN=", "CTXPRESS_UPSTREAM=", "CTXPRESS_DB=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &ctxpress{t: t, cmd: cmd, done: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			c.mu.Lock()
			c.logs = append(c.logs, line)
			c.mu.Unlock()
			if line["message"] == "ctxpress serving" {
				ready <- line["listen"].(string)
			}
		}
	}()
	select {
	case addr := <-ready:
		c.URL = "http://" + addr
	case <-c.done:
		t.Fatal("ctxpress exited before serving")
	case <-time.After(30 * time.Second):
		t.Fatal("ctxpress did not start")
	}
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			c.mu.Lock()
			for _, l := range c.logs {
				if l["message"] != "request" || l["level"] != "info" {
					b, _ := json.Marshal(l)
					t.Logf("ctxpress: %s", b)
				}
			}
			c.mu.Unlock()
		}
	})
	return c
}

// stop sends SIGTERM and waits for the process to exit.
func (c *ctxpress) stop() {
	if c.cmd.ProcessState != nil {
		return
	}
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	_ = c.cmd.Wait()
}

// Logs returns the JSON log lines whose message is msg.
func (c *ctxpress) Logs(msg string) []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []map[string]any
	for _, l := range c.logs {
		if l["message"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// waitLog waits until a log line with message msg satisfies cond.
func (c *ctxpress) waitLog(msg string, cond func(map[string]any) bool) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range c.Logs(msg) {
			if cond(l) {
				return l
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("no %q log line as expected", msg)
	return nil
}

func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

// readAll reads a response body and closes it.
func readAll(r io.ReadCloser) string {
	defer r.Close()
	b, _ := io.ReadAll(r)
	return string(b)
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
