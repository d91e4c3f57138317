package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// stats collects the outcome of one phase.
type stats struct {
	mu          sync.Mutex
	lat         []time.Duration // guarded by mu
	errs        atomic.Int64
	firstErr    atomic.Value // string
	compacted   atomic.Int64 // answers with X-Ctxpress-Compacted: true
	streamed    atomic.Int64
	completed   atomic.Int64 // answered without error, for progress lines
	start, stop time.Time
}

func (s *stats) fail(format string, args ...any) {
	s.errs.Add(1)
	s.firstErr.CompareAndSwap(nil, fmt.Sprintf(format, args...))
}

func (s *stats) add(lat []time.Duration) {
	s.mu.Lock()
	s.lat = append(s.lat, lat...)
	s.mu.Unlock()
}

type summary struct {
	n        int
	rps      float64
	p50, p99 time.Duration
	errs     int64
	firstErr string
}

// rate is the requests answered per second.
func (s *stats) rate() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.stop.Sub(s.start).Seconds(); d > 0 {
		return float64(len(s.lat)) / d
	}
	return 0
}

func (s *stats) summary() summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	lat := slices.Clone(s.lat)
	slices.Sort(lat)
	out := summary{n: len(lat), errs: s.errs.Load()}
	if e, ok := s.firstErr.Load().(string); ok {
		out.firstErr = e
	}
	if len(lat) > 0 {
		out.rps = float64(len(lat)) / s.stop.Sub(s.start).Seconds()
		out.p50 = lat[len(lat)/2]
		out.p99 = lat[len(lat)*99/100]
	}
	return out
}

// mergedSummary is the summary of rounds taken as one run: their requests
// over their summed time, percentiles over all their latencies.
func mergedSummary(rounds []*stats) summary {
	all := &stats{}
	var d time.Duration
	for _, r := range rounds {
		all.add(r.lat)
		all.errs.Add(r.errs.Load())
		if e, ok := r.firstErr.Load().(string); ok {
			all.firstErr.CompareAndSwap(nil, e)
		}
		d += r.stop.Sub(r.start)
	}
	all.stop = all.start.Add(d)
	return all.summary()
}

func newClient(conc int) *fasthttp.Client {
	return &fasthttp.Client{
		MaxConnsPerHost:     conc * 2,
		ReadBufferSize:      64 << 10,
		WriteBufferSize:     64 << 10,
		MaxResponseBodySize: 64 << 20,
		ReadTimeout:         60 * time.Second,
		WriteTimeout:        60 * time.Second,
	}
}

// fixedLoad posts the same chat body from conc workers for d: the
// pass-through comparison, identical requests for every target.
func fixedLoad(baseURL, path string, body []byte, conc int, d time.Duration) *stats {
	want := []byte(`"finish_reason":"stop"`)
	if path == "/embeddings" {
		want = []byte(`"embedding"`)
	}
	client := newClient(conc)
	st := &stats{start: time.Now()}
	stop := st.start.Add(d)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			var mine []time.Duration
			for time.Now().Before(stop) {
				req.Reset()
				req.SetRequestURI(baseURL + path)
				req.Header.SetMethod(fasthttp.MethodPost)
				req.Header.SetContentType("application/json")
				req.Header.Set("Authorization", "Bearer sk-load")
				req.SetBodyRaw(body)
				t0 := time.Now()
				err := client.Do(req, resp)
				el := time.Since(t0)
				if err != nil {
					st.fail("%v", err)
					continue
				}
				if resp.StatusCode() != 200 || !bytes.Contains(resp.Body(), want) {
					st.fail("status %d: %.200s", resp.StatusCode(), resp.Body())
					continue
				}
				mine = append(mine, el)
			}
			st.add(mine)
		}()
	}
	wg.Wait()
	st.stop = time.Now()
	return st
}

// simAgent is one simulated coding agent: it runs a conversation of up to
// maxTurns turns (each a tool call and its result appended to the history),
// then starts a new one, as an agent session ends and another begins.
type simAgent struct {
	id       int
	conv     int
	turns    int
	maxTurns int
	rng      *rand.Rand
	msgs     [][]byte // rendered messages
}

func newSimAgent(id, maxTurns int) *simAgent {
	a := &simAgent{id: id, maxTurns: maxTurns, rng: rand.New(rand.NewPCG(uint64(id), 42))}
	a.reset()
	return a
}

func (a *simAgent) reset() {
	a.conv++
	a.turns = 0
	a.msgs = [][]byte{
		[]byte(`{"role":"system","content":"You are a coding agent working in a Go repository. Use the tools to inspect files, run commands and fix bugs. Keep answers short."}`),
		fmt.Appendf(nil, `{"role":"user","content":"Task %d-%d: the test suite fails after the last refactor; find the cause and fix it."}`, a.id, a.conv),
	}
}

func (a *simAgent) convID() string { return fmt.Sprintf("load-%d-%d", a.id, a.conv) }

// body renders the request for the current history.
func (a *simAgent) body(stream bool) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"gpt-4o","stream":`)
	if stream {
		b.WriteString("true")
	} else {
		b.WriteString("false")
	}
	b.WriteString(`,"tools":[{"type":"function","function":{"name":"bash","description":"Run a shell command","parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}},{"type":"function","function":{"name":"read_file","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}}],"messages":[`)
	for i, m := range a.msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// advance appends the assistant's tool call and the tool's result.
func (a *simAgent) advance() {
	a.turns++
	call := fmt.Sprintf("call_%d_%d", a.conv, a.turns)
	var tool, args, out string
	switch a.rng.IntN(4) {
	case 0: // a build or test log: squashable
		tool, args = "bash", fmt.Sprintf(`{\"command\":\"go test ./... -run T%d\"}`, a.turns)
		var s strings.Builder
		n := 40 + a.rng.IntN(80)
		for i := range n {
			fmt.Fprintf(&s, "=== RUN   TestParse/case_%d\\n--- PASS: TestParse/case_%d (0.00s)\\n", i, i)
		}
		fmt.Fprintf(&s, "--- FAIL: TestParseDate (0.00s)\\n    parse_test.go:%d: got 28, want 29\\nFAIL\\nexit status 1", 40+a.turns)
		out = s.String()
	case 1: // JSON from an API
		tool, args = "bash", fmt.Sprintf(`{\"command\":\"curl -s localhost:8080/api/items?page=%d\"}`, a.turns)
		var s strings.Builder
		s.WriteString(`{\"items\":[`)
		n := 10 + a.rng.IntN(30)
		for i := range n {
			if i > 0 {
				s.WriteString(",")
			}
			fmt.Fprintf(&s, `{\"id\":%d,\"name\":\"item-%d\",\"status\":\"active\",\"tags\":[\"a\",\"b\"]}`, i, i*a.turns)
		}
		s.WriteString(`],\"next\":null}`)
		out = s.String()
	case 2: // a file read: exempt from squash, byte-exact
		tool, args = "read_file", fmt.Sprintf(`{\"path\":\"parse/date_%d.go\"}`, a.turns)
		var s strings.Builder
		for i := range 20 + a.rng.IntN(40) {
			fmt.Fprintf(&s, "%d\\tif year%%4 == 0 && (year%%100 != 0 || year%%400 == 0) { days[%d] = 29 }\\n", i+1, i)
		}
		out = s.String()
	default: // a short answer
		tool, args = "bash", fmt.Sprintf(`{\"command\":\"git status --short # %d\"}`, a.turns)
		out = fmt.Sprintf(" M parse/date.go\\n M parse/date_test.go\\n?? parse/leap_%d.go", a.turns)
	}
	a.msgs = append(a.msgs,
		fmt.Appendf(nil, `{"role":"assistant","content":"Checking.","tool_calls":[{"id":"%s","type":"function","function":{"name":"%s","arguments":"%s"}}]}`, call, tool, args),
		fmt.Appendf(nil, `{"role":"tool","tool_call_id":"%s","content":"%s"}`, call, out))
	if a.turns >= a.maxTurns {
		a.reset()
	}
}

// agentLoad runs n agents in a closed loop (each sends its next turn as soon
// as the last is answered) against baseURL until stop is closed.
func agentLoad(baseURL string, n, maxTurns int, st *stats, stop <-chan struct{}) {
	client := newClient(n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := newSimAgent(i, maxTurns)
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			var mine []time.Duration
			defer func() { st.add(mine) }()
			for turn := 0; ; turn++ {
				select {
				case <-stop:
					return
				default:
				}
				stream := turn%2 == 1
				req.Reset()
				req.SetRequestURI(baseURL + "/chat/completions")
				req.Header.SetMethod(fasthttp.MethodPost)
				req.Header.SetContentType("application/json")
				req.Header.Set("Authorization", "Bearer sk-load")
				req.Header.Set("X-Session-ID", a.convID())
				req.SetBodyRaw(a.body(stream))
				t0 := time.Now()
				err := client.Do(req, resp)
				el := time.Since(t0)
				switch {
				case err != nil:
					st.fail("agent %d: %v", i, err)
				case resp.StatusCode() != 200:
					st.fail("agent %d: status %d: %.200s", i, resp.StatusCode(), resp.Body())
				case stream && !bytes.HasSuffix(resp.Body(), []byte("data: [DONE]\n\n")):
					st.fail("agent %d: stream without [DONE]: %.200s", i, resp.Body())
				case !stream && !bytes.Contains(resp.Body(), []byte(`"finish_reason":"stop"`)):
					st.fail("agent %d: answer without a choice: %.200s", i, resp.Body())
				default:
					mine = append(mine, el)
					st.completed.Add(1)
					if stream {
						st.streamed.Add(1)
					}
					if string(resp.Header.Peek("X-Ctxpress-Compacted")) == "true" {
						st.compacted.Add(1)
					}
				}
				a.advance()
			}
		}()
	}
	wg.Wait()
}
