package recorder

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
)

// A turn's journal entry holds what applyTurn reads of it, so that a turn
// answered before a crash is applied at the next start as the writer
// would have: the key, the line it took, its numbers, dedups and prunes,
// and what the upstream reported. Version 1:
//
//	1 | ns | id | at (unix ns) | model | flags | line id | tip | messages |
//	chain (n, hashes) | applied (flag bit, hash) | tokens before, after,
//	raw after | trigger | usage (input, output, cached, cache write) |
//	dedups (n; index, result, digest) | prunes (n; index, result, digest, turn) |
//	[server compaction (input, output, cached, cache write)] |
//	[hidden rounds (input, output, cached, cache write)]
//
// with strings and counts as uvarints and numbers as varints. The server
// compaction and the hidden rounds are there only when their flags are
// set, so an entry without them is as an earlier version wrote and reads
// it.
const journalVersion = 1

const (
	jForwarded = 1 << iota
	jCompacted
	jServerHistory
	jUsageFound
	jApplied
	jServerCompacted
	jObserved
	jHidden
)

// appendJournalEntry appends tr's journal entry to dst.
func appendJournalEntry(dst []byte, tr *Turn) []byte {
	t := tr
	dst = append(dst, journalVersion)
	dst = appendString(dst, t.Key.Namespace)
	dst = appendString(dst, t.Key.ID)
	dst = binary.AppendVarint(dst, tr.At.UnixNano())
	dst = appendString(dst, t.Model)
	dst = append(dst, flag(t.Forwarded, jForwarded)|flag(t.Compacted, jCompacted)|flag(t.ServerHistory, jServerHistory)|
		flag(tr.Usage.Found, jUsageFound)|flag(t.Applied != nil, jApplied)|flag(tr.Usage.ServerCompacted, jServerCompacted)|flag(t.Observed, jObserved)|
		flag(tr.Usage.Hidden != (wire.Tokens{}), jHidden))
	dst = append(dst, t.Line.ID[:]...)
	dst = append(dst, t.Line.Tip[:]...)
	dst = binary.AppendUvarint(dst, uint64(t.Line.Messages))
	dst = binary.AppendUvarint(dst, uint64(len(t.Line.Chain)))
	for _, h := range t.Line.Chain {
		dst = append(dst, h[:]...)
	}
	if t.Applied != nil {
		dst = append(dst, t.Applied[:]...)
	}
	for _, n := range [...]int{t.TokensBefore, t.TokensAfter, t.RawAfter, t.Trigger,
		tr.Usage.InputTokens, tr.Usage.OutputTokens, tr.Usage.CachedTokens, tr.Usage.CacheWriteTokens} {
		dst = binary.AppendVarint(dst, int64(n))
	}
	dst = binary.AppendUvarint(dst, uint64(len(t.Dedups)))
	for _, d := range t.Dedups {
		dst = binary.AppendVarint(dst, int64(d.Index))
		dst = binary.AppendVarint(dst, int64(d.Result))
		dst = append(dst, d.Digest[:]...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(t.Prunes)))
	for _, p := range t.Prunes {
		dst = binary.AppendVarint(dst, int64(p.Index))
		dst = binary.AppendVarint(dst, int64(p.Result))
		dst = append(dst, p.Digest[:]...)
		dst = binary.AppendVarint(dst, int64(p.Turn))
	}
	if tr.Usage.ServerCompacted {
		c := &tr.Usage.ServerCompaction
		for _, n := range [...]int{c.InputTokens, c.OutputTokens, c.CachedTokens, c.CacheWriteTokens} {
			dst = binary.AppendVarint(dst, int64(n))
		}
	}
	if h := &tr.Usage.Hidden; *h != (wire.Tokens{}) {
		for _, n := range [...]int{h.InputTokens, h.OutputTokens, h.CachedTokens, h.CacheWriteTokens} {
			dst = binary.AppendVarint(dst, int64(n))
		}
	}
	return dst
}

// flag is bit when on, else 0.
func flag(on bool, bit byte) byte {
	if on {
		return bit
	}
	return 0
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

var errJournalEntry = errors.New("not a turn's journal entry")

// journalReader reads an entry's fields in order; the first short or
// malformed one sets err and every later read is zero.
type journalReader struct {
	b   []byte
	err error
}

func (r *journalReader) fail() {
	r.err, r.b = errJournalEntry, nil
}

func (r *journalReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// varint reads what binary.AppendVarint wrote: a zig-zag uvarint.
func (r *journalReader) varint() int {
	u := r.uvarint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return int(v)
}

func (r *journalReader) bytes(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *journalReader) string() string { return string(r.bytes(r.uvarint())) }

func (r *journalReader) hash() (h [32]byte) {
	copy(h[:], r.bytes(32))
	return h
}

// count reads a count of items each at least min bytes long: one the
// rest of the entry cannot hold is malformed (and would allocate).
func (r *journalReader) count(min int) int {
	n := r.uvarint()
	if n > uint64(len(r.b)/min) {
		r.fail()
		return 0
	}
	return int(n)
}

// readJournalEntry reads an entry appendJournalEntry wrote.
func readJournalEntry(b []byte) (Turn, error) {
	if len(b) == 0 || b[0] != journalVersion {
		return Turn{}, errJournalEntry
	}
	r := journalReader{b: b[1:]}
	var tr Turn
	t := &tr
	t.Key = state.Key{Namespace: r.string(), ID: r.string()}
	tr.At = time.Unix(0, int64(r.varint()))
	t.Model = r.string()
	flags := r.bytes(1)
	t.Line.ID, t.Line.Tip = r.hash(), r.hash()
	t.Line.Messages = int(r.uvarint())
	if n := r.count(32); n > 0 {
		t.Line.Chain = make([][32]byte, n)
		for i := range t.Line.Chain {
			t.Line.Chain[i] = r.hash()
		}
	}
	if len(flags) == 1 {
		f := flags[0]
		t.Forwarded, t.Compacted, t.ServerHistory, tr.Usage.Found = f&jForwarded != 0, f&jCompacted != 0, f&jServerHistory != 0, f&jUsageFound != 0
		t.Observed = f&jObserved != 0
		if f&jApplied != 0 {
			applied := state.ChainHash(r.hash())
			t.Applied = &applied
		}
	}
	for _, n := range [...]*int{&t.TokensBefore, &t.TokensAfter, &t.RawAfter, &t.Trigger,
		&tr.Usage.InputTokens, &tr.Usage.OutputTokens, &tr.Usage.CachedTokens, &tr.Usage.CacheWriteTokens} {
		*n = r.varint()
	}
	if n := r.count(34); n > 0 {
		t.Dedups = make([]history.DedupMark, n)
		for i := range t.Dedups {
			t.Dedups[i] = history.DedupMark{Index: r.varint(), Result: r.varint(), Digest: r.hash()}
		}
	}
	if n := r.count(35); n > 0 {
		t.Prunes = make([]history.PruneMark, n)
		for i := range t.Prunes {
			t.Prunes[i] = history.PruneMark{Index: r.varint(), Result: r.varint(), Digest: r.hash(), Turn: r.varint()}
		}
	}
	if len(flags) == 1 && flags[0]&jServerCompacted != 0 {
		tr.Usage.ServerCompacted = true
		c := &tr.Usage.ServerCompaction
		for _, n := range [...]*int{&c.InputTokens, &c.OutputTokens, &c.CachedTokens, &c.CacheWriteTokens} {
			*n = r.varint()
		}
	}
	if len(flags) == 1 && flags[0]&jHidden != 0 {
		h := &tr.Usage.Hidden
		for _, n := range [...]*int{&h.InputTokens, &h.OutputTokens, &h.CachedTokens, &h.CacheWriteTokens} {
			*n = r.varint()
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail()
	}
	if r.err == nil && t.Key.Validate() != nil {
		r.fail()
	}
	return tr, r.err
}
