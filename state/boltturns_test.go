package state

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// busyConversations writes n records of MaxTurns turns to s.
func busyConversations(t testing.TB, s Store, n int) []Key {
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = Key{Namespace: "busy", ID: fmt.Sprintf("conv-%02d", i)}
		full := historyRecord(keys[i])
		if _, err := s.Update(keys[i], func(r *Record) error { *r = full; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// The recorder's write of one turn to each of 64 conversations of
// MaxTurns turns allocates about a page per conversation (bbolt writes
// the pages a commit touches whole: the record's, 2 KB with its newest
// turns, and one turn in turnChunk a chunk's), not the three pages of a
// record with its history (12 KB on the base).
func TestATurnWritesItsChunkNotTheConversationsHistory(t *testing.T) {
	s := openTestBolt(t, filepath.Join(t.TempDir(), "t.db"), BoltOptions{SweepInterval: -1})
	keys := busyConversations(t, s, 64)
	muts := make([]Mutation, len(keys))
	for i, k := range keys {
		muts[i] = Mutation{Key: k, Fn: func(r *Record) error {
			r.AddTurn(Turn{At: t0, TokensBefore: 90000, TokensAfter: 40000, InputTokens: 41000, CachedTokens: 39000})
			return nil
		}}
	}
	db := boltOf(s).db
	var perTurn int64
	for range 3 { // the first turns after the full writes settle the freelist
		st := db.Stats()
		before := st.TxStats.GetPageAlloc()
		if _, _, err := s.UpdateMany(muts); err != nil {
			t.Fatal(err)
		}
		st = db.Stats()
		perTurn = (st.TxStats.GetPageAlloc() - before) / int64(len(muts))
	}
	if perTurn > 5000 {
		t.Errorf("a turn allocates %d bytes of pages per conversation, want at most 5000", perTurn)
	}
	t.Logf("%d bytes of pages per conversation per turn", perTurn)
}

// oldLayoutDB writes rec as a version 1 file held it (its turns inside
// its JSON, schema_version 1) and returns the file's path.
func oldLayoutDB(t *testing.T, rec Record) string {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := bolt.Open(path, fileMode, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := encodeRecord(&rec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"turns":[[`)) {
		t.Fatalf("not the old layout: %s", data)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		if err := meta.Put(metaApp, []byte("ctxpress")); err != nil {
			return err
		}
		if err := meta.Put(metaSchemaVersion, []byte("1")); err != nil {
			return err
		}
		b, err := tx.CreateBucket(bucketConversations)
		if err != nil {
			return err
		}
		return b.Put(rec.Key.encode(), data)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// A record written by a version that kept turns inside the record reads
// back equal (read-only too); its next write moves its turns to chunks.
func TestARecordOfTheOldLayoutReadsBackAndMovesItsTurns(t *testing.T) {
	rec := historyRecord(keyA)
	rec.turns = nil // as decoded
	path := oldLayoutDB(t, rec)

	ro := openTestBolt(t, path, BoltOptions{ReadOnly: true})
	if got := mustGet(t, ro, keyA); !reflect.DeepEqual(got, rec) {
		t.Fatalf("read-only: got %d turns, want the record as written (%d)", len(got.Turns), len(rec.Turns))
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	s := openTestBolt(t, path, BoltOptions{SweepInterval: -1})
	if got := mustGet(t, s, keyA); !reflect.DeepEqual(got, rec) {
		t.Fatalf("got %d turns, want the record as written (%d)", len(got.Turns), len(rec.Turns))
	}
	want := mustUpdate(t, s, keyA, func(r *Record) error { r.AddTurn(Turn{At: t0, TokensBefore: 7}); return nil })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := bolt.Open(path, fileMode, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var value []byte
	var chunks int
	_ = db.View(func(tx *bolt.Tx) error {
		value = bytes.Clone(tx.Bucket(bucketConversations).Get(keyA.encode()))
		chunks = countChunks(tx, keyA)
		if v := string(tx.Bucket(bucketMeta).Get(metaSchemaVersion)); v != "2" {
			t.Errorf("schema_version = %q, want 2", v)
		}
		return nil
	})
	_ = db.Close()
	if bytes.Contains(value, []byte(`"turns":`)) || !bytes.Contains(value, []byte(`"turns_tail":[[`)) || chunks != MaxTurns/turnChunk {
		t.Errorf("after a write: %d chunks, the record %s; want its turns moved to chunks", chunks, value)
	}
	again := openTestBolt(t, path, BoltOptions{SweepInterval: -1})
	if got := mustGet(t, again, keyA); !reflect.DeepEqual(got.Turns, want.Turns) || got.Requests != want.Requests {
		t.Errorf("reopened: %d turns ending %+v, want %d ending %+v", len(got.Turns), got.Turns[len(got.Turns)-1], len(want.Turns), want.Turns[len(want.Turns)-1])
	}
}

// countChunks is how many turn chunks the file holds for key.
func countChunks(tx *bolt.Tx, key Key) int {
	tb := tx.Bucket(bucketTurns)
	if tb == nil {
		return 0
	}
	n := 0
	prefix := turnsPrefix(key.encode())
	c := tb.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		n++
	}
	return n
}

// A deleted record, a swept one, and one whose turns were cleared leave
// no turn chunks behind; the others keep theirs.
func TestDeletedAndSweptRecordsLeaveNoTurnChunks(t *testing.T) {
	clock := newClock()
	s := openTestBolt(t, filepath.Join(t.TempDir(), "t.db"), BoltOptions{SweepInterval: -1, Now: clock.Now})
	keys := busyConversations(t, s, 4)
	clock.Advance(time.Hour)
	for _, k := range keys[1:] {
		mustUpdate(t, s, k, func(r *Record) error { r.AddTurn(Turn{}); return nil })
	}
	if ok, err := s.Delete(keys[1]); !ok || err != nil {
		t.Fatal(ok, err)
	}
	mustUpdate(t, s, keys[2], func(r *Record) error { r.Turns = nil; return nil })
	if n, err := s.Sweep(clock.Now().Add(-time.Minute)); n != 1 || err != nil {
		t.Fatalf("Sweep = %d, %v; want keys[0] swept", n, err)
	}
	want := []int{0, 0, 0, MaxTurns / turnChunk}
	_ = boltOf(s).db.View(func(tx *bolt.Tx) error {
		for i, k := range keys {
			if n := countChunks(tx, k); n != want[i] {
				t.Errorf("%s: %d chunks, want %d", k, n, want[i])
			}
		}
		if n := tx.Bucket(bucketTurns).Stats().KeyN; n != want[3] {
			t.Errorf("%d chunks in all, want %d", n, want[3])
		}
		return nil
	})
}

// Whatever an update does to Turns (adds one or many, replaces, trims,
// clears), the file holds what it returned: a reopened store reads the
// same turns, and no more chunks than they need.
func TestStoredTurnsFollowEveryUpdate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	s := openTestBolt(t, path, BoltOptions{SweepInterval: -1})
	rng := rand.New(rand.NewPCG(1, 2))
	var want Record
	for step := range 600 {
		op := rng.IntN(20)
		want = mustUpdate(t, s, keyA, func(r *Record) error {
			switch {
			case op < 14:
				r.AddTurn(Turn{At: t0.Add(time.Duration(step) * time.Millisecond), TokensBefore: step})
			case op < 16:
				for i := range rng.IntN(3 * maxNewTurns) {
					r.AddTurn(Turn{TokensBefore: step, TokensAfter: i})
				}
			case op == 16:
				r.Turns = r.Turns[min(len(r.Turns), 3):]
			case op == 17:
				r.Turns = append([]Turn{{TokensBefore: -step}}, r.Turns[:max(0, len(r.Turns)-1)]...)
			case op == 18 && step%7 == 0:
				r.Turns = nil
			}
			return nil
		})
		if step%50 == 49 { // a cold read too
			boltOf(s).records.clear(0)
			if got := mustGet(t, s, keyA); !reflect.DeepEqual(got.Turns, want.Turns) {
				t.Fatalf("step %d: read %d turns, want %d", step, len(got.Turns), len(want.Turns))
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again := openTestBolt(t, path, BoltOptions{SweepInterval: -1})
	if got := mustGet(t, again, keyA); !reflect.DeepEqual(got.Turns, want.Turns) {
		t.Fatalf("reopened: %d turns, want %d", len(got.Turns), len(want.Turns))
	}
	_ = boltOf(again).db.View(func(tx *bolt.Tx) error {
		if n, most := countChunks(tx, keyA), (len(want.Turns)+turnChunk-1)/turnChunk+1; n > most {
			t.Errorf("%d chunks for %d turns, want at most %d", n, len(want.Turns), most)
		}
		return nil
	})
}
