package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ctxpress/ctxpress/expand"
)

// The bolt file keeps the originals in a bucket of their own, with three
// buckets inside, each keyed by originalKey (reference, then namespace):
//
//	text: the original, as encodeOriginal writes it, written once
//	put:  when it was last put and its originalSize (two u64, big-endian)
//	age:  the put time then the key, no value: the originals in the order
//	      eviction and the sweep take them, oldest first
//
// and under origBytes the sum of their sizes. Putting an original again
// rewrites its small put and age entries, never its text; FindOriginal is
// a prefix seek in text.
var (
	bucketOriginals = []byte("originals")
	bucketOrigText  = []byte("text")
	bucketOrigPut   = []byte("put")
	bucketOrigAge   = []byte("age")
	origBytes       = []byte("bytes")
)

// origBuckets are the originals' buckets in one transaction.
type origBuckets struct {
	parent, text, put, age *bolt.Bucket
}

// originalBuckets returns tx's originals buckets, making them in a write
// transaction; ok is false in a read transaction of a file that has none.
func originalBuckets(tx *bolt.Tx) (b origBuckets, ok bool, err error) {
	if !tx.Writable() {
		if b.parent = tx.Bucket(bucketOriginals); b.parent == nil {
			return b, false, nil
		}
		b.text, b.put, b.age = b.parent.Bucket(bucketOrigText), b.parent.Bucket(bucketOrigPut), b.parent.Bucket(bucketOrigAge)
		return b, b.text != nil && b.put != nil && b.age != nil, nil
	}
	if b.parent, err = tx.CreateBucketIfNotExists(bucketOriginals); err != nil {
		return b, false, err
	}
	for _, nb := range []struct {
		name []byte
		dst  **bolt.Bucket
	}{{bucketOrigText, &b.text}, {bucketOrigPut, &b.put}, {bucketOrigAge, &b.age}} {
		if *nb.dst, err = b.parent.CreateBucketIfNotExists(nb.name); err != nil {
			return b, false, err
		}
	}
	return b, true, nil
}

// stamp is t as the age bucket orders it.
func stamp(t time.Time) uint64 { return uint64(max(t.UnixNano(), 0)) }

func ageKey(at uint64, k []byte) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(k)), at), k...)
}

// putInfo reads a put entry; ok is false for a malformed one.
func putInfo(v []byte) (at uint64, size int64, ok bool) {
	if len(v) != 16 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(v), int64(binary.BigEndian.Uint64(v[8:])), true
}

func putValue(at uint64, size int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), at), uint64(size))
}

func (b origBuckets) total() int64 {
	if v := b.parent.Get(origBytes); len(v) == 8 {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

func (b origBuckets) setTotal(n int64) error {
	return b.parent.Put(origBytes, binary.BigEndian.AppendUint64(nil, uint64(max(n, 0))))
}

// fresh reports whether every original of ns is kept and was put less
// than renewEvery before now: a put of them would change nothing.
func (s *boltStore) fresh(ns string, os []expand.Original, now time.Time) bool {
	all := true
	err := s.view("put originals", func(tx *bolt.Tx) error {
		b, ok, err := originalBuckets(tx)
		if !ok || err != nil {
			all = false
			return err
		}
		for _, o := range os {
			at, _, ok := putInfo(b.put.Get([]byte(originalKey(ns, o.Ref))))
			if !ok || stamp(now) >= at+uint64(renewEvery) {
				all = false
				return nil
			}
		}
		return nil
	})
	return all && err == nil
}

func (s *boltStore) PutOriginals(ns string, os []expand.Original) error {
	if err := checkOriginals(ns, os); err != nil {
		return err
	}
	if s.readOnly {
		return fmt.Errorf("state: put originals: %w", ErrReadOnly)
	}
	now := s.now()
	if len(os) == 0 || s.fresh(ns, os, now) {
		return nil
	}
	return s.update("put originals", func(tx *bolt.Tx) error {
		b, _, err := originalBuckets(tx)
		if err != nil {
			return err
		}
		total, at := b.total(), stamp(now)
		for _, o := range os {
			k := []byte(originalKey(ns, o.Ref))
			if oldAt, oldSize, ok := putInfo(b.put.Get(k)); ok {
				if b.text.Get(k) != nil {
					if at < oldAt+uint64(renewEvery) {
						continue
					}
					if err := b.renew(k, oldAt, at, oldSize); err != nil {
						return err
					}
					continue
				}
				// Its text is gone (a damaged file): forget its entries
				// and keep it anew.
				if err := b.age.Delete(ageKey(oldAt, k)); err != nil {
					return err
				}
				total -= oldSize
			}
			size := originalSize(ns, o)
			if size > s.originalsCap {
				continue // it would push out everything and still not fit
			}
			if err := b.text.Put(k, encodeOriginal(o)); err != nil {
				return err
			}
			if err := b.renew(k, 0, at, size); err != nil {
				return err
			}
			total += size
		}
		total, err = b.evictOldest(total, func(total int64, _ []byte) bool { return total > s.originalsCap })
		if err != nil {
			return err
		}
		return b.setTotal(total)
	})
}

// evictOldest removes originals, least recently put first, while more
// says so of the total kept and the next age key, and returns the total
// left. With none left the total is 0 (a sum that was off).
func (b origBuckets) evictOldest(total int64, more func(total int64, ageKey []byte) bool) (int64, error) {
	for {
		k, _ := b.age.Cursor().First()
		if k == nil {
			return 0, nil
		}
		if !more(total, k) {
			return total, nil
		}
		freed, err := b.remove(k)
		if err != nil {
			return total, err
		}
		total -= freed
	}
}

// renew moves the original under k from age oldAt (0: none) to at.
func (b origBuckets) renew(k []byte, oldAt, at uint64, size int64) error {
	if oldAt != 0 {
		if err := b.age.Delete(ageKey(oldAt, k)); err != nil {
			return err
		}
	}
	if err := b.age.Put(ageKey(at, k), nil); err != nil {
		return err
	}
	return b.put.Put(k, putValue(at, size))
}

// remove deletes the original whose age entry is ak and returns the size
// it counted. A malformed age key is deleted alone.
func (b origBuckets) remove(ak []byte) (int64, error) {
	ak = bytes.Clone(ak) // the cursor's bytes do not outlive a change
	if err := b.age.Delete(ak); err != nil || len(ak) <= 8 {
		return 0, err
	}
	k := ak[8:]
	var size int64
	if at, sz, ok := putInfo(b.put.Get(k)); ok && at == binary.BigEndian.Uint64(ak) {
		size = sz
	} else if ok {
		return 0, nil // a stale age entry: the original was put since
	}
	if err := b.put.Delete(k); err != nil {
		return 0, err
	}
	return size, b.text.Delete(k)
}

// sweepOriginals deletes, in tx, the originals last put before olderThan.
func sweepOriginals(tx *bolt.Tx, olderThan time.Time) error {
	b, _, err := originalBuckets(tx)
	if err != nil {
		return err
	}
	bound := stamp(olderThan)
	total, err := b.evictOldest(b.total(), func(_ int64, k []byte) bool {
		return len(k) < 8 || binary.BigEndian.Uint64(k) < bound
	})
	if err != nil {
		return err
	}
	return b.setTotal(total)
}

func (s *boltStore) GetOriginal(ns, ref string) (expand.Original, bool, error) {
	if err := checkOriginal(ns, ref); err != nil {
		return expand.Original{}, false, err
	}
	return s.getOriginal("get original", []byte(originalKey(ns, ref)), ref)
}

func (s *boltStore) FindOriginal(ref string) (expand.Original, bool, error) {
	if !expand.ValidRef(ref) {
		return expand.Original{}, false, ErrBadRef
	}
	return s.getOriginal("find original", []byte(ref), ref)
}

// getOriginal reads the first original whose key starts with prefix.
func (s *boltStore) getOriginal(op string, prefix []byte, ref string) (o expand.Original, ok bool, err error) {
	err = s.view(op, func(tx *bolt.Tx) error {
		b, has, err := originalBuckets(tx)
		if !has || err != nil {
			return err
		}
		k, v := b.text.Cursor().Seek(prefix)
		if k == nil || !bytes.HasPrefix(k, prefix) {
			return nil
		}
		o, err = decodeOriginal(ref, v)
		ok = err == nil
		return err
	})
	if err != nil {
		return expand.Original{}, false, err
	}
	return o, ok, nil
}
