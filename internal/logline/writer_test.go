package logline

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// recorder is an output that keeps what it is given and says when it is
// written to; gate, when set, holds every write until it is closed.
type recorder struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
	wrote  chan struct{}
	gate   chan struct{}
	// entered, when set, is signalled once a Write waits on gate.
	entered chan struct{}
}

func newRecorder() *recorder { return &recorder{wrote: make(chan struct{}, 1024)} }

func (r *recorder) Write(p []byte) (int, error) {
	if r.gate != nil {
		if r.entered != nil {
			select {
			case r.entered <- struct{}{}:
			default:
			}
		}
		<-r.gate
	}
	r.mu.Lock()
	r.b.Write(p)
	r.writes++
	r.mu.Unlock()
	select {
	case r.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(r.b.Bytes()))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func TestLogLinesArriveInOrderAndWholeAfterShutdown(t *testing.T) {
	rec := newRecorder()
	w := New(rec, Options{Interval: time.Hour})
	log := zerolog.New(w)
	for i := range 5000 {
		log.Info().Int("n", i).Msg("request")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines := rec.lines()
	if len(lines) != 5000 {
		t.Fatalf("got %d lines after Close, want 5000", len(lines))
	}
	for i, l := range lines {
		if want := fmt.Sprintf(`{"level":"info","n":%d,"message":"request"}`, i); l != want {
			t.Fatalf("line %d = %q, want %q", i, l, want)
		}
	}
	if rec.writes >= 5000/10 {
		t.Errorf("%d writes for 5000 lines: the output is not batched", rec.writes)
	}
}

func TestAWarningIsWrittenWithoutWaitingForTheInterval(t *testing.T) {
	rec := newRecorder()
	w := New(rec, Options{Interval: time.Hour})
	defer w.Close()
	log := zerolog.New(w)
	log.Info().Msg("first")
	log.Warn().Msg("trouble")
	<-rec.wrote // an hour's interval: only the warning can have woken it
	if got := strings.Join(rec.lines(), "|"); got != `{"level":"info","message":"first"}|{"level":"warn","message":"trouble"}` {
		t.Errorf("got %q", got)
	}
}

func TestAnInfoLineIsWrittenWithinTheInterval(t *testing.T) {
	rec := newRecorder()
	w := New(rec, Options{Interval: time.Millisecond})
	defer w.Close()
	l := zerolog.New(w)
	l.Info().Msg("alone")
	<-rec.wrote // without Close: the interval alone writes it
	if got := rec.lines(); len(got) != 1 {
		t.Errorf("got %q", got)
	}
}

func TestAStuckOutputDoesNotBlockLoggingAndCountsWhatItDrops(t *testing.T) {
	rec := newRecorder()
	rec.gate, rec.entered = make(chan struct{}), make(chan struct{}, 1)
	w := New(rec, Options{Interval: time.Hour, FlushBytes: 1 << 10, MaxPending: 16 << 10})
	log := zerolog.New(w)
	// Log until the flusher is stuck in its first write...
	n := 0
	for stuck := false; !stuck; n++ {
		log.Info().Int("n", n).Msg("request")
		select {
		case <-rec.entered:
			stuck = true
		default:
		}
	}
	// ...then every line waits in at most MaxPending, the rest are
	// dropped. None of these calls may block: were they to, this test
	// would hang.
	for range 10000 {
		log.Info().Int("n", n).Msg("request")
		n++
	}
	dropped := w.Dropped()
	if dropped == 0 {
		t.Fatal("nothing dropped with the output stuck")
	}
	close(rec.gate)
	w.Close()
	// Each flush after drops says how many (the flusher may have swapped
	// its first batch after the first drops): the notices add up to every
	// line dropped, the last line is one, and the kept lines are in order.
	lines := rec.lines()
	var noticed, notices int64
	prev := -1
	for _, l := range lines {
		var k int64
		if _, err := fmt.Sscanf(l, `{"level":"warn","dropped":%d,`, &k); err == nil && strings.Contains(l, "lines dropped") {
			noticed += k
			notices++
			continue
		}
		var i int
		if _, err := fmt.Sscanf(l, `{"level":"info","n":%d,`, &i); err != nil || i <= prev {
			t.Fatalf("line %q out of order or torn (previous n %d)", l, prev)
		}
		prev = i
	}
	if noticed != dropped {
		t.Errorf("the notices say %d lines dropped, %d were", noticed, dropped)
	}
	if int64(len(lines))-notices != int64(n)-dropped {
		t.Errorf("%d lines kept of %d logged with %d dropped", int64(len(lines))-notices, n, dropped)
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "lines dropped") {
		t.Errorf("the last line does not say what was dropped: %q", last)
	}
}

func TestConcurrentLoggersKeepEveryLineWhole(t *testing.T) {
	rec := newRecorder()
	w := New(rec, Options{FlushBytes: 512, Interval: time.Millisecond, Console: true})
	log := zerolog.New(w)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				log.Info().Int("g", g).Int("n", i).Str("path", "/v1/embeddings").Msg("request")
			}
		}()
	}
	wg.Wait()
	w.Close()
	lines := rec.lines()
	if len(lines) != 8*500 {
		t.Fatalf("got %d lines, want %d", len(lines), 8*500)
	}
	next := make([]int, 8)
	for _, l := range lines {
		var g, n int
		if _, err := fmt.Sscanf(l, "INF request g=%d n=%d path=/v1/embeddings", &g, &n); err != nil || next[g] != n {
			t.Fatalf("line %q torn or out of its goroutine's order (want n=%d)", l, next[g])
		}
		next[g]++
	}
}

func TestLinesAfterCloseStillReachTheOutput(t *testing.T) {
	rec := newRecorder()
	w := New(rec, Options{Console: true})
	w.Close()
	l := zerolog.New(w)
	l.Info().Msg("ctxpress stopped")
	if got := rec.lines(); len(got) != 1 || got[0] != "INF ctxpress stopped" {
		t.Errorf("got %q", got)
	}
}
