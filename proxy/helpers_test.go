package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/wire/chat"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/state"
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
	return p.rec.Pending() == 0
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
	return startProxyConfigured(t, unprobed(cfg), deps)
}

// startProxyConfigured is startProxyWith with cfg as given: an upstream
// it does not say is local or hosted is probed at startup.
func startProxyConfigured(t testing.TB, cfg Config, deps Deps) *testProxy {
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
	// Serve must have started before a Shutdown (at cleanup) finds its
	// listener: a healthz answer says it has.
	if resp, err := http.Get("http://" + ln.Addr().String() + "/ctxpress/healthz"); err != nil {
		t.Fatalf("the server does not answer: %v", err)
	} else {
		resp.Body.Close()
	}
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
var serverLifeFrames = []string{"proxy.(*Server).Serve(", "recorder.(*Recorder).run(", "admin.(*Bus).postHooks(", "state.startSweeper.", "state.startMapTrimmer."}

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
	var stray []string
	if !poll(func() bool { stray = strayGoroutines(); return len(stray) == 0 }) {
		t.Fatalf("%d goroutines left behind:\n\n%s", len(stray), strings.Join(stray, "\n\n"))
	}
}

func adminDo(t *testing.T, method, url string, header map[string]string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// chatDeps is the real pipeline (with squash) and a real bbolt store.
func chatDeps(t testing.TB) (Deps, state.Store) {
	t.Helper()
	st, err := state.OpenBolt(filepath.Join(t.TempDir(), "ctxpress.db"), state.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := rewrite.New(rewrite.Config{
		Format: chat.Format{},
		Squash: &squash.Config{}, // the pipeline's own token counter, as in production
		Dedup:  rewrite.DefaultDedupConfig(),
	})
	return Deps{Pipeline: p, Store: st}, st
}

// toolTurn is an agent request whose last message is a large tool output.
func toolTurn() []openai.ChatCompletionMessageParamUnion {
	call := openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
		ID: "call_1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "bash", Arguments: `{"command":"make"}`},
	}}
	return []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You are a coding agent."),
		openai.UserMessage("Build the project and fix the error."),
		{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{call}}},
		openai.ToolMessage(bigLog(), "call_1"),
	}
}

const testTrigger = 4000

// openStoreAt opens a bbolt store the test closes itself (restarts) or at
// cleanup.
// holdSummaries makes up's summary calls wait until release is called
// (once or more), then answer a short summary: concurrent turns can be
// seen queueing behind one compaction.
func holdSummaries(up *openaitest.Server) (release func()) {
	slow := make(chan struct{})
	var releaseOnce sync.Once
	up.Handle(openaitest.SummaryPath, func(w http.ResponseWriter, r *http.Request) {
		<-slow
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"s","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"## Active Task\nkeep going"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5}}`)
	})
	return func() { releaseOnce.Do(func() { close(slow) }) }
}

// restartOnSameDB shuts p down, closes its store st and starts a new
// ctxpress of cfg on the same bbolt file, as a restart would.
func restartOnSameDB(t *testing.T, p *testProxy, st state.Store, dbPath string, cfg Config, pipeline *rewrite.Pipeline) *testProxy {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st2 := openStoreAt(t, dbPath)
	t.Cleanup(func() { st2.Close() })
	return startProxyWith(t, cfg, Deps{Pipeline: pipeline, Store: st2})
}

func openStoreAt(t *testing.T, path string) state.Store {
	t.Helper()
	st, err := state.OpenBolt(path, state.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// startWithStore starts a proxy configured by cfg with the test pipeline
// and a bbolt store in a temp dir, closed at cleanup.
func startWithStore(t *testing.T, cfg Config) (*testProxy, state.Store) {
	t.Helper()
	st := openStoreAt(t, filepath.Join(t.TempDir(), "db"))
	t.Cleanup(func() { st.Close() })
	return startProxyWith(t, cfg, Deps{Pipeline: pipelineForTest(), Store: st}), st
}

// agent drives a tool-using conversation through ctxpress with the official
// client: every turn appends the assistant's tool call and its result.
type agent struct {
	t       *testing.T
	client  openai.Client
	convID  string
	history []openai.ChatCompletionMessageParamUnion
	tools   []openai.ChatCompletionToolUnionParam // offered on every turn; none when nil
	turns   int
}

func newAgent(t *testing.T, baseURL, convID string) *agent {
	return &agent{
		t:      t,
		client: openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey("sk-agent"), option.WithMaxRetries(0)),
		convID: convID,
		history: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are a coding agent. Use the tools to fix the bug."),
			openai.UserMessage("The test TestParseDate fails on leap years; find and fix the bug in dateparse/parse.go."),
		},
	}
}

// toolOutput is a distinct ~1.2 KB result (under the squash floor, so the
// history really grows).
func toolOutput(turn int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "$ grep -n leap dateparse/*.go (turn %d)\n", turn)
	for i := 0; b.Len() < 1200; i++ {
		fmt.Fprintf(&b, "dateparse/parse_%d.go:%d: if year%%4 == 0 && (year%%100 != 0 || year%%400 == 0) { days = %d }\n", turn, 10+i, 28+i%3)
	}
	return b.String()
}

// turn sends the history, checks the answer, and appends a tool call and
// its result. It returns the response headers.
func (a *agent) turn(stream bool, extra ...option.RequestOption) http.Header {
	a.t.Helper()
	a.turns++
	var headers http.Header
	opts := append([]option.RequestOption{
		option.WithHeader("X-Session-ID", a.convID),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			resp, err := next(r)
			if resp != nil {
				headers = resp.Header
			}
			return resp, err
		}),
	}, extra...)
	params := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: a.history, Tools: a.tools}
	var content string
	if stream {
		s := a.client.Chat.Completions.NewStreaming(context.Background(), params, opts...)
		acc := openai.ChatCompletionAccumulator{}
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			a.t.Fatalf("turn %d: %v", a.turns, err)
		}
		content = acc.Choices[0].Message.Content
	} else {
		got, err := a.client.Chat.Completions.New(context.Background(), params, opts...)
		if err != nil {
			a.t.Fatalf("turn %d: %v", a.turns, err)
		}
		content = got.Choices[0].Message.Content
	}
	if content == "" {
		a.t.Fatalf("turn %d: empty answer", a.turns)
	}
	id := "call_" + strconv.Itoa(a.turns)
	call := openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
		ID: id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "bash",
			Arguments: fmt.Sprintf(`{"command":"grep -n leap dateparse/*.go # %d"}`, a.turns)},
	}}
	a.history = append(a.history,
		openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
			Content:   openai.ChatCompletionAssistantMessageParamContentUnion{OfString: openai.String(content)},
			ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{call}}},
		openai.ToolMessage(toolOutput(a.turns), id))
	return headers
}

// messagesOf returns the raw messages of a request body.
func messagesOf(body []byte) []string {
	var out []string
	for _, m := range gjson.GetBytes(body, "messages").Array() {
		out = append(out, m.Raw)
	}
	return out
}

func isPrefix(a, b []string) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

type openAIError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	} `json:"error"`
}

func decodeError(t *testing.T, resp *http.Response) openAIError {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e openAIError
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" {
		t.Fatalf("not an OpenAI error (%v): %s", err, body)
	}
	if e.Error.Type != "ctxpress_error" || !strings.HasPrefix(e.Error.Message, "ctxpress: ") {
		t.Fatalf("error not marked as ctxpress's: %+v", e.Error)
	}
	return e
}

// pipelineWithShapes is pipelineForTest with squash shapes for metrics.
func pipelineWithShapes() *rewrite.Pipeline {
	return rewrite.New(rewrite.Config{
		Format: chat.Format{},
		Squash: &squash.Config{}, // the pipeline's own token counter, as in production
		Dedup:  rewrite.DefaultDedupConfig(),
	})
}

// scrape fetches /metrics and parses the text format.
func scrape(t *testing.T, url string, header ...string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	if len(header) == 2 {
		req.Header.Set(header[0], header[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("/metrics Content-Type %q", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not the Prometheus text format: %v", err)
	}
	return fams
}

// value returns the value of the metric in fams with exactly these labels
// (name=value pairs); a histogram gives its sample count. A missing
// series is 0, as Prometheus would read an unset counter.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.Metric {
		if len(m.Label) != len(labels)/2 {
			continue
		}
		for i := 0; i < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return 0
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func newOpenAIClient(baseURL string) openai.Client {
	return openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey("sk-test-key"), option.WithMaxRetries(0))
}

// send makes one request with the given headers and returns status, body
// and response headers.
func send(t *testing.T, method, url, body string, headers map[string]string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func postChat(t *testing.T, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	if !poll(cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// poll reports whether cond holds within 10 s. It is for state with no
// event to wait on (goroutines ending, a record written off the request
// path); it orders nothing: cond checks the outcome itself.
func poll(cond func() bool) bool {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
