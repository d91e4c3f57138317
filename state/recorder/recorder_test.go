package recorder

import (
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
)

// batchStore holds each UpdateMany until released and keeps the keys of
// every batch it was given.
type batchStore struct {
	state.Store
	entered, release chan struct{}
	mu               sync.Mutex
	batches          [][]state.Key
}

// newBatchStore is a batchStore over a bbolt file of t's, and the file's
// store; the first released batches pass at once, the others wait for a
// release.
func newBatchStore(t *testing.T, released int) (*batchStore, state.Store) {
	bolt, err := state.OpenBolt(filepath.Join(t.TempDir(), "r.db"), state.BoltOptions{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bolt.Close() })
	st := &batchStore{Store: bolt, entered: make(chan struct{}, 64), release: make(chan struct{}, 64)}
	for range released {
		st.release <- struct{}{}
	}
	return st, bolt
}

func (s *batchStore) UpdateMany(muts []state.Mutation) ([]state.Record, []error, error) {
	s.entered <- struct{}{}
	<-s.release
	keys := make([]state.Key, len(muts))
	for i, m := range muts {
		keys[i] = m.Key
	}
	s.mu.Lock()
	s.batches = append(s.batches, keys)
	s.mu.Unlock()
	return s.Store.UpdateMany(muts)
}

// A conversation answered several times while the previous write was under
// way was written once per turn in the next batch: its record decoded,
// re-encoded (history and all) and put again for every turn. Now a batch
// writes each conversation once, with all of its turns, and every turn
// still gets its own event, in order.
func TestTurnsOfOneConversationInABatchAreWrittenOnce(t *testing.T) {
	st, bolt := newBatchStore(t, 0)
	var mu sync.Mutex
	var events []string
	written := func(rec state.Record, _ bool) {
		mu.Lock()
		defer mu.Unlock()
		last := rec.Turns[len(rec.Turns)-1]
		events = append(events, rec.Key.ID+":"+string(rune('0'+rec.Requests))+":"+string(rune('0'+last.TokensBefore)))
	}
	r := New(st, zerolog.Nop(), time.Now, written)
	a, b := state.NewKey([]byte("Bearer k"), "a"), state.NewKey([]byte("Bearer k"), "b")
	line := state.LineRef{ID: state.ChainHash{0xa}, Tip: state.ChainHash{0xa, 1}, Messages: 1}
	send := func(key state.Key, n int) {
		r.Record(Turn{Key: key, Line: line, Model: "m", TokensBefore: n, Forwarded: true,
			Usage: wire.Usage{Found: true, InputTokens: 100 * n}})
	}
	send(a, 1)
	<-st.entered // the first batch is held: the rest queue behind it
	send(a, 2)
	send(b, 1)
	send(a, 3)
	send(b, 2)
	send(a, 4)
	st.release <- struct{}{}
	<-st.entered
	st.release <- struct{}{}
	r.Close()

	if len(st.batches) != 2 || !slices.Equal(st.batches[1], []state.Key{a, b}) {
		t.Fatalf("batches %v; want [a] then one mutation each for a and b", st.batches)
	}
	want := []string{"a:1:1", "a:2:2", "a:3:3", "a:4:4", "b:1:1", "b:2:2"}
	if !slices.Equal(events, want) {
		t.Errorf("turn events %v, want %v", events, want)
	}
	rec, ok, err := bolt.Get(a)
	if err != nil || !ok || rec.Requests != 4 || len(rec.Turns) != 4 || rec.Turns[3].InputTokens != 400 {
		t.Errorf("a's record: %d requests, %d turns (%v, %v); want 4 and 4, the last with 400 input tokens",
			rec.Requests, len(rec.Turns), ok, err)
	}
}

// A burst of turns larger than the queue while the store is busy with a
// batch: the requests past the queue wait for room instead of dropping
// their records, and every turn is written once the store catches up.
func TestBurstPastTheRecordQueueLosesNoTurn(t *testing.T) {
	st, bolt := newBatchStore(t, 0)
	r := newRecorderSized(st, zerolog.Nop(), time.Now, nil, 2, time.Hour, recordEvery)
	key := state.NewKey([]byte("Bearer k"), "burst")
	line := state.LineRef{ID: state.ChainHash{0xb}, Tip: state.ChainHash{0xb, 1}, Messages: 1}
	send := func() { r.Record(Turn{Key: key, Line: line, Model: "m", Forwarded: true}) }
	send()
	<-st.entered    // the store holds the first batch
	const burst = 8 // four times the queue
	var sent sync.WaitGroup
	for range burst {
		sent.Go(send)
	}
	for range burst + 1 { // at most one batch per turn
		st.release <- struct{}{}
	}
	sent.Wait()
	r.Close()
	rec, ok, err := bolt.Get(key)
	if err != nil || !ok {
		t.Fatalf("no record: %v", err)
	}
	if rec.Requests != burst+1 {
		t.Fatalf("%d turns recorded of %d: the burst past the queue was dropped", rec.Requests, burst+1)
	}
}

func TestWriteInterval(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		rule        string
		took, every time.Duration
		want        time.Duration
	}{
		{"a quick write keeps the shortest interval", 200 * time.Microsecond, 10 * ms, 10 * ms},
		{"a write of half a millisecond still does", 500 * time.Microsecond, 10 * ms, 10 * ms},
		{"a 2 ms write is followed by 40 ms of gathering: a twentieth of the time writing", 2 * ms, 10 * ms, 40 * ms},
		{"a slow disk's write stretches it to the longest", 30 * ms, 10 * ms, 100 * ms},
		{"a writer that never waits never does", 2 * ms, 0, 0},
	} {
		if got := writeInterval(tc.took, tc.every, longestInterval(tc.every)); got != tc.want {
			t.Errorf("%s: writeInterval(%v) = %v, want %v", tc.rule, tc.took, got, tc.want)
		}
	}
}

func TestGatherUntil(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	every := 10 * time.Millisecond
	for _, tc := range []struct {
		rule      string
		lastWrite time.Time
		now       time.Time
		want      time.Time
	}{
		{"the first turn is written at once", time.Time{}, t0, t0},
		{"a turn after a quiet interval is written at once", t0, t0.Add(time.Second), t0.Add(time.Second)},
		{"a turn just past the interval is written at once", t0, t0.Add(every), t0.Add(every)},
		{"a turn within the interval waits for its end", t0, t0.Add(3 * time.Millisecond), t0.Add(every)},
		{"a turn right after a write waits the whole interval", t0, t0, t0.Add(every)},
	} {
		if got := gatherUntil(tc.lastWrite, tc.now, every); !got.Equal(tc.want) {
			t.Errorf("%s: gatherUntil = %v, want %v", tc.rule, got.Sub(t0), tc.want.Sub(t0))
		}
	}
}

// A busy proxy wrote a conversation's record once per turn (decoded,
// encoded and put again, one disk sync each). Now turns that come within
// the writer's interval after a write are written together at its end:
// one mutation per conversation. Someone waiting for the turns (WaitIdle)
// and Shutdown do not wait for the interval's end.
func TestTurnsWithinTheIntervalAreWrittenTogether(t *testing.T) {
	st, bolt := newBatchStore(t, 8)
	r := newRecorderSized(st, zerolog.Nop(), time.Now, nil, recordQueue, recordQueueWait, time.Hour)
	a, b := state.NewKey([]byte("Bearer k"), "a"), state.NewKey([]byte("Bearer k"), "b")
	line := state.LineRef{ID: state.ChainHash{0xa}, Tip: state.ChainHash{0xa, 1}, Messages: 1}
	send := func(key state.Key) {
		r.Record(Turn{Key: key, Line: line, Model: "m", Forwarded: true})
	}
	send(a)
	<-st.entered // the first turn is written at once
	send(a)
	for len(r.queue) > 0 { // the writer has taken the turn: it waits for more
		runtime.Gosched()
	}
	for range 3 {
		send(a)
	}
	send(b)
	r.Wait() // within the hour: written when asked for
	send(a)
	r.Close() // and at shutdown
	want := [][]state.Key{{a}, {a, b}, {a}}
	if !slices.EqualFunc(st.batches, want, slices.Equal) {
		t.Fatalf("batches %v; want %v: a's four turns of the interval in one mutation", st.batches, want)
	}
	if rec, ok, err := bolt.Get(a); err != nil || !ok || rec.Requests != 6 {
		t.Errorf("a's record: %d requests (%v, %v); want 6", rec.Requests, ok, err)
	}
}

// Under sustained load the writer's interval was cut short by the queue:
// at 1,024 slots a half-full queue woke it every ~40 ms at 12k turns a
// second, two disk syncs each, where its interval allows 100 ms. Now the
// queue holds what an interval gathers at such rates, and a batch is
// bounded by the interval: 3,000 turns queued while the writer sleeps are
// written in one transaction when asked for.
func TestTheIntervalNotTheQueueBoundsABatchUnderLoad(t *testing.T) {
	st, bolt := newBatchStore(t, 8)
	r := newRecorderSized(st, zerolog.Nop(), time.Now, nil, recordQueue, recordQueueWait, time.Hour) // gathers until asked
	key := state.NewKey([]byte("Bearer k"), "busy")
	line := state.LineRef{ID: state.ChainHash{0xb}, Tip: state.ChainHash{0xb, 1}, Messages: 1}
	send := func() { r.Record(Turn{Key: key, Line: line, Model: "m", Forwarded: true}) }
	send()
	<-st.entered // the first turn is written at once
	const burst = 3000
	for range burst {
		send()
	}
	r.Wait()
	r.Close()
	if len(st.batches) != 2 {
		t.Fatalf("%d transactions for 1+%d turns; want 2: the queue woke the writer before its interval's end", len(st.batches), burst)
	}
	if rec, ok, err := bolt.Get(key); err != nil || !ok || rec.Requests != burst+1 {
		t.Errorf("record: %d requests (%v, %v); want %d", rec.Requests, ok, err, burst+1)
	}
}

// The writer sleeps through its interval rather than waking for every
// turn; a queue filling up past half wakes it, so a burst never makes a
// request wait for room while the writer sleeps.
func TestAFillingQueueWakesTheSleepingWriter(t *testing.T) {
	st, _ := newBatchStore(t, 8)
	r := newRecorderSized(st, zerolog.Nop(), time.Now, nil, 4, time.Hour, time.Hour)
	t.Cleanup(r.Close)
	key := state.NewKey([]byte("Bearer k"), "fill")
	line := state.LineRef{ID: state.ChainHash{0xf}, Tip: state.ChainHash{0xf, 1}, Messages: 1}
	send := func() { r.Record(Turn{Key: key, Line: line, Model: "m", Forwarded: true}) }
	send()
	<-st.entered // the first turn is written at once
	send()
	for len(r.queue) > 0 { // the writer has taken it and sleeps for the hour
		runtime.Gosched()
	}
	for range 3 { // three of four slots: past half
		send()
	}
	select {
	case <-st.entered:
	case <-time.After(time.Minute): // a hang guard, not a timing
		t.Fatal("the writer slept on while the queue filled")
	}
}

// A conversation busy enough to always have a turn queued kept every
// queued usage since its queue was last empty, written or not, and each
// request's look at the queue counted them all again: its line's turns
// and cache evidence ran ahead of the truth and the look grew with the
// conversation (half of the CPU of one hot conversation at 12k req/s).
// Now the usages of written turns are dropped from the queue's view.
func TestAHotConversationsWrittenTurnsAreNotCountedAgain(t *testing.T) {
	_, bolt := newBatchStore(t, 0)
	r := stoppedRecorder(t, bolt)
	key := state.NewKey([]byte("Bearer k"), "hot")
	line := state.LineRef{ID: state.ChainHash{0x40}, Tip: state.ChainHash{0x40, 1}, Messages: 1}
	for n := range 5 {
		r.Record(Turn{Key: key, Line: line, Model: "m", Forwarded: true,
			Usage: wire.Usage{Found: true, InputTokens: 100 * (n + 1), CachedTokens: 50 * (n + 1)}})
	}
	r.WriteQueued(1)
	r.WriteQueued(3) // 2-4: 5 is still queued
	rec, ok, err := bolt.Get(key)
	if err != nil || !ok || rec.Requests != 4 {
		t.Fatalf("stored: %d requests (%v, %v); want 4", rec.Requests, ok, err)
	}
	stored := rec.Lines[0].Turns
	if rec, _ = r.Read(key); rec.Lines[0].Turns != stored+1 {
		t.Errorf("line turns %d with the queued turns, %d stored: want one more (turn 5), not the written ones again", rec.Lines[0].Turns, stored)
	}
}

// A streamed turn is queued once its client has read the answer's end, so
// the client's next step (a replay's or a test's WaitIdle) came before it
// and found nothing to wait for: the turn's record, or the failure to
// write it, showed up afterwards (CI's flake of
// TestRedisDownTurnsStillGoThroughAndFailuresAreCounted). A turn being
// answered is now waited for too.
func TestWaitWaitsForATurnStillBeingAnswered(t *testing.T) {
	st, bolt := newBatchStore(t, 1)
	r := New(st, zerolog.Nop(), time.Now, nil)
	defer r.Close()
	key := state.NewKey([]byte("Bearer k"), "streamed")
	r.Answer()
	found := make(chan int64, 1)
	go func() {
		r.Wait()
		rec, _, _ := bolt.Get(key)
		found <- rec.Requests
	}()
	for r.waiters.Load() == 0 && len(found) == 0 {
		runtime.Gosched()
	}
	r.Record(Turn{Key: key, Line: state.LineRef{ID: state.ChainHash{1}, Tip: state.ChainHash{1, 1}, Messages: 1}, Model: "m"})
	r.Answered()
	if n := <-found; n != 1 {
		t.Fatalf("wait returned with %d turns of the streamed conversation written, want 1", n)
	}
}
