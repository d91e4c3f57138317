package state

import (
	"crypto/sha1"
	"encoding/hex"
	"sync"
)

// maxHintBytes bounds the bytes the hint cache keeps.
const maxHintBytes = 32 << 20

// hintCache remembers the bytes of each record this process last read or
// wrote, so the Update that follows a request's Get can send its write
// without reading the record again. It is only a guess: the write checks
// it (casScript) and a stale hint costs one retry, never a lost update.
type hintCache struct {
	mu    sync.Mutex
	m     map[string]hint // guarded by mu
	bytes int             // guarded by mu: total len of the data in m
}

// hint is a record's bytes as last seen; data is nil when there was none.
type hint struct{ data []byte }

func newHintCache() *hintCache { return &hintCache{m: make(map[string]hint)} }

func (c *hintCache) get(k string) (hint, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.m[k]
	return h, ok
}

// put records data (nil: absent) for k, evicting arbitrary entries to stay
// under maxHintBytes.
func (c *hintCache) put(k string, data []byte) {
	if len(data) > maxHintBytes/4 {
		c.drop(k)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bytes -= len(c.m[k].data)
	for victim, h := range c.m {
		if c.bytes+len(data) <= maxHintBytes {
			break
		}
		c.bytes -= len(h.data)
		delete(c.m, victim)
	}
	c.m[k] = hint{data: data}
	c.bytes += len(data)
}

func (c *hintCache) drop(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bytes -= len(c.m[k].data)
	delete(c.m, k)
}

func (c *hintCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
	c.bytes = 0
}

// digest is the version casScript compares: the hex SHA-1 of the stored
// bytes, "" for no record.
func digest(data []byte) string {
	if data == nil {
		return ""
	}
	sum := sha1.Sum(data)
	return hex.EncodeToString(sum[:])
}
