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
}

func newRecorder() *recorder { return &recorder{wrote: make(chan struct{}, 1024)} }

func (r *recorder) Write(p []byte) (int, error) {
	if r.gate != nil {
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
	rec.gate = make(chan struct{})
	w := New(rec, Options{Interval: time.Hour, FlushBytes: 1 << 10, MaxPending: 16 << 10})
	log := zerolog.New(w)
	// The flusher is stuck in its first write; every line after that waits
	// in at most MaxPending, the rest are dropped. None of these calls may
	// block: were they to, this test would hang.
	for i := range 10000 {
		log.Info().Int("n", i).Msg("request")
	}
	dropped := w.Dropped()
	if dropped == 0 {
		t.Fatal("nothing dropped with the output stuck")
	}
	close(rec.gate)
	w.Close()
	lines := rec.lines()
	if int64(len(lines)) != 10000-dropped+1 {
		t.Errorf("%d lines written, %d dropped: want %d+1 notice", len(lines), dropped, 10000-dropped)
	}
	last := lines[len(lines)-1]
	if !strings.Contains(last, fmt.Sprintf(`"dropped":%d,`, dropped)) || !strings.Contains(last, "lines dropped") {
		t.Errorf("the last line does not say what was dropped: %q", last)
	}
	prev := -1
	for _, l := range lines[:len(lines)-1] {
		var n int
		if _, err := fmt.Sscanf(l, `{"level":"info","n":%d,`, &n); err != nil || n <= prev {
			t.Fatalf("line %q out of order or torn (previous n %d)", l, prev)
		}
		prev = n
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
