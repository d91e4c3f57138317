package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"github.com/ctxpress/ctxpress/expand"
)

// Originals keeps what ctxpress replaced (a squashed, pruned or deduped
// tool output, the messages a summary covers) under its reference, per
// namespace, for as long as the store's retention and within its size cap.
// A reference looked up in another namespace is not found, whatever the
// first holds. Every Store implements it.
type Originals interface {
	// PutOriginals keeps each original of ns under its Ref, in one write
	// at most (one bolt transaction, one synced commit). One already kept
	// is kept once, as first put: its age is renewed, its text never
	// written again, and a put of originals all kept and put moments ago
	// (renewEvery) writes nothing. One larger than the size cap is not
	// kept. A bad namespace or reference is ErrBadRef, and nothing is kept.
	PutOriginals(ns string, o []expand.Original) error
	// GetOriginal returns the original kept under ref in ns; ok is false
	// when there is none (never kept, swept, evicted, or another
	// namespace's). A stored value that cannot be read is an error
	// wrapping ErrCorrupt.
	GetOriginal(ns, ref string) (o expand.Original, ok bool, err error)
}

// OriginalFinder finds an original whatever its namespace: for the
// operator (ctxpress expand without a client key, the admin API), never
// for a client. Every Store implements it.
type OriginalFinder interface {
	// FindOriginal returns an original kept under ref in any namespace;
	// ok is false when no namespace has one.
	FindOriginal(ref string) (o expand.Original, ok bool, err error)
}

var (
	_ OriginalFinder = (*memStore)(nil)
	_ OriginalFinder = (*boltStore)(nil)
	_ OriginalFinder = (*redisStore)(nil)
)

// DefaultOriginalsMaxBytes is the size cap of the originals a store keeps
// when its options leave it 0 (see originalSize for what counts).
const DefaultOriginalsMaxBytes = 256 << 20

// ErrBadRef is the error of a reference that is not one (expand.ValidRef)
// or of a namespace that fails Key.Validate.
var ErrBadRef = errors.New("state: invalid original reference")

// checkOriginal validates ns and ref as the stores take them.
func checkOriginal(ns, ref string) error {
	if !expand.ValidRef(ref) || (Key{Namespace: ns, ID: "x"}).Validate() != nil {
		return ErrBadRef
	}
	return nil
}

// checkOriginals validates ns and the reference of every original of a
// put.
func checkOriginals(ns string, os []expand.Original) error {
	for _, o := range os {
		if err := checkOriginal(ns, o.Ref); err != nil {
			return err
		}
	}
	return nil
}

// renewEvery is how stale an original's put time may get before a put of
// it writes a new one. An agent's request carries the same replaced
// outputs turn after turn, so most puts find every original kept: below
// this they change nothing (a bolt store then opens no write
// transaction), and eviction and retention need no finer clock.
const renewEvery = time.Minute

// originalsCap resolves an OriginalsMaxBytes option: 0 is the default, a
// negative value no cap.
func originalsCap(v int64) int64 {
	switch {
	case v == 0:
		return DefaultOriginalsMaxBytes
	case v < 0:
		return math.MaxInt64
	}
	return v
}

// originalSize is what an original of ns counts against the cap: its
// bytes and the names it is kept under. Every store counts the same, so
// one cap means the same on each.
func originalSize(ns string, o expand.Original) int64 {
	return int64(len(ns) + len(o.Ref) + len(o.Kind) + len(o.Tool) + len(o.Text))
}

// originalKey is where the bolt and Redis stores keep an original: its
// reference then its namespace. References have one length, so the two
// never run together, and a reference's originals in every namespace
// share the prefix (FindOriginal).
func originalKey(ns, ref string) string { return ref + ns }

// The stored form of an original (bolt and Redis):
//
//	version byte | u32 CRC-32C of the rest | uvarint len, kind | uvarint len, tool | text
//
// The checksum turns a value damaged on disk into ErrCorrupt instead of
// another text.
const originalVersion = 1

func encodeOriginal(o expand.Original) []byte {
	b := make([]byte, 5, 5+2*binary.MaxVarintLen32+len(o.Kind)+len(o.Tool)+len(o.Text))
	b[0] = originalVersion
	b = binary.AppendUvarint(b, uint64(len(o.Kind)))
	b = append(b, o.Kind...)
	b = binary.AppendUvarint(b, uint64(len(o.Tool)))
	b = append(b, o.Tool...)
	b = append(b, o.Text...)
	binary.LittleEndian.PutUint32(b[1:5], crc32.Checksum(b[5:], journalCRC))
	return b
}

// decodeOriginal reads what encodeOriginal wrote, kept under ref; an error
// wraps ErrCorrupt. The strings are copies: data may be the db's map.
func decodeOriginal(ref string, data []byte) (expand.Original, error) {
	bad := func(why string) (expand.Original, error) {
		return expand.Original{}, fmt.Errorf("state: original %s: %w: %s", ref, ErrCorrupt, why)
	}
	if len(data) < 5 || data[0] != originalVersion {
		return bad("unknown format")
	}
	if crc32.Checksum(data[5:], journalCRC) != binary.LittleEndian.Uint32(data[1:5]) {
		return bad("checksum mismatch")
	}
	rest := data[5:]
	field := func() (string, bool) {
		n, w := binary.Uvarint(rest)
		if w <= 0 || n > uint64(len(rest)-w) {
			return "", false
		}
		s := string(rest[w : w+int(n)])
		rest = rest[w+int(n):]
		return s, true
	}
	kind, ok1 := field()
	tool, ok2 := field()
	if !ok1 || !ok2 {
		return bad("truncated")
	}
	return expand.Original{Ref: ref, Kind: kind, Tool: tool, Text: string(rest)}, nil
}
