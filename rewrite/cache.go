package rewrite

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
	"unsafe"
)

// DefaultCacheBytes is the memory bound of a Pipeline's caches when
// Config.CacheBytes is 0.
const DefaultCacheBytes int64 = 64 << 20

// entryOverhead approximates the bytes an entry costs beyond its value:
// the entry with its 16-byte key and links (64), its map slot at a typical
// load (~32) and a boxed value (~32).
const entryOverhead = 128

// Cache key kinds, the first byte hashed into every key, so that a token
// count, a squash result, a message memo and a canonical digest can never
// share a key.
const (
	kindTokens     byte = 't'
	kindSquash     byte = 's'
	kindMessage    byte = 'm'
	kindCanonical  byte = 'c'
	kindPrune      byte = 'p'
	kindDedup      byte = 'd' // a superseded result's stub, with its way back
	kindOpening    byte = 'f' // a conversation's fingerprint
	kindChain      byte = 'h' // a history's chain hashes
	kindPrefix     byte = 'b' // a block of a body's prefix (parseMemo)
	kindBody       byte = 'w' // a whole body (parseMemo)
	kindKeepsWhole byte = 'k' // whether squash keeps a call's output whole (prune)
)

// contentHash identifies a message's bytes within this process: two
// independently seeded 64-bit maphashes (AES-based, several times faster
// than sha256 on the megabytes of history each turn re-sends). It is only
// ever a memo key, never stored: the seeds change with every start. 128
// bits make an accidental collision, which would hand one message's facts
// to another, as unlikely as a sha256 one for any cache that fits memory,
// and the random seeds keep a client from crafting one.
type contentHash [16]byte

var contentSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func hashContent(b []byte) contentHash {
	var h contentHash
	binary.LittleEndian.PutUint64(h[:8], maphash.Bytes(contentSeeds[0], b))
	binary.LittleEndian.PutUint64(h[8:], maphash.Bytes(contentSeeds[1], b))
	return h
}

// cacheKey is a 128-bit hash over a kind byte and some NUL-separated
// parts: two independently seeded maphashes, as contentHash and for its
// reasons (a memo key within this process, never stored; the random
// seeds keep a client from crafting a collision). A sha256 cost a short
// key (a message's facts, a count) two block compressions and its
// padding, several times the maphashes; every warm turn makes one per
// message.
type cacheKey [16]byte

var keySeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// newKey hashes kind and parts into a cache key. A NUL separates the parts,
// so ("ab","c") and ("a","bc") give different keys. A short key (a
// message's facts, a digest: up to 256 bytes in all) is written out on
// the stack and hashed whole; a longer one (a text's count or squash) is
// the hash of the kind and of each part's own hash, so a long text is
// hashed in one call per seed (a maphash.Hash would take it 128 bytes a
// call). No key allocates.
func newKey(kind byte, parts ...string) cacheKey {
	size := len(parts)
	for _, p := range parts {
		size += len(p)
	}
	var buf [256]byte
	var k cacheKey
	for j, seed := range keySeeds {
		b := append(buf[:0], kind)
		if size <= len(buf) {
			for i, p := range parts {
				if i > 0 {
					b = append(b, 0)
				}
				b = append(b, p...)
			}
		} else {
			for _, p := range parts {
				b = binary.LittleEndian.AppendUint64(b, maphash.String(seed, p))
			}
		}
		binary.LittleEndian.PutUint64(k[8*j:], maphash.Bytes(seed, b))
	}
	return k
}

// bytesKey is newKey(kind, part, string(b)), without the copy: newKey
// only reads its parts, and keeps nothing of them.
func bytesKey(kind byte, part string, b []byte) cacheKey {
	return newKey(kind, part, unsafe.String(unsafe.SliceData(b), len(b)))
}

// lru is a least-recently-used cache bounded by the approximate bytes of its
// entries. It is safe for concurrent use. Values must not be mutated once
// added.
type lru struct {
	max int64 // byte bound; immutable

	mu    sync.Mutex // guards everything below
	used  int64
	items map[cacheKey]*lruEntry
	head  *lruEntry // most recently used
	tail  *lruEntry // least recently used
}

type lruEntry struct {
	key        cacheKey
	val        any
	size       int64
	prev, next *lruEntry
}

// newLRU returns an empty cache that holds at most max bytes; max <= 0 gives
// a cache that holds nothing.
func newLRU(max int64) *lru {
	return &lru{max: max, items: make(map[cacheKey]*lruEntry)}
}

// get returns the value stored under k, marking it recently used.
func (c *lru) get(k cacheKey) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		return nil, false
	}
	c.moveToFront(e)
	return e.val, true
}

// add stores v under k; size is the approximate bytes v holds. Values larger
// than an eighth of the bound are not stored, so one huge entry cannot evict
// a whole conversation.
func (c *lru) add(k cacheKey, v any, size int64) {
	size += entryOverhead
	if size > c.max/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.used += size - e.size
		e.val, e.size = v, size
		c.moveToFront(e)
	} else {
		e := &lruEntry{key: k, val: v, size: size}
		c.items[k] = e
		c.used += size
		c.pushFront(e)
	}
	for c.used > c.max && c.tail != nil {
		old := c.tail
		c.unlink(old)
		delete(c.items, old.key)
		c.used -= old.size
	}
}

// stats reports the number of entries and the bytes they account for.
func (c *lru) stats() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items), c.used
}

func (c *lru) moveToFront(e *lruEntry) {
	if c.head == e {
		return
	}
	c.unlink(e)
	c.pushFront(e)
}

func (c *lru) pushFront(e *lruEntry) {
	e.prev, e.next = nil, c.head
	if c.head != nil {
		c.head.prev = e
	}
	c.head = e
	if c.tail == nil {
		c.tail = e
	}
}

func (c *lru) unlink(e *lruEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		c.tail = e.prev
	}
	e.prev, e.next = nil, nil
}
