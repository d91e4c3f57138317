package state

import (
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// With the decoded-record cache, readers racing writers never see a record
// go back in time, the last write wins, and what the cache answers is what
// the file holds after a reopen.
func TestRecordCacheFollowsConcurrentWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	s, openErr := OpenBolt(path, BoltOptions{})
	if openErr != nil {
		t.Fatal(openErr)
	}
	const writers, each = 4, 150
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				inc := func(r *Record) error {
					r.AddTurn(Turn{At: time.Now(), TokensBefore: len(r.Turns)}) // counts a request
					return nil
				}
				var err error
				if w%2 == 0 {
					_, err = s.Update(keyA, inc)
				} else {
					_, _, err = s.UpdateMany([]Mutation{{Key: keyA, Fn: inc}})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for r := 0; r < 4; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			var last int64
			for {
				select {
				case <-stop:
					return
				default:
				}
				rec, _, err := s.Get(keyA)
				if err != nil {
					t.Error(err)
					return
				}
				if rec.Requests < last {
					t.Errorf("a reader saw Requests go back from %d to %d", last, rec.Requests)
					return
				}
				if int64(len(rec.Turns)) != min(rec.Requests, MaxTurns) {
					t.Errorf("a torn record: %d requests, %d turns", rec.Requests, len(rec.Turns))
					return
				}
				last = rec.Requests
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	if got := mustGet(t, s, keyA).Requests; got != writers*each {
		t.Fatalf("after %d increments the store says %d", writers*each, got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openTestBolt(t, path, BoltOptions{})
	if got := mustGet(t, s2, keyA).Requests; got != writers*each {
		t.Fatalf("reopened: %d", got)
	}
}

// A batch whose update panics is rolled back, and so is what its earlier
// updates put in the cache.
func TestRecordCacheForgetsARolledBackBatch(t *testing.T) {
	s := openTestBolt(t, filepath.Join(t.TempDir(), "c.db"), BoltOptions{})
	mustUpdate(t, s, keyA, func(r *Record) error { r.Requests = 1; return nil })
	func() {
		defer func() { _ = recover() }()
		s.UpdateMany([]Mutation{
			{Key: keyA, Fn: func(r *Record) error { r.Requests = 99; return nil }},
			{Key: keyB, Fn: func(r *Record) error { panic("boom") }},
		})
	}()
	if got := mustGet(t, s, keyA).Requests; got != 1 {
		t.Fatalf("after a rolled-back batch Get says %d requests, the file 1", got)
	}
}

// Records from Get are copies: changing one changes neither the cache nor
// the next Get.
func TestRecordCacheHandsOutCopies(t *testing.T) {
	s := openTestBolt(t, filepath.Join(t.TempDir(), "c.db"), BoltOptions{})
	mustUpdate(t, s, keyA, func(r *Record) error {
		r.AddTurn(Turn{TokensBefore: 10})
		r.PutBranch(Branch{Summary: "s", Covered: 2}, time.Now())
		return nil
	})
	got := mustGet(t, s, keyA)
	got.Turns[0].TokensBefore = 777
	got.Branches[0].Covered = 777
	again := mustGet(t, s, keyA)
	if again.Turns[0].TokensBefore != 10 || again.Branches[0].Covered != 2 {
		t.Fatalf("a caller's change reached the store: %+v %+v", again.Turns[0], again.Branches[0])
	}
}
