package recorder

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
)

// journalTurns are turns of every kind applyTurn reads: a new line with its
// chain, a known line with dedups and prunes and a summary applied,
// a compaction, an answer without usage, one on history the provider keeps,
// a /compact answered by ctxpress (not forwarded), one the upstream
// compacted itself, one with ctxpress's own hidden rounds (both too).
func journalTurns(key state.Key, at time.Time) []Turn {
	l1 := state.LineRef{ID: state.ChainHash{1}, Tip: state.ChainHash{1, 1}, Messages: 3, Chain: [][32]byte{{9}, {8}, {7}, {1, 1}}}
	l2 := state.LineRef{ID: state.ChainHash{1}, Tip: state.ChainHash{1, 2}, Messages: 5}
	applied := state.ChainHash{0xab}
	return []Turn{
		{Key: key, Line: l1, Model: "gpt-4o", TokensBefore: 1200, TokensAfter: 1100, RawAfter: 1000, Forwarded: true,
			Usage: wire.Usage{InputTokens: 1150, OutputTokens: 40, Found: true}, At: at},
		{Key: key, Line: l2, Model: "gpt-4o", TokensBefore: 5000, TokensAfter: 3000, RawAfter: 2900, Forwarded: true,
			Applied: &applied, Trigger: 4000, Compacted: true,
			Dedups: []history.DedupMark{{Index: 3, Result: 4, Digest: state.ChainHash{5}}},
			Prunes: []history.PruneMark{{Index: 2, Result: 3, Digest: state.ChainHash{6}, Turn: 1}},
			Usage:  wire.Usage{InputTokens: 3100, OutputTokens: 12, CachedTokens: 2048, CacheWriteTokens: 7, Found: true}, At: at.Add(time.Millisecond)},
		{Key: key, Line: l2, Model: "gpt-4o", TokensBefore: 3300, TokensAfter: 3300, RawAfter: 3200, Forwarded: true,
			At: at.Add(2 * time.Millisecond)},
		{Key: key, Line: l2, Model: "o3", ServerHistory: true, Forwarded: true, TokensBefore: 10, TokensAfter: 10,
			Usage: wire.Usage{InputTokens: 9000, Found: true}, At: at.Add(3 * time.Millisecond)},
		{Key: key, Line: l2, Model: "gpt-4o", TokensBefore: 3300, TokensAfter: 900, At: at.Add(4 * time.Millisecond)},
		{Key: key, Line: l2, Model: "claude-opus-4-7", TokensBefore: 15000, TokensAfter: 15000, RawAfter: 14000, Forwarded: true,
			Usage: wire.Usage{InputTokens: 108, OutputTokens: 40, Found: true, ServerCompacted: true,
				ServerCompaction: wire.Tokens{InputTokens: 15013, OutputTokens: 812, CachedTokens: 3, CacheWriteTokens: 4}},
			At: at.Add(5 * time.Millisecond)},
		{Key: key, Line: l2, Model: "gpt-4o", TokensBefore: 16000, TokensAfter: 9000, RawAfter: 15000, Forwarded: true, Observed: true,
			Compacted: true, Usage: wire.Usage{InputTokens: 16100, CachedTokens: 12000, OutputTokens: 30, Found: true}, At: at.Add(6 * time.Millisecond)},
		{Key: key, Line: l2, Model: "gpt-4o", TokensBefore: 3300, TokensAfter: 3300, RawAfter: 3200, Forwarded: true,
			Usage: wire.Usage{InputTokens: 3250, OutputTokens: 20, Found: true, Hidden: wire.Tokens{InputTokens: 7000, OutputTokens: 31, CachedTokens: 3200}},
			At:    at.Add(7 * time.Millisecond)},
		{Key: key, Line: l2, Model: "claude-opus-4-7", TokensBefore: 15000, TokensAfter: 15000, RawAfter: 14000, Forwarded: true,
			Usage: wire.Usage{InputTokens: 108, OutputTokens: 40, Found: true, ServerCompacted: true,
				ServerCompaction: wire.Tokens{InputTokens: 15013, OutputTokens: 812}, Hidden: wire.Tokens{InputTokens: 300, CacheWriteTokens: 5}},
			At: at.Add(8 * time.Millisecond)},
	}
}

// A turn's journal entry reads back as the turn applyTurn would have
// written; an entry cut short or of another version is refused, never
// half read.
func TestJournalEntryReadsBackTheTurn(t *testing.T) {
	at := time.Unix(1764000000, 123456789)
	for i, tr := range journalTurns(state.NewKey([]byte("Bearer k"), "conv-1"), at) {
		entry := appendJournalEntry(nil, &tr)
		got, err := readJournalEntry(entry)
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		want := tr
		if !reflect.DeepEqual(got, want) {
			t.Errorf("turn %d reads back as\n%+v\nwant\n%+v", i, got, want)
		}
		for n := range len(entry) {
			if _, err := readJournalEntry(entry[:n]); err == nil {
				t.Fatalf("turn %d: its first %d of %d bytes read as a whole entry", i, n, len(entry))
			}
		}
		if _, err := readJournalEntry(append(entry, 0)); err == nil {
			t.Fatalf("turn %d: an entry with a byte too many is read", i)
		}
	}
	negative := Turn{Key: state.NewKey(nil, "n"), Trigger: -7, TokensBefore: -1, At: at}
	if got, err := readJournalEntry(appendJournalEntry(nil, &negative)); err != nil || got.Trigger != -7 || got.TokensBefore != -1 {
		t.Fatalf("negative numbers read back as %d, %d (%v)", got.Trigger, got.TokensBefore, err)
	}
	if _, err := readJournalEntry([]byte{2, 0, 0}); err == nil {
		t.Fatal("an entry of version 2 is read")
	}
}

// The mark is the seq up to which every journaled turn is written, however
// the turns came to the writer; an unjournaled turn (0) moves nothing.
func TestJournalMarkIsTheWrittenPrefix(t *testing.T) {
	var p journalSeqs
	p.through = 10
	for _, step := range []struct {
		seq, want uint64
	}{{0, 10}, {12, 10}, {13, 10}, {11, 13}, {9, 13}, {15, 13}, {14, 15}, {16, 16}} {
		if got := p.done(step.seq); got != step.want {
			t.Fatalf("done(%d) = %d, want %d", step.seq, got, step.want)
		}
	}
	if len(p.ahead) != 0 {
		t.Fatalf("seqs left ahead of the mark: %v", p.ahead)
	}
}

// Turns answered and queued, not written when the process died (here the
// writer sleeps through its interval and the store is closed under it, as
// a kill leaves the files), are written at the next start from the
// journal, before any request is served: the record is the one a writer
// that had written them would have left.
func TestJournaledTurnsAreWrittenAtTheNextStart(t *testing.T) {
	at := time.Unix(1764000000, 0).UTC()
	clock := func() time.Time { return at }
	key := state.NewKey([]byte("Bearer k"), "conv-1")
	turns := journalTurns(key, at)

	want := recordAfter(t, filepath.Join(t.TempDir(), "want.db"), clock, turns, true)

	path := filepath.Join(t.TempDir(), "crash.db")
	crashed := recordAfter(t, path, clock, turns, false)
	if crashed.Requests != 1 {
		t.Fatalf("before the restart the record has %d requests; the writer was to write the first turn only", crashed.Requests)
	}
	st, err := state.OpenBolt(path, state.BoltOptions{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := newRecorderSized(st, zerolog.Nop(), clock, nil, recordQueue, recordQueueWait, time.Hour)
	defer r.Close()
	got, _, err := st.Get(key) // no wait: replayed before the recorder is made
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(exportedFields(got), exportedFields(want)) {
		t.Fatalf("after the restart the record is\n%+v\nwant\n%+v", got, want)
	}
	if entries, _ := st.(state.Journaled).Unjournaled(); len(entries) != 0 {
		t.Fatalf("%d entries left to replay again", len(entries))
	}
}

// recordAfter records turns on a bolt store at path: all written when
// written, else the first only, the rest left queued while the store is
// closed under the writer (as a kill would leave the files). It returns
// the record as stored.
func recordAfter(t *testing.T, path string, clock func() time.Time, turns []Turn, written bool) state.Record {
	t.Helper()
	st, err := state.OpenBolt(path, state.BoltOptions{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	r := newRecorderSized(st, zerolog.Nop(), clock, nil, recordQueue, recordQueueWait, time.Hour)
	r.Record(turns[0])
	r.Wait()
	for _, tr := range turns[1:] {
		r.Record(tr)
	}
	if written {
		r.Wait()
	}
	rec, _, err := st.Get(turns[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	t.Cleanup(r.Close) // writes to the closed store: lost, as in the crash
	return rec
}

// Encoding a turn's entry is on the request path (the copy into the ring
// is state's BenchmarkJournalAppend).
func BenchmarkJournalEntryEncode(b *testing.B) {
	tr := journalTurns(state.NewKey([]byte("Bearer k"), "bench"), time.Now())[1]
	buf := make([]byte, 0, 512)
	for b.Loop() {
		buf = appendJournalEntry(buf[:0], &tr)
	}
}

// exportedFields are rec's exported fields: what a reader of it sees (its
// unexported ones hold how the store keeps its turns).
func exportedFields(rec state.Record) map[string]any {
	v := reflect.ValueOf(rec)
	out := map[string]any{}
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.IsExported() {
			out[f.Name] = v.Field(i).Interface()
		}
	}
	return out
}

// A journal entry read back from a file is bad input like any other: any
// bytes are refused or read, never a panic, and what is read encodes to
// an entry that reads back the same.
func FuzzJournalEntry(f *testing.F) {
	for _, tr := range journalTurns(state.NewKey([]byte("Bearer k"), "fuzz"), time.Unix(1764000000, 0)) {
		f.Add(appendJournalEntry(nil, &tr))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := readJournalEntry(b)
		if err != nil {
			return
		}
		again, err := readJournalEntry(appendJournalEntry(nil, &tr))
		if err != nil || !reflect.DeepEqual(again, tr) {
			t.Fatalf("read %+v; its entry reads back as %+v (%v)", tr, again, err)
		}
	})
}

// A conversation forgotten by a process that opens the store without
// serving (ReplayJournal first) stays forgotten: the journal's turns of it
// are not written again at the next start.
func TestAForgottenConversationDoesNotComeBackFromTheJournal(t *testing.T) {
	at := time.Unix(1764000000, 0).UTC()
	key := state.NewKey([]byte("Bearer k"), "conv-1")
	path := filepath.Join(t.TempDir(), "crash.db")
	recordAfter(t, path, func() time.Time { return at }, journalTurns(key, at), false)

	st, err := state.OpenBolt(path, state.BoltOptions{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ReplayJournal(st, zerolog.Nop())
	if rec, _, _ := st.Get(key); rec.Requests != int64(len(journalTurns(key, at))) {
		t.Fatalf("replayed: %d requests, want %d", rec.Requests, len(journalTurns(key, at)))
	}
	if ok, err := st.Delete(key); !ok || err != nil {
		t.Fatalf("forget: %v %v", ok, err)
	}
	st.Close()

	st, err = state.OpenBolt(path, state.BoltOptions{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := New(st, zerolog.Nop(), time.Now, nil)
	defer r.Close()
	if rec, ok, _ := st.Get(key); ok {
		t.Fatalf("the forgotten conversation came back with %d requests", rec.Requests)
	}
}
