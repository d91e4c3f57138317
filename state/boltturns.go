package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/tidwall/gjson"
	bolt "go.etcd.io/bbolt"
)

// The bolt store keeps a record's turns apart from the record: the
// record's JSON holds only the newest turns, fewer than turnChunk, as
// "turns_tail"; each turnChunk of them before are a chunk in the turns
// bucket (a JSON array like the record's old "turns" field), written once
// when the tail fills, and dropped when the newer ones hold MaxTurns. So
// a turn rewrites the record (about 2 KB with its tail) and, one turn in
// turnChunk, writes a chunk and deletes one, where the record with its
// MaxTurns turns (about 10 KB) was rewritten on every turn; bbolt writes
// every page a commit touches whole, so small hot values matter. Reading
// takes the last MaxTurns of the chunks and the tail.
//
// A chunk's key is the record's key prefixed by its length (two bytes,
// big-endian) and followed by the chunk's number (four bytes,
// big-endian): a record's chunks are the keys under the prefix, in order,
// and no other record's key can share the prefix.
var bucketTurns = []byte("turns")

// turnChunk is how many turns a chunk holds.
const turnChunk = 16

// tailField is the record JSON's field of the turns after the last chunk.
const tailField = "turns_tail"

// turnLayout is how a record's turns are stored, kept in the record cache
// so a write knows what to write without reading them. It is not changed
// once made (the cache's committed and pending states may share it).
type turnLayout struct {
	turns  []Turn // the last MaxTurns stored: the record's Turns as written
	first  uint32 // the oldest chunk's number
	chunks int    // how many chunks, each of turnChunk turns
	tail   []byte // the turns after the chunks, comma-separated, without brackets
	tailN  int    // how many
}

// apply is applyUpdate on the record under k in tx, starting from the
// cached record when there is one (the file then holds that same record:
// every write goes through the cache) and the layout of its turns the
// cache kept. It writes the record with its tail, and the chunks the
// turns it added filled (writeTurns), and returns the record and its
// turns' layout.
func (s *boltStore) apply(tx *bolt.Tx, key Key, k []byte, now time.Time, fn func(*Record) error) (Record, *turnLayout, error) {
	b, tb := tx.Bucket(bucketConversations), tx.Bucket(bucketTurns)
	rec := Record{Key: key, CreatedAt: now}
	var turns *turnLayout // nil: not known, all written again
	if old := b.Get(k); old != nil {
		if r, t, ok := s.records.latest(k); ok {
			rec, turns = r, t
		} else if r, err := decodeRecord(key, old); err == nil {
			rec = r
			if turns, err = storedTurns(tb, k, old, &rec); err != nil {
				rec.Turns, turns = nil, nil // corrupt chunks: start over
			}
		}
	}
	rec, err := applyRecord(rec, key, now, fn)
	if err != nil {
		return Record{}, nil, err
	}
	if turns, err = writeTurns(tb, k, turns, rec.Turns); err != nil {
		return Record{}, nil, err
	}
	data, err := encodeRecordWithTurns(&rec, tailField, nil, turns.tail)
	if err != nil {
		return Record{}, nil, err
	}
	if err := b.Put(k, data); err != nil {
		return Record{}, nil, err
	}
	return rec, turns, nil
}

// storedTurns sets rec.Turns, decoded from the record's JSON (value),
// from the chunks and the tail when the JSON had no "turns" (a record
// written by this version), and returns their layout; nil when they were
// in the JSON (a record of schema 1, whose turns its next write moves).
func storedTurns(tb *bolt.Bucket, k, value []byte, rec *Record) (*turnLayout, error) {
	if len(rec.Turns) > 0 {
		return nil, nil
	}
	l := &turnLayout{}
	var all []Turn
	if tb != nil { // nil: a file opened read-only from before the bucket
		prefix := turnsPrefix(k)
		c := tb.Cursor()
		for ck, v := c.Seek(prefix); ck != nil && bytes.HasPrefix(ck, prefix); ck, v = c.Next() {
			var ts diskTurns
			if err := ts.UnmarshalJSON(v); err != nil {
				return nil, fmt.Errorf("state: turns of %s: %w: %w", rec.Key, ErrCorrupt, err)
			}
			if l.chunks == 0 {
				l.first = binary.BigEndian.Uint32(ck[len(prefix):])
			}
			l.chunks++
			all = append(all, ts...)
		}
	}
	if raw := gjson.GetBytes(value, tailField).Raw; raw != "" {
		var ts diskTurns
		if err := ts.UnmarshalJSON([]byte(raw)); err != nil {
			return nil, fmt.Errorf("state: turns of %s: %w: %w", rec.Key, ErrCorrupt, err)
		}
		for _, t := range ts {
			l.tail = appendTurnTo(l.tail, t)
		}
		l.tailN = len(ts)
		all = append(all, ts...)
	}
	if all = all[max(0, len(all)-MaxTurns):]; len(all) > 0 {
		l.turns = all
	}
	rec.Turns = l.turns
	return l, nil
}

// appendTurnTo appends t's inner array to a comma-separated list.
func appendTurnTo(list []byte, t Turn) []byte {
	if len(list) > 0 {
		list = append(list, ',')
	}
	return appendTurn(list, t)
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
// writes only the chunks those turns fill and drops the oldest; else it
// writes them all again.
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

// appendChunks adds the last added turns of ts after those of l.
func appendChunks(tb *bolt.Bucket, k []byte, l *turnLayout, ts []Turn, added int) (*turnLayout, error) {
	if added == 0 {
		return l, nil
	}
	out := *l
	out.turns = ts
	// A new array: l.tail may be the cache's committed layout's.
	out.tail = slices.Clip(out.tail)
	prefix := turnsPrefix(k)
	for _, t := range ts[len(ts)-added:] {
		out.tail = appendTurnTo(out.tail, t)
		if out.tailN++; out.tailN < turnChunk {
			continue
		}
		v := make([]byte, 0, len(out.tail)+2)
		v = append(append(append(v, '['), out.tail...), ']')
		if err := tb.Put(chunkKey(prefix, out.first+uint32(out.chunks)), v); err != nil {
			return nil, err
		}
		out.chunks++
		out.tail, out.tailN = nil, 0
	}
	for out.chunks > 0 && (out.chunks-1)*turnChunk+out.tailN >= MaxTurns {
		if err := tb.Delete(chunkKey(prefix, out.first)); err != nil {
			return nil, err
		}
		out.first, out.chunks = out.first+1, out.chunks-1
	}
	return &out, nil
}

// maxNewTurns bounds how many added turns appendedTurns looks for before
// the turns are written all again.
const maxNewTurns = 32

// appendedTurns reports whether ts is old with added turns appended, the
// last MaxTurns kept, and how many. AddTurn appends in place, so the turns
// kept are usually old's own: compared by address first, by value only
// when that fails.
func appendedTurns(old, ts []Turn) (added int, ok bool) {
	for _, byValue := range []bool{false, true} {
		for added := 0; added <= min(len(ts), maxNewTurns); added++ {
			k := len(ts) - added
			switch {
			case k != min(len(old), MaxTurns-added):
			case k == 0:
				return added, true
			case !byValue && &ts[k-1] == &old[len(old)-1]:
				return added, true
			case byValue && slices.EqualFunc(ts[:k], old[len(old)-k:], sameTurn):
				return added, true
			}
		}
	}
	return 0, false
}
