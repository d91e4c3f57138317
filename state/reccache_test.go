package state

import (
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/history"
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

// A reader never sees a write whose transaction has not committed: what
// Get answers is what the file holds, as List reads it. (Get answered from
// the cache a record still being written, which List did not have yet, and
// a write that then failed had been seen anyway.)
func TestGetDuringAWriteAnswersTheCommittedRecord(t *testing.T) {
	s := openTestBolt(t, filepath.Join(t.TempDir(), "c.db"), BoltOptions{})
	mustUpdate(t, s, keyA, func(r *Record) error { r.Requests = 1; return nil })
	// inWrite reads keyA and keyB from another goroutine while the write
	// transaction that changes them is open (bbolt's readers do not wait
	// for a writer).
	inWrite := func() (a, b Record, bOK bool) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			a, _, _ = s.Get(keyA)
			b, bOK, _ = s.Get(keyB)
		}()
		<-done
		return a, b, bOK
	}
	var a, b Record
	var bOK bool
	keyC := Key{Namespace: "ns", ID: "c"}
	if _, _, err := s.UpdateMany([]Mutation{
		{Key: keyA, Fn: func(r *Record) error { r.Requests = 2; return nil }},
		{Key: keyB, Fn: func(r *Record) error { r.Requests = 7; return nil }},
		{Key: keyC, Fn: func(r *Record) error { a, b, bOK = inWrite(); return nil }},
	}); err != nil {
		t.Fatal(err)
	}
	if a.Requests != 1 || bOK {
		t.Errorf("a reader saw the uncommitted write: keyA %d requests (committed: 1), keyB found %v (%d requests)", a.Requests, bOK, b.Requests)
	}
	if got := mustGet(t, s, keyA).Requests; got != 2 {
		t.Fatalf("after the commit Get says %d requests, want 2", got)
	}
}

// Records from Get are copies: changing one changes neither the cache nor
// the next Get. Turns are shared and read-only (Record.Turns): a copy
// that adds a turn has a new array.
func TestRecordCacheHandsOutCopies(t *testing.T) {
	s := openTestBolt(t, filepath.Join(t.TempDir(), "c.db"), BoltOptions{})
	mustUpdate(t, s, keyA, func(r *Record) error {
		r.AddTurn(Turn{TokensBefore: 10})
		r.PutBranch(Branch{Branch: history.Branch{Summary: "s", Covered: 2}}, time.Now())
		return nil
	})
	got := mustGet(t, s, keyA)
	got.AddTurn(Turn{TokensBefore: 777})
	got.Branches[0].Covered = 777
	again := mustGet(t, s, keyA)
	if len(again.Turns) != 1 || again.Turns[0].TokensBefore != 10 || again.Branches[0].Covered != 2 {
		t.Fatalf("a caller's change reached the store: %+v %+v", again.Turns[0], again.Branches[0])
	}
}

// A reader that decoded a record before a write or delete committed cannot
// put that older record back: a tombstone or entry blocks it, and so does
// the floor once those are dropped.
func TestRecordCacheRefusesOlderReads(t *testing.T) {
	c := newRecordCache()
	k := []byte("k")
	c.remove(k, 10) // deleted by transaction 10
	c.commit([]string{"k"}, 10)
	c.add(k, Record{Requests: 1}, nil, 9)
	if _, ok := c.get(k); ok {
		t.Fatal("a read from before the delete was cached")
	}
	c.put(k, Record{Requests: 2}, nil, 11)
	c.add(k, Record{Requests: 1}, nil, 10)
	if _, ok := c.get(k); ok {
		t.Fatal("a reader got a write before its commit")
	}
	if rec, _, _ := c.latest(k); rec.Requests != 2 {
		t.Fatalf("a read replaced a newer write for the next writer: %+v", rec)
	}
	c.commit([]string{"k"}, 11)
	if rec, _ := c.get(k); rec.Requests != 2 {
		t.Fatalf("a read replaced a newer write: %+v", rec)
	}
	// Drop everything by eviction: the floor keeps older reads out.
	for i := 0; i <= recordCacheSize; i++ {
		c.put([]byte{byte(i), byte(i >> 8), 'x'}, Record{}, nil, uint64(100+i))
	}
	c.add(k, Record{Requests: 1}, nil, 50)
	if _, ok := c.get(k); ok {
		t.Fatal("after eviction, a read older than what was dropped was cached")
	}
	c.clear(900)
	c.add(k, Record{Requests: 3}, nil, 899)
	if _, ok := c.get(k); ok {
		t.Fatal("after a failed write, a read older than it was cached")
	}
	c.add(k, Record{Requests: 3}, nil, 900)
	if rec, ok := c.get(k); !ok || rec.Requests != 3 {
		t.Fatal("a current read was not cached")
	}
}

// Deleting a record while readers hammer it: once Delete returns, Get says
// it is gone.
func TestRecordCacheDeleteUnderReads(t *testing.T) {
	s := openTestBolt(t, filepath.Join(t.TempDir(), "c.db"), BoltOptions{})
	for round := 0; round < 50; round++ {
		mustUpdate(t, s, keyA, func(r *Record) error { r.Requests = 1; return nil })
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var reads atomic.Int64
		// readsPast waits until the readers have read n more times.
		readsPast := func(n int64) {
			for target := reads.Load() + n; reads.Load() < target; {
				runtime.Gosched()
			}
		}
		for r := 0; r < 3; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
						s.Get(keyA)
						reads.Add(1)
					}
				}
			}()
		}
		readsPast(3) // the readers are at it when Delete starts
		if ok, err := s.Delete(keyA); !ok || err != nil {
			t.Fatalf("Delete: %v %v", ok, err)
		}
		readsPast(30) // and read on after it returned, racing to cache
		close(stop)
		wg.Wait()
		if _, ok, _ := s.Get(keyA); ok {
			t.Fatalf("round %d: the deleted record is still there", round)
		}
	}
}

// While a write transaction is open, a reader of a key it writes is
// answered from the cache with the committed record, not by reading and
// decoding the file: the recorder's writes follow each other, so a busy
// conversation is being written most of the time, and every request of it
// decoded its record (a fifth of the chat path's CPU).
func TestGetDuringAWriteIsAnsweredFromMemory(t *testing.T) {
	s := openTestBolt(t, filepath.Join(t.TempDir(), "c.db"), BoltOptions{})
	full := historyRecord(keyA)
	mustUpdate(t, s, keyA, func(r *Record) error { *r = full; return nil })
	var allocs float64
	var rec Record
	if _, _, err := s.UpdateMany([]Mutation{
		{Key: keyA, Fn: func(r *Record) error { r.Requests++; return nil }},
		{Key: keyB, Fn: func(r *Record) error {
			done := make(chan struct{})
			go func() { // bbolt's readers do not wait for the writer
				defer close(done)
				allocs = testing.AllocsPerRun(20, func() { rec, _, _ = s.Get(keyA) })
			}()
			<-done
			return nil
		}},
	}); err != nil {
		t.Fatal(err)
	}
	if rec.Requests != full.Requests {
		t.Errorf("during the write Get said %d requests, want the committed %d", rec.Requests, full.Requests)
	}
	if allocs > 5 {
		t.Errorf("a Get during a write allocated %.0f times: it decoded the record from the file", allocs)
	}
}

// Write transactions settle in any order. One that settles after a later
// one, its write lost to a third, must not take the entry back to its own
// transaction: a reader that read the later write from the file, and
// then a slow reader's older read, would otherwise leave that older
// record cached as committed, and the next reader would see the
// conversation go back.
func TestRecordCacheLateSettleKeepsNewerReads(t *testing.T) {
	c := newRecordCache()
	k := []byte("k")
	rec := func(n int64) Record { return Record{Requests: n} }
	c.put(k, rec(218), nil, 218)
	c.put(k, rec(219), nil, 219) // built on 218, committed but not settled
	c.put(k, rec(220), nil, 220)
	c.commit([]string{"k"}, 219) // lost to 220
	c.add(k, rec(219), nil, 219) // a reader read 219 from the file
	c.commit([]string{"k"}, 218) // 218 settles last
	c.add(k, rec(218), nil, 218) // a slow reader's snapshot of 218
	if r, ok := c.get(k); ok && r.Requests < 219 {
		t.Fatalf("a reader is answered %d requests after one was answered 219", r.Requests)
	}
}
