package rewrite

import (
	"encoding/binary"
	"hash/maphash"
	"strings"
	"testing"
)

func TestLRUBoundAndEviction(t *testing.T) {
	c := newLRU(8 * 1024)
	for i := 0; i < 1000; i++ {
		c.add(newKey(kindTokens, itoa(i)), i, 100)
	}
	n, used := c.stats()
	if used > 8*1024 || n == 0 {
		t.Fatalf("%d entries, %d bytes", n, used)
	}
	// The most recent entries survive, the oldest are gone.
	if v, ok := c.get(newKey(kindTokens, "999")); !ok || v.(int) != 999 {
		t.Error("newest entry evicted")
	}
	if _, ok := c.get(newKey(kindTokens, "0")); ok {
		t.Error("oldest entry kept")
	}
	// A read keeps an entry alive.
	c = newLRU(8 * (100 + entryOverhead)) // room for exactly 8
	var keys []cacheKey
	for _, s := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		keys = append(keys, newKey(kindTokens, s))
	}
	for _, k := range keys {
		c.add(k, 1, 100)
	}
	c.get(keys[0])
	c.add(newKey(kindTokens, "i"), 1, 100)
	if _, ok := c.get(keys[0]); !ok {
		t.Error("recently read entry evicted")
	}
	if _, ok := c.get(keys[1]); ok {
		t.Error("least recently used entry kept")
	}
	// Too big for the cache: not stored. Disabled cache: nothing stored.
	c.add(newKey(kindTokens, "huge"), 1, 1<<20)
	if _, ok := c.get(newKey(kindTokens, "huge")); ok {
		t.Error("oversized entry stored")
	}
	off := newLRU(-1)
	off.add(keys[0], 1, 1)
	if n, _ := off.stats(); n != 0 {
		t.Error("disabled cache stores")
	}
}

func TestBytesKeyIsNewKeyOfTheString(t *testing.T) {
	for _, b := range []string{"", "x", `[{"type":"function","function":{"name":"bash"}}]`, strings.Repeat("t", 244), strings.Repeat("t", 245), strings.Repeat("tools ", 1000)} {
		if bytesKey(kindTokens, "o200k_base", []byte(b)) != newKey(kindTokens, "o200k_base", b) {
			t.Errorf("%d bytes: bytesKey differs from newKey", len(b))
		}
	}
}

func TestNewKeySeparatesParts(t *testing.T) {
	if newKey(kindSquash, "ab", "c") == newKey(kindSquash, "a", "bc") {
		t.Error("parts not separated")
	}
	long := strings.Repeat("x", 300)
	if newKey(kindSquash, "ab"+long, "c") == newKey(kindSquash, "a", "b"+long+"c") || newKey(kindSquash, long, "") == newKey(kindSquash, "", long) {
		t.Error("long parts not separated")
	}
	if newKey(kindSquash, "a") == newKey(kindTokens, "a") {
		t.Error("kinds not separated")
	}
}

// newKey's key, whatever the lengths of the parts: per seed, the hash of
// the kind byte and the NUL-separated parts as written out whole when that
// is at most 256 bytes, else of the kind byte and each part's own hash.
func TestNewKeyHashesKindAndParts(t *testing.T) {
	text := func(n int) string { return strings.Repeat("abcdefghij", n/10+1)[:n] }
	for _, parts := range [][]string{
		nil, {""}, {"", ""}, {"a", "bc"}, {"ab", "c"},
		{text(255)}, {text(254), "x"}, {text(255), "x"}, {text(256), ""}, {text(300), text(511), text(1)},
		{text(10000)}, {"chat", "o200k_base", "bash", text(32), text(16)},
	} {
		whole := []byte{kindTokens}
		for i, p := range parts {
			if i > 0 {
				whole = append(whole, 0)
			}
			whole = append(whole, p...)
		}
		var k cacheKey
		for j, seed := range keySeeds {
			b := whole
			if len(whole) > 256 {
				b = []byte{kindTokens}
				for _, p := range parts {
					b = binary.LittleEndian.AppendUint64(b, maphash.String(seed, p))
				}
			}
			binary.LittleEndian.PutUint64(k[8*j:], maphash.Bytes(seed, b))
		}
		if got := newKey(kindTokens, parts...); got != k || string(k[:8]) == string(k[8:]) {
			t.Errorf("parts of %d bytes: key is not the hash of kind and parts", len(whole))
		}
	}
}
