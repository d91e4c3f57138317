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
// the cache follows the write order. What a writer puts is pending until
// its transaction commits: readers do not see it, they see the entry's
// committed record (what the file still holds), and writers build on it.
// The recorder's write transactions follow each other, so a busy key is
// pending most of the time: readers must still be answered from memory
// then (reading the file meant decoding the record on every request).
// A reader that missed adds what its read transaction (id r) decoded only
// when the key has no entry at all and nothing newer than r was ever
// dropped from the cache (floor): any write to the key after r left an
// entry or a tombstone, or raised the floor when it was dropped. So a read
// that raced a write cannot leave older data behind.
type recordCache struct {
	mu    sync.Mutex
	floor uint64 // highest transaction id of anything dropped
	ll    *list.List
	m     map[string]*list.Element // value: *cachedRecord
}

// cachedRecord is a key's committed state, when known, and the write of a
// transaction not committed yet, if any.
type cachedRecord struct {
	key       string
	committed cacheState
	known     bool        // committed is what the file holds
	pending   *cacheState // written by pending.txid, not committed yet
}

type cacheState struct {
	rec     Record
	turns   *turnLayout // where rec.Turns are stored; nil: not known
	txid    uint64
	deleted bool // a tombstone
}

// newest is the highest transaction id the entry holds.
func (cr *cachedRecord) newest() uint64 {
	if cr.pending != nil {
		return max(cr.committed.txid, cr.pending.txid)
	}
	return cr.committed.txid
}

func newRecordCache() *recordCache {
	return &recordCache{ll: list.New(), m: make(map[string]*list.Element)}
}

// get returns a copy of the committed record under k, if the cache has it.
func (c *recordCache) get(k []byte) (Record, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[string(k)]; ok {
		c.ll.MoveToFront(e)
		if cr := e.Value.(*cachedRecord); cr.known && !cr.committed.deleted {
			return cr.committed.rec.clone(), true
		}
	}
	return Record{}, false
}

// latest returns a copy of the newest record under k, committed or not,
// and the layout of its stored turns (nil: not known): a writer's base, inside the
// write transaction that follows.
func (c *recordCache) latest(k []byte) (Record, *turnLayout, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[string(k)]
	if !ok {
		return Record{}, nil, false
	}
	c.ll.MoveToFront(e)
	cr := e.Value.(*cachedRecord)
	st := &cr.committed
	if cr.pending != nil {
		st = cr.pending
	} else if !cr.known {
		return Record{}, nil, false
	}
	if st.deleted {
		return Record{}, nil, false
	}
	return st.rec.clone(), st.turns, true
}

// add tells the cache what a read transaction with id txid decoded under
// k. With no entry for k, it stores a copy when that cannot hide a newer
// write (see recordCache). With one, the read is news only of writes
// txid includes: a pending write that committed (its transaction id is
// txid or older) becomes the committed record, so no reader is answered
// from memory with a record older than one a reader got from the file
// while that write's commit was not yet settled; and an entry whose
// committed record is older than txid, or unknown (lost to a later
// write) and not older than the record lost, takes the one read.
func (c *recordCache) add(k []byte, rec Record, turns *turnLayout, txid uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[string(k)]
	if !ok {
		if txid >= c.floor {
			c.insertLocked(string(k), &cachedRecord{committed: cacheState{rec: rec.clone(), turns: turns, txid: txid}, known: true})
		}
		return
	}
	cr := e.Value.(*cachedRecord)
	switch {
	case cr.pending != nil && cr.pending.txid <= txid:
		cr.committed, cr.known, cr.pending = *cr.pending, true, nil
	case cr.committed.txid < txid || !cr.known && cr.committed.txid <= txid:
		cr.committed, cr.known = cacheState{rec: rec.clone(), turns: turns, txid: txid}, true
	}
}

// put stores a copy of rec and the layout of its turns, written by the
// write transaction txid, pending until commit.
func (c *recordCache) put(k []byte, rec Record, turns *turnLayout, txid uint64) {
	c.setPending(string(k), cacheState{rec: rec.clone(), turns: turns, txid: txid})
}

// remove leaves a tombstone for k, deleted by the write transaction txid,
// pending until commit.
func (c *recordCache) remove(k []byte, txid uint64) {
	c.setPending(string(k), cacheState{txid: txid, deleted: true})
}

func (c *recordCache) setPending(k string, st cacheState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok {
		e.Value.(*cachedRecord).pending = &st
		c.ll.MoveToFront(e)
		return
	}
	c.insertLocked(k, &cachedRecord{pending: &st})
}

// commit makes what the transaction txid put under keys visible to
// readers. An entry a later transaction already replaced has lost the
// record txid committed: readers go to the file for it until that later
// transaction commits.
func (c *recordCache) commit(keys []string, txid uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		e, ok := c.m[k]
		if !ok {
			continue
		}
		cr := e.Value.(*cachedRecord)
		switch {
		case cr.pending == nil:
		case cr.pending.txid == txid:
			cr.committed, cr.known, cr.pending = *cr.pending, true, nil
		case cr.pending.txid > txid && cr.committed.txid < txid:
			// Lost, but readers may have read it from the file: a
			// read older than txid must not come back as committed.
			// Transactions settle in any order: one that settles after
			// a later one never takes the entry back to its own txid,
			// which would let a read older than the later one in.
			cr.committed, cr.known = cacheState{txid: txid}, false
		}
	}
}

func (c *recordCache) insertLocked(k string, cr *cachedRecord) {
	cr.key = k
	c.m[k] = c.ll.PushFront(cr)
	for c.ll.Len() > recordCacheSize {
		old := c.ll.Back()
		c.ll.Remove(old)
		dropped := old.Value.(*cachedRecord)
		delete(c.m, dropped.key)
		c.floor = max(c.floor, dropped.newest())
	}
}

// clear forgets everything: the write transaction txid failed after its
// writers put records it did not commit.
func (c *recordCache) clear(txid uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.ll.Front(); e != nil; e = e.Next() {
		c.floor = max(c.floor, e.Value.(*cachedRecord).newest())
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
