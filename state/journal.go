package state

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"sync"
	"sync/atomic"
	"unsafe"
)

// A journal keeps the changes a writer has taken but not yet written to
// the store, in a file mapped into memory: appending one is a copy into
// the page cache, no system call, and what is copied survives the
// process's death (a SIGKILL, an OOM kill, a panic), which the writer's
// queue does not. After a crash the store replays the entries its last
// transaction did not cover (the mark it keeps in that transaction), so
// a turn answered is a turn recorded. It does not survive a power loss
// (nothing syncs it): the store's own transactions do.
//
// The file is a header page and a ring of entries, each
//
//	u32 payload length | u32 CRC-32C of seq and payload | u64 seq | payload | pad to 8
//
// with consecutive seqs. A length of journalWrapMark says the ring goes on
// at its start. The header holds the tail: the offset and the seq (its low
// 32 bits) of the oldest entry not yet known to be written, or of the next
// one when there is none (a hint: the store's mark decides), stored with
// one aligned 8-byte write that a kill cannot tear. Recovery reads from
// there while entries check out and their seqs follow on from the tail's:
// an entry torn by a kill, or one left from an older lap, ends it.
const (
	journalMagic     = "ctxpJNL1"
	journalHeader    = 4096 // the header page; the ring follows
	journalEntryHead = 16
	journalWrapMark  = 0xFFFFFFFF
	journalHintAt    = 16 // the tail hint's offset in the header
	// DefaultJournalBytes is the journal file's size: at 12k turns a
	// second and the writer's longest interval (100 ms) its entries take
	// about 300 KiB, so a full journal means a store that has stopped.
	DefaultJournalBytes = 4 << 20
	minJournalBytes     = 2 * journalHeader
)

// ErrJournalFull: the journal has no room for the entry (the store is
// behind by megabytes of changes, or the entry is over half the ring).
// The change is kept as before journals existed: in memory until written.
var ErrJournalFull = errors.New("state: journal full")

var journalCRC = crc32.MakeTable(crc32.Castagnoli)

// JournalEntry is a change journaled and not covered by the store's mark
// at open: its writer applies it again.
type JournalEntry struct {
	Seq     uint64
	Payload []byte
}

// Journaled is a store that keeps a journal of its writer's changes (a
// bolt file does; the memory store has nothing to outlive, and Redis'
// writes are the other replicas' to see). A writer journals each change
// before its caller is answered, writes it in a later UpdateManyThrough,
// and replays Unjournaled at start.
type Journaled interface {
	Store
	// Journal appends payload (not empty) and returns its seq. The payload
	// is copied. It fails with ErrJournalFull, or when the store is closed.
	Journal(payload []byte) (seq uint64, err error)
	// UpdateManyThrough is UpdateMany that also records, in the same
	// transaction, that every change journaled up to seq through is written
	// or given up: their entries are not replayed and their room is reused.
	UpdateManyThrough(muts []Mutation, through uint64) (recs []Record, errs []error, err error)
	// Unjournaled returns, once, the entries journaled before the last
	// exit that no transaction covered, oldest first, and through: the seq
	// up to which every change is written once they are.
	Unjournaled() (entries []JournalEntry, through uint64)
}

// journal is the ring over a mapped file (see above).
type journal struct {
	mu    sync.Mutex
	buf   []byte        // the mapped file
	head  int           // where the next entry goes; guarded by mu
	next  uint64        // the next entry's seq; guarded by mu
	live  []journalSpan // entries not yet released, oldest first; guarded by mu
	unmap func() error  // nil once closed
}

// journalSpan is where one live entry is.
type journalSpan struct {
	seq uint64
	off int
}

// validJournal reports whether buf is a journal's file (its magic and its
// size as written).
func validJournal(buf []byte) bool {
	return len(buf) >= minJournalBytes && string(buf[:8]) == journalMagic &&
		binary.LittleEndian.Uint64(buf[8:16]) == uint64(len(buf))
}

// formatJournal makes buf an empty journal.
func formatJournal(buf []byte) {
	clear(buf)
	copy(buf, journalMagic)
	binary.LittleEndian.PutUint64(buf[8:16], uint64(len(buf)))
	hintOf(buf).Store(tailHint(journalHeader, 0))
}

// tailHint packs the tail's offset and seq into the header's word.
func tailHint(off int, seq uint64) uint64 {
	return uint64(off)<<32 | uint64(uint32(seq))
}

// hintOf is the header's tail hint. The mapping is page-aligned, so the
// word is aligned and its stores are single writes.
func hintOf(buf []byte) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&buf[journalHintAt]))
}

// recoverJournal reads buf's entries from its tail hint on, and returns
// them (payloads copied) with where the next entry goes.
func recoverJournal(buf []byte) (entries []JournalEntry, spans []journalSpan, head int) {
	hint := hintOf(buf).Load()
	off, first := int(hint>>32), uint32(hint)
	if off < journalHeader || off >= len(buf) || off%8 != 0 {
		return nil, nil, journalHeader
	}
	wrapped := false
	for {
		seq, payload, end, ok := readEntry(buf, off)
		if end == journalHeader && ok && payload == nil { // the wrap mark, or the ring's end
			if wrapped {
				break
			}
			wrapped, off = true, journalHeader
			continue
		}
		if !ok || len(entries) == 0 && uint32(seq) != first || len(entries) > 0 && seq != entries[len(entries)-1].Seq+1 {
			break
		}
		entries = append(entries, JournalEntry{Seq: seq, Payload: append([]byte(nil), payload...)})
		spans = append(spans, journalSpan{seq: seq, off: off})
		off = end
	}
	return entries, spans, off
}

// readEntry reads the entry at off: its seq, payload (a view of buf) and
// where the next one starts. At the wrap mark or the ring's end it reports
// ok with no payload and end at the ring's start; ok is false when there
// is no whole, valid entry.
func readEntry(buf []byte, off int) (seq uint64, payload []byte, end int, ok bool) {
	if off+journalEntryHead > len(buf) {
		return 0, nil, journalHeader, true
	}
	n := binary.LittleEndian.Uint32(buf[off:])
	if n == journalWrapMark {
		return 0, nil, journalHeader, true
	}
	end = off + entrySize(int(n))
	if n == 0 || end > len(buf) {
		return 0, nil, 0, false
	}
	body := buf[off+8 : off+journalEntryHead+int(n)]
	if crc32.Checksum(body, journalCRC) != binary.LittleEndian.Uint32(buf[off+4:]) {
		return 0, nil, 0, false
	}
	return binary.LittleEndian.Uint64(body), body[8:], end, true
}

// entrySize is the ring bytes of an entry with n bytes of payload.
func entrySize(n int) int {
	return (journalEntryHead + n + 7) &^ 7
}

// append copies payload into the ring as the next entry.
func (j *journal) append(payload []byte) (uint64, error) {
	if len(payload) == 0 {
		return 0, errors.New("state: journal: empty entry")
	}
	need := entrySize(len(payload))
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.unmap == nil {
		return 0, ErrClosed
	}
	if need > (len(j.buf)-journalHeader)/2 {
		return 0, ErrJournalFull
	}
	off, ok := j.room(need)
	if !ok {
		return 0, ErrJournalFull
	}
	if off != j.head && j.head+4 <= len(j.buf) {
		binary.LittleEndian.PutUint32(j.buf[j.head:], journalWrapMark)
	}
	seq := j.next
	e := j.buf[off : off+need]
	binary.LittleEndian.PutUint32(e, uint32(len(payload)))
	binary.LittleEndian.PutUint64(e[8:], seq)
	copy(e[journalEntryHead:], payload)
	binary.LittleEndian.PutUint32(e[4:], crc32.Checksum(e[8:journalEntryHead+len(payload)], journalCRC))
	j.live = append(j.live, journalSpan{seq: seq, off: off})
	j.head = off + need
	j.next++
	if len(j.live) == 1 {
		// The tail said where this entry would go, but it may have gone to
		// the ring's start, and the entries after it will cover the wrap
		// mark the old tail points at.
		j.storeTail()
	}
	return seq, nil
}

// room is where an entry of need bytes goes, if the ring has room for it:
// at the head, or at the ring's start when it does not fit before the
// end. Live entries run from the tail (the oldest's offset) to the head,
// perhaps wrapping.
func (j *journal) room(need int) (int, bool) {
	size := len(j.buf)
	if len(j.live) == 0 {
		if j.head+need <= size {
			return j.head, true
		}
		return journalHeader, true
	}
	tail := j.live[0].off
	if j.head > tail {
		if j.head+need <= size {
			return j.head, true
		}
		return journalHeader, journalHeader+need <= tail
	}
	return j.head, j.head+need <= tail
}

// release frees the entries up to seq through: they are written (or given
// up), as the store's mark now says.
func (j *journal) release(through uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.unmap != nil && j.releaseLocked(through) {
		j.storeTail()
	}
}

// releaseLocked drops the live entries up to seq through, with mu held,
// and reports whether there were any.
func (j *journal) releaseLocked(through uint64) bool {
	n := 0
	for n < len(j.live) && j.live[n].seq <= through {
		n++
	}
	j.live = append(j.live[:0], j.live[n:]...)
	return n > 0
}

// storeTail writes the tail to the header: the oldest live entry, or
// where the next one goes.
func (j *journal) storeTail() {
	off, seq := j.head, j.next
	if len(j.live) > 0 {
		off, seq = j.live[0].off, j.live[0].seq
	}
	hintOf(j.buf).Store(tailHint(off, seq))
}

// resume makes seq next the next entry's, once the entries up to mark
// (recovered, and written before the last exit) are released.
func (j *journal) resume(next, mark uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.next = next
	j.releaseLocked(mark)
	j.storeTail()
}

// close unmaps the file. What was appended stays in it.
func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.unmap == nil {
		return nil
	}
	err := j.unmap()
	j.unmap, j.buf = nil, nil
	return err
}
