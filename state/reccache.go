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
// evicted. Writers put the record they write from inside their bbolt write
// transaction, which bbolt serialises, so the cache follows the commit order;
// a failed transaction clears the cache. A reader adds what it decoded only
// when no write happened since it looked (gen), so a read that raced a write
// cannot leave the older record behind.
type recordCache struct {
	mu  sync.Mutex
	gen uint64 // bumped by every change
	ll  *list.List
	m   map[string]*list.Element // value: *cachedRecord
}

type cachedRecord struct {
	key string
	rec Record
}

func newRecordCache() *recordCache {
	return &recordCache{ll: list.New(), m: make(map[string]*list.Element)}
}

// get returns a copy of the record under k and the generation to pass to
// add when there is none.
func (c *recordCache) get(k []byte) (Record, bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[string(k)]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*cachedRecord).rec.clone(), true, c.gen
	}
	return Record{}, false, c.gen
}

// add stores a copy of rec under k if nothing changed since get returned gen.
func (c *recordCache) add(k []byte, rec Record, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen == c.gen {
		c.putLocked(string(k), rec.clone())
	}
}

// put stores a copy of rec under k: a writer's new version.
func (c *recordCache) put(k []byte, rec Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.putLocked(string(k), rec.clone())
}

func (c *recordCache) putLocked(k string, rec Record) {
	if e, ok := c.m[k]; ok {
		e.Value.(*cachedRecord).rec = rec
		c.ll.MoveToFront(e)
		return
	}
	c.m[k] = c.ll.PushFront(&cachedRecord{key: k, rec: rec})
	for c.ll.Len() > recordCacheSize {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.m, old.Value.(*cachedRecord).key)
	}
}

// remove forgets k.
func (c *recordCache) remove(k []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if e, ok := c.m[string(k)]; ok {
		c.ll.Remove(e)
		delete(c.m, string(k))
	}
}

// clear forgets everything: a write transaction failed after its writers
// put records it did not commit.
func (c *recordCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.ll.Init()
	clear(c.m)
}

// clone returns r with slices of its own, so that neither the cache nor a
// caller can change the other's copy.
func (r Record) clone() Record {
	r.Branches = slices.Clone(r.Branches)
	r.RecentSummaries = slices.Clone(r.RecentSummaries)
	r.Turns = slices.Clone(r.Turns)
	return r
}
