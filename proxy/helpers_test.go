package proxy

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type testProxy struct {
	*Server
	URL  string // http://127.0.0.1:PORT
	logs *syncBuffer
}

// BaseURL is what a client uses as its OpenAI base URL.
func (p *testProxy) BaseURL() string { return p.URL + "/v1" }

// recorderDrained reports whether every turn handed to the recorder is in
// the store (or was dropped). A chat answer ends after its turn was
// handed over (a stream's last bytes too), so once a client has read one
// to its end, this turns true when the turn's write has committed. The recorder's
// callback (metrics, events) runs after that: wait for a metric itself.
func (p *testProxy) recorderDrained() bool {
	p.rec.pendingMu.Lock()
	defer p.rec.pendingMu.Unlock()
	return len(p.rec.pending) == 0
}

// startProxy serves a Server for cfg on 127.0.0.1 and shuts it down at the
// end of the test.
func startProxy(t testing.TB, cfg Config) *testProxy {
	t.Helper()
	return startProxyWith(t, cfg, Deps{})
}

// startProxyWith is startProxy with the chat pipeline and store of deps.
func startProxyWith(t testing.TB, cfg Config, deps Deps) *testProxy {
	t.Helper()
	logs := &syncBuffer{}
	s, err := New(cfg, zerolog.New(logs), deps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-served
	})
	return &testProxy{Server: s, URL: "http://" + ln.Addr().String(), logs: logs}
}

// within fails the test if fn does not return in d: a deadlock guard, not a
// timing assertion.
func within(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not finish within %v", what, d)
	}
}

// testClock is a settable clock for Config.Clock: a test moves time on
// instead of waiting for it.
type testClock struct {
	mu sync.Mutex
	t  time.Time // guarded by mu
}

// newTestClock starts at a fixed instant, without a monotonic reading, so
// times read back from the store compare equal.
func newTestClock() *testClock {
	return &testClock{t: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// moduleDir is the repository's root on disk, where its stack frames' files
// are.
var moduleDir = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}()

// serverLifeFrames are the goroutines a running Server (or its store) keeps
// for its whole life.
var serverLifeFrames = []string{"proxy.(*Server).Serve(", "proxy.(*recorder).run(", "proxy.(*eventBus).postHooks(", "state.startSweeper."}

// strayGoroutines returns the stacks of goroutines, other than the
// caller's, that run ctxpress code beyond a server's own (serverLifeFrames):
// a request, a relay or a compaction left behind. Connection pools (the
// client's, the upstream's, the summariser's) keep goroutines of their own
// for as long as they like; those run no ctxpress code and are not counted.
func strayGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var stray []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 || !runsOwnCode(g) {
			continue // the caller, or not ctxpress's
		}
		life := false
		for _, f := range serverLifeFrames {
			life = life || strings.Contains(g, f)
		}
		if !life {
			stray = append(stray, g)
		}
	}
	return stray
}

// runsOwnCode reports whether the goroutine dump g has a frame in a
// non-test file of this module.
func runsOwnCode(g string) bool {
	for _, line := range strings.Split(g, "\n") {
		if f, ok := strings.CutPrefix(line, "\t"+moduleDir+"/"); ok && !strings.Contains(f, "_test.go:") {
			return true
		}
	}
	return false
}

// noStrayGoroutines fails the test unless every goroutine running
// ctxpress code for a request ends (they end asynchronously: a relay's
// watchdog, a handler unwinding).
func noStrayGoroutines(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		stray := strayGoroutines()
		if len(stray) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left behind:\n\n%s", len(stray), strings.Join(stray, "\n\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
