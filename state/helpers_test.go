package state

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ctxpress/ctxpress/history"
)

// t0 is the start of every fake clock: UTC, no monotonic reading, so records
// read back compare equal with reflect.DeepEqual.
var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeClock is a settable clock for the stores' Now option.
type fakeClock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// sweeps counts a store's background sweeps (its OnSweep), so a test can
// wait for the sweeper to have run instead of sleeping.
type sweeps struct {
	mu  sync.Mutex
	n   int           // guarded by mu
	ran chan struct{} // a token per sweep, never blocking the sweeper
}

func sweepCounter() *sweeps { return &sweeps{ran: make(chan struct{}, 1)} }

func (s *sweeps) swept(int, error) {
	s.mu.Lock()
	s.n++
	s.mu.Unlock()
	select {
	case s.ran <- struct{}{}:
	default:
	}
}

// count is how many times the sweeper has run.
func (s *sweeps) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// wait returns once the sweeper has run n times in all.
func (s *sweeps) wait(n int) {
	for s.count() < n {
		<-s.ran
	}
}

// testOptions are the options every implementation takes.
type testOptions struct {
	Now           func() time.Time
	Retention     time.Duration
	SweepInterval time.Duration // 0 in tests means "no background sweep"
	OnSweep       func(removed int, err error)
	// OriginalsMaxBytes: 0 is the stores' default cap.
	OriginalsMaxBytes int64
}

func (o testOptions) interval() time.Duration {
	if o.SweepInterval == 0 {
		return -1
	}
	return o.SweepInterval
}

// impl is one Store implementation under the contract test.
type impl struct {
	name string
	open func(t *testing.T, o testOptions) Store
	// putRaw stores raw bytes under key, bypassing the encoding.
	putRaw func(t *testing.T, s Store, key Key, data []byte)
}

func impls() []impl {
	return []impl{
		{
			name: "bolt",
			open: func(t *testing.T, o testOptions) Store {
				return openTestBolt(t, filepath.Join(t.TempDir(), "state.db"), BoltOptions{
					Now: o.Now, Retention: o.Retention, SweepInterval: o.interval(), OnSweep: o.OnSweep,
					OriginalsMaxBytes: o.OriginalsMaxBytes,
				})
			},
			putRaw: func(t *testing.T, s Store, key Key, data []byte) {
				t.Helper()
				bs := boltOf(s)
				var txid uint64
				err := bs.db.Update(func(tx *bolt.Tx) error {
					txid = uint64(tx.ID())
					bs.records.remove(key.encode(), txid) // written behind the store's back
					return tx.Bucket(bucketConversations).Put(key.encode(), data)
				})
				if err != nil {
					t.Fatal(err)
				}
				bs.records.commit([]string{string(key.encode())}, txid)
			},
		},
		{
			name: "memory",
			open: func(t *testing.T, o testOptions) Store {
				s := NewMemoryWithOptions(MemoryOptions{
					Now: o.Now, Retention: o.Retention, SweepInterval: o.interval(), OnSweep: o.OnSweep,
					OriginalsMaxBytes: o.OriginalsMaxBytes,
				})
				t.Cleanup(func() { _ = s.Close() })
				return s
			},
			putRaw: func(t *testing.T, s Store, key Key, data []byte) {
				m := s.(*memStore)
				m.mu.Lock()
				defer m.mu.Unlock()
				m.records[string(key.encode())] = decodedMemRecord(key, data)
			},
		},
		redisImpl(),
	}
}

// openTestBolt opens a bolt store at path and closes it when the test ends.
func openTestBolt(t *testing.T, path string, opts BoltOptions) Store {
	t.Helper()
	s, err := OpenBolt(path, opts)
	if err != nil {
		t.Fatalf("OpenBolt(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// mustUpdate calls s.Update and fails the test on error.
func mustUpdate(t *testing.T, s Store, key Key, fn func(*Record) error) Record {
	t.Helper()
	rec, err := s.Update(key, fn)
	if err != nil {
		t.Fatalf("Update(%s): %v", key, err)
	}
	return rec
}

// mustGet calls s.Get and fails the test on error or absence.
func mustGet(t *testing.T, s Store, key Key) Record {
	t.Helper()
	rec, ok, err := s.Get(key)
	if err != nil || !ok {
		t.Fatalf("Get(%s) = ok %v, err %v; want the record", key, ok, err)
	}
	return rec
}

func hashOf(s string) ChainHash {
	var h ChainHash
	copy(h[:], s)
	return h
}

// fullRecord returns a record with every field set, for round trips.
func fullRecord(key Key) Record {
	at := t0.Add(-time.Hour)
	return Record{
		Key:          key,
		Model:        "gpt-4o",
		Title:        "Fix the leap-year bug in dateparse",
		Agent:        "opencode/0.15.2",
		Requests:     7,
		TokensBefore: 70000,
		TokensAfter:  40000,
		TokensSaved:  30000,
		Compactions:  2,
		ForceNext:    true,
		Branches: []Branch{
			{Branch: history.Branch{Summary: "first", Covered: 10, Hash: hashOf("a")}, CreatedAt: at, UsedAt: at},
			{Branch: history.Branch{Summary: "second", Covered: 20, Hash: hashOf("b")}, Parent: hashOf("a"), CreatedAt: at, UsedAt: at.Add(time.Minute)},
		},
		Lines: []Line{
			{ID: hashOf("a"), Tip: hashOf("t"), Messages: 12, Numbers: history.Numbers{Model: "gpt-4o",
				Calibration: history.Calibration{LastInput: 1234, LastEstimate: 1200, Ratio: 1.0283, Slope: 0.97}, Window: 8192,
				Breaker: history.Breaker{
					Tripped: true, ConsecutiveOverTrigger: 3, FailureCount: 2,
					BackoffUntil: at.Add(10 * time.Minute), Reason: "summariser timeout",
				}},
				UsedAt: at, Dedups: []history.DedupMark{{Index: 3, Digest: hashOf("d3")}, {Index: 7, Digest: hashOf("d7")}},
				Prunes: []history.PruneMark{{Index: 5, Result: 1, Digest: hashOf("p5"), Turn: 9}}},
			{ID: hashOf("side"), Tip: hashOf("side"), Messages: 1, Numbers: history.Numbers{Model: "gpt-4o-mini"}, UsedAt: at.Add(-time.Minute)},
		},
		RecentSummaries: []SummaryEntry{
			{At: at, Summary: "first", CoveredMessages: 10, TokensBefore: 9000, TokensAfter: 3000},
		},
		Turns: []Turn{
			{At: at, TokensBefore: 100, TokensAfter: 90, InputTokens: 95},
			{At: at.Add(time.Second), TokensBefore: 9000, TokensAfter: 3000, InputTokens: 3100, Compacted: true,
				Edits: []history.Edit{{Kind: history.EditSummarised, Index: 1, Count: 10, Before: 6500, After: 700},
					{Kind: history.EditSquashed, Index: 14, Count: 1, Name: "bash", Before: 2100, After: 300}}},
		},
		CreatedAt: at,
	}
}

// asBolt is the bolt store behind s, with or without its journal.
func asBolt(s Store) (*boltStore, bool) {
	switch b := s.(type) {
	case *boltStore:
		return b, true
	case journaledBolt:
		return b.boltStore, true
	}
	return nil, false
}

// boltOf is the bolt store behind s, which must be one.
func boltOf(s Store) *boltStore {
	b, ok := asBolt(s)
	if !ok {
		panic(fmt.Sprintf("%T is not a bolt store", s))
	}
	return b
}
