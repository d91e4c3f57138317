package state

import (
	"container/list"
	"slices"
	"sync"
)

// recordCacheSize is how many decoded records a bolt store keeps. A busy
// conversation is read and rewritten on every turn; decoding its JSON (up to
// MaxTurns turns) each time was most of the chat path's CPU.
const recordCacheSize = 512

// recordCache holds decoded records by encoded key, least recently used
// evicted, each with the bbolt transaction id that wrote it.
//
// Writers put the record they write, or a tombstone for one they delete,
// from inside their write transaction; bbolt runs those one at a time, so
// the cache follows the write order. Such an entry is pending until its
// transaction commits: readers do not see it (they read the file, which
// still has the committed record), writers build on it. A reader that
// missed adds what its read transaction (id r) decoded only when the key
// has no entry at all and nothing newer than r was ever dropped from the
// cache (floor): any write to the key after r left an entry or a
// tombstone, or raised the floor when it was dropped. So a read that raced
// a write cannot leave older data behind.
type recordCache struct {
	mu    sync.Mutex
	floor uint64 // highest transaction id of anything dropped
	ll    *list.List
	m     map[string]*list.Element // value: *cachedRecord
}

type cachedRecord struct {
	key     string
	rec     Record
	txid    uint64
	deleted bool // a tombstone
	pending bool // written by transaction txid, not committed yet
}

func newRecordCache() *recordCache {
	return &recordCache{ll: list.New(), m: make(map[string]*list.Element)}
}

// get returns a copy of the committed record under k, if the cache has it.
func (c *recordCache) get(k []byte) (Record, bool) {
	return c.lookup(k, false)
}

// latest returns a copy of the newest record under k, committed or not: a
// writer's base, inside the write transaction that follows.
func (c *recordCache) latest(k []byte) (Record, bool) {
	return c.lookup(k, true)
}

func (c *recordCache) lookup(k []byte, pending bool) (Record, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[string(k)]; ok {
		c.ll.MoveToFront(e)
		if cr := e.Value.(*cachedRecord); !cr.deleted && (pending || !cr.pending) {
			return cr.rec.clone(), true
		}
	}
	return Record{}, false
}

// add stores a copy of rec, as a read transaction with id txid decoded it,
// when that cannot hide a newer write (see recordCache).
func (c *recordCache) add(k []byte, rec Record, txid uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[string(k)]; ok || txid < c.floor {
		return
	}
	c.setLocked(string(k), &cachedRecord{rec: rec.clone(), txid: txid})
}

// put stores a copy of rec, written by the write transaction txid, pending
// until commit.
func (c *recordCache) put(k []byte, rec Record, txid uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(string(k), &cachedRecord{rec: rec.clone(), txid: txid, pending: true})
}

// remove leaves a tombstone for k, deleted by the write transaction txid,
// pending until commit.
func (c *recordCache) remove(k []byte, txid uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(string(k), &cachedRecord{txid: txid, deleted: true, pending: true})
}

// commit makes what the transaction txid put under keys visible to
// readers; an entry a later transaction replaced stays as it is.
func (c *recordCache) commit(keys []string, txid uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if e, ok := c.m[k]; ok {
			if cr := e.Value.(*cachedRecord); cr.txid == txid {
				cr.pending = false
			}
		}
	}
}

func (c *recordCache) setLocked(k string, cr *cachedRecord) {
	cr.key = k
	if e, ok := c.m[k]; ok {
		e.Value = cr
		c.ll.MoveToFront(e)
		return
	}
	c.m[k] = c.ll.PushFront(cr)
	for c.ll.Len() > recordCacheSize {
		old := c.ll.Back()
		c.ll.Remove(old)
		dropped := old.Value.(*cachedRecord)
		delete(c.m, dropped.key)
		c.floor = max(c.floor, dropped.txid)
	}
}

// clear forgets everything: the write transaction txid failed after its
// writers put records it did not commit.
func (c *recordCache) clear(txid uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.ll.Front(); e != nil; e = e.Next() {
		c.floor = max(c.floor, e.Value.(*cachedRecord).txid)
	}
	c.floor = max(c.floor, txid)
	c.ll.Init()
	clear(c.m)
}

// clone returns r with slices of its own, so that neither the cache nor a
// caller can change the other's copy. Turns are shared, not copied: no one
// writes a Turns array once it is in a Record (AddTurn and normalize make
// a new one), and copying the history of MaxTurns on every Get was most of
// the bytes the chat path allocated, for a list it never reads.
func (r Record) clone() Record {
	r.Branches = slices.Clone(r.Branches)
	r.RecentSummaries = slices.Clone(r.RecentSummaries)
	return r
}
