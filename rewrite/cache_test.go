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
	for _, b := range []string{"", "x", `[{"type":"function","function":{"name":"bash"}}]`, strings.Repeat("tools ", 1000)} {
		if bytesKey(kindTokens, "o200k_base", []byte(b)) != newKey(kindTokens, "o200k_base", b) {
			t.Errorf("%d bytes: bytesKey differs from newKey", len(b))
		}
	}
}

func TestNewKeySeparatesParts(t *testing.T) {
	if newKey(kindSquash, "ab", "c") == newKey(kindSquash, "a", "bc") {
		t.Error("parts not separated")
	}
	if newKey(kindSquash, "a") == newKey(kindTokens, "a") {
		t.Error("kinds not separated")
	}
}

// Whatever the lengths of the parts, newKey's key is the hash of the kind
// byte and the NUL-separated parts as written out whole, and the two
// halves are hashes of their own.
func TestNewKeyHashesKindAndParts(t *testing.T) {
	text := func(n int) string { return strings.Repeat("abcdefghij", n/10+1)[:n] }
	for _, parts := range [][]string{
		nil, {""}, {"", ""}, {"a", "bc"}, {"ab", "c"},
		{text(255)}, {text(254), "x"}, {text(255), "x"}, {text(256), ""}, {text(300), text(511), text(1)},
		{text(10000)}, {"chat", "o200k_base", "bash", text(32), text(16)},
	} {
		want := []byte{kindTokens}
		for i, p := range parts {
			if i > 0 {
				want = append(want, 0)
			}
			want = append(want, p...)
		}
		var k cacheKey
		binary.LittleEndian.PutUint64(k[:8], maphash.Bytes(keySeeds[0], want))
		binary.LittleEndian.PutUint64(k[8:], maphash.Bytes(keySeeds[1], want))
		if got := newKey(kindTokens, parts...); got != k || string(k[:8]) == string(k[8:]) {
			t.Errorf("parts of %d bytes: key is not the hash of kind and parts", len(want))
		}
	}
}
