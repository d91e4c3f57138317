package state

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ctxpress/ctxpress/expand"
)

// What a server kept is there after a restart, byte-exact, for the server
// and for the CLI's read-only open; and the cap still counts it.
func TestBoltOriginalsSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	clock := newClock()
	os := sampleOriginals()
	big := os[len(os)-1]
	opts := BoltOptions{Now: clock.Now, SweepInterval: -1, OriginalsMaxBytes: 2*originalSize(keyA.Namespace, big) + 1000}
	s, err := OpenBolt(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutOriginals(keyA.Namespace, os); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	ro, err := OpenBolt(path, BoltOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range os {
		if got := mustGetOriginal(t, ro, keyA.Namespace, want.Ref); got != want {
			t.Errorf("read-only, after reopening: %s differs (%d bytes, want %d)", want.Ref, len(got.Text), len(want.Text))
		}
		if got, ok, err := ro.(OriginalFinder).FindOriginal(want.Ref); !ok || err != nil || got != want {
			t.Errorf("read-only FindOriginal(%s) = %v, %v", want.Ref, ok, err)
		}
	}
	if err := ro.PutOriginals(keyA.Namespace, os); !errors.Is(err, ErrReadOnly) {
		t.Errorf("PutOriginals on a read-only store = %v, want ErrReadOnly", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTestBolt(t, path, opts)
	// Two more as big as the big one: the cap holds two of them, so the
	// oldest originals go, those of the first run among them.
	var more []expand.Original
	for _, c := range "ab" {
		clock.Advance(2 * renewEvery)
		o := expand.New(expand.KindSquash, "bash", strings.Repeat(string(c), len(big.Text)))
		if err := s.PutOriginals(keyA.Namespace, []expand.Original{o}); err != nil {
			t.Fatal(err)
		}
		more = append(more, o)
	}
	if kept(t, s, keyA.Namespace, big.Ref) {
		t.Error("the cap did not count what the first run kept")
	}
	for _, o := range more {
		if !kept(t, s, keyA.Namespace, o.Ref) {
			t.Errorf("%s, put last, was evicted", o.Ref)
		}
	}
}

// A put of originals kept and put moments ago writes nothing: no write
// transaction, so no disk sync, on a conversation's every turn.
func TestBoltOriginalsPutAgainWritesNothing(t *testing.T) {
	clock := newClock()
	s := openTestBolt(t, filepath.Join(t.TempDir(), "state.db"), BoltOptions{Now: clock.Now, SweepInterval: -1})
	os := sampleOriginals()
	txid := func() int {
		var id int
		_ = boltOf(s).db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil })
		return id
	}
	if err := s.PutOriginals(keyA.Namespace, os); err != nil {
		t.Fatal(err)
	}
	before := txid()
	clock.Advance(renewEvery / 2)
	if err := s.PutOriginals(keyA.Namespace, os); err != nil {
		t.Fatal(err)
	}
	if after := txid(); after != before {
		t.Errorf("putting kept originals again committed %d write transactions, want none", after-before)
	}
	clock.Advance(renewEvery)
	if err := s.PutOriginals(keyA.Namespace, os); err != nil {
		t.Fatal(err)
	}
	if after := txid(); after != before+1 {
		t.Errorf("renewing stale originals committed %d write transactions, want one", after-before)
	}
}

// A damaged value is an error wrapping ErrCorrupt, never a panic nor
// another text; the rest of the originals, and the file, stay usable.
func TestBoltCorruptOriginal(t *testing.T) {
	clock := newClock()
	s := openTestBolt(t, filepath.Join(t.TempDir(), "state.db"), BoltOptions{Now: clock.Now, SweepInterval: -1})
	os := sampleOriginals()
	if err := s.PutOriginals(keyA.Namespace, os); err != nil {
		t.Fatal(err)
	}
	damaged, intact := os[0], os[1]
	k := []byte(originalKey(keyA.Namespace, damaged.Ref))
	for _, garbage := range [][]byte{nil, {1}, {1, 0, 0, 0, 0}, []byte("{not an original}"), flipLast(encodeOriginal(damaged))} {
		err := boltOf(s).db.Update(func(tx *bolt.Tx) error {
			b, _, err := originalBuckets(tx)
			if err != nil {
				return err
			}
			return b.text.Put(k, append([]byte{}, garbage...))
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.GetOriginal(keyA.Namespace, damaged.Ref); ok || !errors.Is(err, ErrCorrupt) {
			t.Errorf("GetOriginal(value %q) = %v, %v; want an error wrapping ErrCorrupt", garbage, ok, err)
		}
		if _, ok, err := s.(OriginalFinder).FindOriginal(damaged.Ref); ok || !errors.Is(err, ErrCorrupt) {
			t.Errorf("FindOriginal(value %q) = %v, %v; want an error wrapping ErrCorrupt", garbage, ok, err)
		}
		if got := mustGetOriginal(t, s, keyA.Namespace, intact.Ref); got != intact {
			t.Errorf("the intact original changed: %q", got.Text)
		}
	}
	// Damaged bookkeeping (a put entry, the sum) is mended by the next put.
	err := boltOf(s).db.Update(func(tx *bolt.Tx) error {
		b, _, _ := originalBuckets(tx)
		if err := b.put.Put([]byte(originalKey(keyA.Namespace, intact.Ref)), []byte("short")); err != nil {
			return err
		}
		return b.parent.Put(origBytes, []byte("?"))
	})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * renewEvery)
	if err := s.PutOriginals(keyA.Namespace, []expand.Original{intact}); err != nil {
		t.Fatal(err)
	}
	if got := mustGetOriginal(t, s, keyA.Namespace, intact.Ref); got != intact {
		t.Errorf("after mending: %q", got.Text)
	}
	// The sweep takes the damaged one with the rest.
	if _, err := s.Sweep(clock.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.GetOriginal(keyA.Namespace, damaged.Ref); ok || err != nil {
		t.Errorf("after the sweep: %v, %v; want not found", ok, err)
	}
}

func flipLast(b []byte) []byte {
	b[len(b)-1] ^= 1
	return b
}
