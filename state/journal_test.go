//go:build unix

package state

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// A change journaled and not covered by a transaction's mark is given
// back at the next open, and only that one; the next seq follows on.
func TestJournalReplaysWhatNoTransactionCovered(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	open := func() Journaled {
		s, err := OpenBolt(path, BoltOptions{SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		j, ok := s.(Journaled)
		if !ok {
			t.Fatalf("%T keeps no journal", s)
		}
		return j
	}
	s := open()
	if entries, through := s.Unjournaled(); len(entries) != 0 || through != 0 {
		t.Fatalf("a new db replays %v (through %d)", entries, through)
	}
	for _, p := range []string{"turn one", "turn two", "turn three"} {
		if _, err := s.Journal([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	key := Key{Namespace: "ns", ID: "a"}
	if _, _, err := s.UpdateManyThrough([]Mutation{{Key: key, Fn: func(r *Record) error { r.Requests++; return nil }}}, 1); err != nil {
		t.Fatal(err)
	}
	s.Close() // as a kill leaves it: the mapping's pages are the file's

	s = open()
	entries, through := s.Unjournaled()
	if got := payloads(entries); !slices.Equal(got, []string{"turn two", "turn three"}) || entries[0].Seq != 2 || through != 3 {
		t.Fatalf("replayed %q from seq %d, through %d; want turns two and three from 2, through 3", got, entries[0].Seq, through)
	}
	if again, _ := s.Unjournaled(); again != nil {
		t.Fatalf("Unjournaled gave %q a second time", payloads(again))
	}
	seq, err := s.Journal([]byte("turn four"))
	if err != nil || seq != 4 {
		t.Fatalf("the next entry is seq %d (%v), want 4", seq, err)
	}
	if _, _, err := s.UpdateManyThrough([]Mutation{{Key: key, Fn: func(r *Record) error { r.Requests += 3; return nil }}}, 4); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = open()
	defer s.Close()
	if entries, through := s.Unjournaled(); len(entries) != 0 || through != 4 {
		t.Fatalf("after a mark of 4, replayed %q (through %d)", payloads(entries), through)
	}
	rec, _, _ := s.Get(key)
	if rec.Requests != 4 {
		t.Fatalf("record has %d requests, want 4", rec.Requests)
	}
}

// A journal left beside a database that is gone is not that database's:
// a new one replays nothing from it.
func TestJournalOfAnotherDatabaseIsNotReplayed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	s, err := OpenBolt(path, BoltOptions{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	s.(Journaled).Journal([]byte("a turn of the old db"))
	s.Close()
	os.Remove(path)
	s, err = OpenBolt(path, BoltOptions{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if entries, _ := s.(Journaled).Unjournaled(); len(entries) != 0 {
		t.Fatalf("a new db replays %q", payloads(entries))
	}
}

// Read-only stores and JournalBytes < 0 keep no journal; a store without
// one still works.
func TestJournalOff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	s, err := OpenBolt(path, BoltOptions{SweepInterval: -1, JournalBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(Journaled); ok {
		t.Fatal("JournalBytes -1 keeps a journal")
	}
	if _, err := s.Update(Key{Namespace: "n", ID: "a"}, func(r *Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(path + "-journal"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a journal file was made: %v", err)
	}
	ro, err := OpenBolt(path, BoltOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, ok := ro.(Journaled); ok {
		t.Fatal("a read-only store keeps a journal")
	}
}

// An entry a kill tore (here: a byte of it changed) ends the recovery: it
// and what follows are not replayed as if they were whole.
func TestJournalStopsAtATornEntry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, _, err := openJournal(path, minJournalBytes, true)
	if err != nil {
		t.Fatal(err)
	}
	j.resume(1, 0)
	for _, p := range []string{"first", "second", "third"} {
		if _, err := j.append([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	second := j.live[1].off
	j.close()
	b, _ := os.ReadFile(path)
	b[second+journalEntryHead+2] ^= 0x20
	os.WriteFile(path, b, 0o600)
	j, entries, err := openJournal(path, minJournalBytes, false)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	if got := payloads(entries); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("recovered %q, want only the entry before the torn one", got)
	}
}

// The ring against a model, at random: entries of random sizes appended
// (refused only when the live ones leave no room), released at random,
// and the file reopened at random as a kill would leave it. Each reopen
// recovers exactly the live entries, in order.
func TestJournalRingAgainstAModel(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { journalAgainstAModel(t, seed) })
	}
}

func journalAgainstAModel(t *testing.T, seed uint64) {
	path := filepath.Join(t.TempDir(), "j")
	const size = 3 * journalHeader // a ring of 8 KiB: it wraps every few entries
	j, _, err := openJournal(path, size, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { j.close() }()
	j.resume(1, 0)
	rng := rand.New(rand.NewPCG(18, seed))
	var live []JournalEntry // the model: appended and not released
	appended, refused := 0, 0
	for step := range 20000 {
		switch op := rng.IntN(10); {
		case op < 6:
			p := bytes.Repeat([]byte{byte('a' + step%26)}, 1+rng.IntN(1500))
			p = fmt.Appendf(p, "#%d", step)
			seq, err := j.append(p)
			if errors.Is(err, ErrJournalFull) {
				refused++
				if room := liveBytes(live); room+entrySize(len(p)) <= (size-journalHeader)/2 {
					t.Fatalf("step %d: refused %d bytes with %d live", step, len(p), room)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			appended++
			live = append(live, JournalEntry{Seq: seq, Payload: p})
		case op < 9 && len(live) > 0:
			n := rng.IntN(len(live) + 1)
			if n > 0 {
				j.release(live[n-1].Seq)
				live = live[n:]
			}
		default:
			next := j.next
			hintBefore, liveBefore, headBefore := hintOf(j.buf).Load(), slices.Clone(j.live), j.head
			j.close()
			var entries []JournalEntry
			if j, entries, err = openJournal(path, size, false); err != nil {
				t.Fatal(err)
			}
			if len(entries) != len(live) {
				t.Fatalf("step %d: recovered %d entries, %d live; hint %d/%d live %v head %d", step, len(entries), len(live), hintBefore>>32, uint32(hintBefore), liveBefore, headBefore)
			}
			for i := range live {
				if entries[i].Seq != live[i].Seq || !bytes.Equal(entries[i].Payload, live[i].Payload) {
					t.Fatalf("step %d: entry %d is seq %d, want %d", step, i, entries[i].Seq, live[i].Seq)
				}
			}
			j.resume(next, 0)
		}
	}
	if appended < 5000 || refused == 0 {
		t.Fatalf("%d appended, %d refused: the run did not fill and wrap the ring", appended, refused)
	}
}

// liveBytes is the ring bytes the model's live entries take, at least.
func liveBytes(live []JournalEntry) int {
	n := 0
	for _, e := range live {
		n += entrySize(len(e.Payload))
	}
	return n
}

func payloads(entries []JournalEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, string(e.Payload))
	}
	return out
}

// Appending an entry is a copy into mapped memory: no system call.
func BenchmarkJournalAppend(b *testing.B) {
	j, _, err := openJournal(filepath.Join(b.TempDir(), "j"), DefaultJournalBytes, true)
	if err != nil {
		b.Fatal(err)
	}
	defer j.close()
	j.resume(1, 0)
	payload := bytes.Repeat([]byte("t"), 240)
	b.SetBytes(int64(len(payload)))
	for i := 0; b.Loop(); i++ {
		seq, err := j.append(payload)
		if err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			j.release(seq)
		}
	}
}

// A journal that cannot be made (here its path is a directory; a full disk
// or a file system without shared maps does the same) does not stop the
// store: it opens without one and says why.
func TestAStoreWhoseJournalCannotBeMadeWorksWithout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	if err := os.Mkdir(path+"-journal", 0o700); err != nil {
		t.Fatal(err)
	}
	var why error
	s, err := OpenBolt(path, BoltOptions{SweepInterval: -1, OnJournalError: func(err error) { why = err }})
	if err != nil {
		t.Fatalf("the store does not open: %v", err)
	}
	defer s.Close()
	if _, ok := s.(Journaled); ok || why == nil {
		t.Fatalf("journaled %v, told %v: want no journal and the reason", ok, why)
	}
	if _, err := s.Update(Key{Namespace: "n", ID: "a"}, func(r *Record) error { r.Requests++; return nil }); err != nil {
		t.Fatal(err)
	}
}

// The journal's file is written out, not sparse: a store into a hole of a
// mapped file on a full disk is a SIGBUS.
func TestJournalFileIsAllocated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := allocate(f, DefaultJournalBytes); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != DefaultJournalBytes || st.Blocks*512 < DefaultJournalBytes {
		t.Fatalf("%d of %d bytes allocated", st.Blocks*512, st.Size)
	}
}

// Whatever a journal file holds (a kill mid-write, a disk's garbage), its
// recovery reads without a panic and returns whole entries with seqs that
// follow on, from where the next entry can go.
func FuzzJournalRecovery(f *testing.F) {
	buf := make([]byte, minJournalBytes)
	formatJournal(buf)
	j := &journal{buf: buf, head: journalHeader, unmap: func() error { return nil }}
	j.resume(7, 0)
	for _, p := range []string{"one", "two", "three"} {
		j.append([]byte(p))
	}
	f.Add(buf[journalHintAt:journalHintAt+8], buf[journalHeader:journalHeader+128])
	f.Fuzz(func(t *testing.T, hint, ring []byte) {
		b := make([]byte, minJournalBytes)
		formatJournal(b)
		copy(b[journalHintAt:journalHintAt+8], hint)
		copy(b[journalHeader:], ring)
		entries, spans, head := recoverJournal(b)
		if head < journalHeader || head > len(b) || len(spans) != len(entries) {
			t.Fatalf("head %d, %d spans for %d entries", head, len(spans), len(entries))
		}
		for i := 1; i < len(entries); i++ {
			if entries[i].Seq != entries[i-1].Seq+1 {
				t.Fatalf("seqs %d then %d", entries[i-1].Seq, entries[i].Seq)
			}
		}
	})
}
