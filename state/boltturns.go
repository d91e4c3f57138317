package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The bolt store keeps a record's turns apart from the record, in the
// turns bucket, as chunks of up to turnChunk turns (each a JSON array like
// the record's old "turns" field), so a turn rewrites its record (without
// turns) and the newest chunk: about 1 KB per conversation, where the
// record with its MaxTurns turns was 7 KB rewritten on every turn. The
// oldest chunk is dropped once the others hold MaxTurns turns; reading
// takes the last MaxTurns of them all.
//
// A chunk's key is the record's key prefixed by its length (two bytes,
// big-endian) and followed by the chunk's number (four bytes,
// big-endian): a record's chunks are the keys under the prefix, in order,
// and no other record's key can share the prefix.
var bucketTurns = []byte("turns")

// turnChunk is how many turns a chunk holds.
const turnChunk = 16

// turnLayout is how a record's turns are stored, kept in the record cache
// so a write knows what to rewrite without reading them.
type turnLayout struct {
	turns []Turn // the last MaxTurns stored: the record's Turns as written
	first uint32 // the oldest chunk's number
	lens  []int  // turns in each chunk, oldest first; all but the last hold turnChunk
	tail  []byte // the newest chunk's turns, comma-separated, without brackets
}

// apply is applyUpdate on the record under k in tx, starting from the
// cached record when there is one (the file then holds that same record:
// every write goes through the cache) and the layout of its turns the
// cache kept. It writes the record without its turns, and the turns it
// added (writeTurns), and returns the record and its turns' layout.
func (s *boltStore) apply(tx *bolt.Tx, key Key, k []byte, now time.Time, fn func(*Record) error) (Record, *turnLayout, error) {
	b, tb := tx.Bucket(bucketConversations), tx.Bucket(bucketTurns)
	rec := Record{Key: key, CreatedAt: now}
	var turns *turnLayout // nil: not known, all written again
	if old := b.Get(k); old != nil {
		if r, t, ok := s.records.latest(k); ok {
			rec, turns = r, t
		} else if r, err := decodeRecord(key, old); err == nil {
			rec = r
			if turns, err = storedTurns(tb, k, &rec); err != nil {
				rec.Turns, turns = nil, nil // corrupt chunks: start over
			}
		}
	}
	rec, err := applyRecord(rec, key, now, fn)
	if err != nil {
		return Record{}, nil, err
	}
	bare := rec
	bare.Turns = nil
	data, err := encodeRecord(&bare)
	if err != nil {
		return Record{}, nil, err
	}
	if err := b.Put(k, data); err != nil {
		return Record{}, nil, err
	}
	if turns, err = writeTurns(tb, k, turns, rec.Turns); err != nil {
		return Record{}, nil, err
	}
	return rec, turns, nil
}

// storedTurns sets rec.Turns, decoded from the record's JSON, from the
// turns bucket when the JSON had none (a record written by this version),
// and returns their layout; nil when they were in the JSON (a record of
// schema 1, whose turns its next write moves).
func storedTurns(tb *bolt.Bucket, k []byte, rec *Record) (*turnLayout, error) {
	if len(rec.Turns) > 0 {
		return nil, nil
	}
	l, err := loadTurns(tb, k)
	if err != nil {
		return nil, err
	}
	rec.Turns = l.turns
	return l, nil
}

// turnsPrefix is the key prefix of the chunks of the record under k.
func turnsPrefix(k []byte) []byte {
	p := make([]byte, 2, 2+len(k)+4)
	binary.BigEndian.PutUint16(p, uint16(len(k)))
	return append(p, k...)
}

func chunkKey(prefix []byte, n uint32) []byte {
	return binary.BigEndian.AppendUint32(slices.Clip(prefix), n)
}

// loadTurns reads the chunks of the record under k. tb may be nil (a file
// opened read-only from before the turns bucket): no turns.
func loadTurns(tb *bolt.Bucket, k []byte) (*turnLayout, error) {
	l := &turnLayout{}
	if tb == nil {
		return l, nil
	}
	prefix := turnsPrefix(k)
	var all []Turn
	c := tb.Cursor()
	for ck, v := c.Seek(prefix); ck != nil && bytes.HasPrefix(ck, prefix); ck, v = c.Next() {
		if len(ck) != len(prefix)+4 {
			continue
		}
		var ts diskTurns
		if err := ts.UnmarshalJSON(v); err != nil {
			return nil, fmt.Errorf("state: turns of %q: %w: %w", k, ErrCorrupt, err)
		}
		if len(l.lens) == 0 {
			l.first = binary.BigEndian.Uint32(ck[len(prefix):])
		}
		l.lens = append(l.lens, len(ts))
		all = append(all, ts...)
		if len(v) >= 2 {
			l.tail = append(l.tail[:0], v[1:len(v)-1]...)
		}
	}
	l.turns = all[max(0, len(all)-MaxTurns):]
	if len(l.turns) == 0 {
		l.turns = nil
	}
	return l, nil
}

// deleteTurns deletes every chunk of the record under k.
func deleteTurns(tb *bolt.Bucket, k []byte) error {
	prefix := turnsPrefix(k)
	var doomed [][]byte
	c := tb.Cursor()
	for ck, _ := c.Seek(prefix); ck != nil && bytes.HasPrefix(ck, prefix); ck, _ = c.Next() {
		doomed = append(doomed, slices.Clone(ck))
	}
	for _, ck := range doomed {
		if err := tb.Delete(ck); err != nil {
			return err
		}
	}
	return nil
}

// writeTurns stores ts as the turns of the record under k, whose stored
// turns are laid out as prev (nil: not known, e.g. inside the record's
// JSON as an older version wrote them), and returns the new layout. When
// ts is prev's turns with turns appended (the last MaxTurns kept), it
// writes only the chunks those turns go in and drops the oldest chunks;
// else it writes them all again.
func writeTurns(tb *bolt.Bucket, k []byte, prev *turnLayout, ts []Turn) (*turnLayout, error) {
	if prev != nil {
		if added, ok := appendedTurns(prev.turns, ts); ok {
			return appendChunks(tb, k, prev, ts, added)
		}
	}
	if err := deleteTurns(tb, k); err != nil {
		return nil, err
	}
	return appendChunks(tb, k, &turnLayout{}, ts, len(ts))
}

// appendChunks writes the last added turns of ts after those of l.
func appendChunks(tb *bolt.Bucket, k []byte, l *turnLayout, ts []Turn, added int) (*turnLayout, error) {
	if added == 0 {
		return l, nil
	}
	out := &turnLayout{turns: ts, first: l.first, lens: slices.Clone(l.lens), tail: l.tail}
	prefix := turnsPrefix(k)
	dirty := false // the newest chunk has turns it has not written
	put := func() error {
		n := out.first + uint32(len(out.lens)-1)
		v := make([]byte, 0, len(out.tail)+2)
		v = append(append(append(v, '['), out.tail...), ']')
		return tb.Put(chunkKey(prefix, n), v)
	}
	for _, t := range ts[len(ts)-added:] {
		if len(out.lens) == 0 || out.lens[len(out.lens)-1] == turnChunk {
			if dirty { // a full chunk this call wrote turns into
				if err := put(); err != nil {
					return nil, err
				}
			}
			out.lens = append(out.lens, 0)
			out.tail = nil
		}
		// A new array: the old tail is the cache's committed layout's.
		tail := make([]byte, 0, len(out.tail)+48)
		tail = append(tail, out.tail...)
		if len(tail) > 0 {
			tail = append(tail, ',')
		}
		out.tail = appendTurn(tail, t)
		out.lens[len(out.lens)-1]++
		dirty = true
	}
	if err := put(); err != nil {
		return nil, err
	}
	total := 0
	for _, n := range out.lens {
		total += n
	}
	for len(out.lens) > 1 && total-out.lens[0] >= MaxTurns {
		if err := tb.Delete(chunkKey(prefix, out.first)); err != nil {
			return nil, err
		}
		total -= out.lens[0]
		out.first, out.lens = out.first+1, out.lens[1:]
	}
	return out, nil
}

// appendedTurns reports whether ts is old with added turns appended, the
// last MaxTurns kept, and how many. AddTurn appends in place, so the turns
// kept are usually old's own: compared by address first, by value only
// when that fails.
func appendedTurns(old, ts []Turn) (added int, ok bool) {
	kept := func(added int) (int, bool) {
		k := len(ts) - added
		return k, k == min(len(old), MaxTurns-added)
	}
	for _, byValue := range []bool{false, true} {
		for added := 0; added <= min(len(ts), maxNewTurns); added++ {
			k, fits := kept(added)
			if !fits {
				continue
			}
			if k == 0 {
				return added, true
			}
			if !byValue && &ts[k-1] == &old[len(old)-1] {
				return added, true
			}
			if byValue && slices.Equal(ts[:k], old[len(old)-k:]) {
				return added, true
			}
		}
	}
	return 0, false
}
