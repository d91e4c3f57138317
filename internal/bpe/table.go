package bpe

import (
	"fmt"
	"math/bits"
	"strings"
)

// table maps a token's bytes to its rank: an open-addressing hash table of
// one word per slot over one string holding every token. A Go
// map[string]int of o200k_base's 200k tokens is ~22 MB and three cache
// misses a lookup (control word, key header, key bytes); this is ~5.5 MB
// and two (slot, bytes), and lookups are most of counting.
type table struct {
	// slots holds, per token: its offset in arena (bits 0-23), its length
	// (24-31), its rank (32-55) and the top byte of its hash (56-63), to
	// skip most mismatches without reading arena. 0 is an empty slot (no
	// token is empty).
	slots []uint64
	mask  uint64
	arena string
}

// Field limits of a slot; o200k_base's largest rank is 199997, its longest
// token 128 bytes, its tokens 1.4 MB in all.
const (
	maxArena = 1 << 24
	maxLen   = 1<<8 - 1
	maxRank  = 1<<24 - 1
)

// newTable builds the table of ranks.
func newTable(ranks map[string]int) (*table, error) {
	byRank := make([]string, 0, len(ranks))
	size := 0
	for tok, r := range ranks {
		if r < 0 || r > maxRank || len(tok) == 0 || len(tok) > maxLen {
			return nil, fmt.Errorf("bpe: token %q of rank %d does not fit the table", tok, r)
		}
		for len(byRank) <= r {
			byRank = append(byRank, "")
		}
		byRank[r] = tok
		size += len(tok)
	}
	if size > maxArena {
		return nil, fmt.Errorf("bpe: %d bytes of tokens do not fit the table", size)
	}
	n := uint64(1)
	for n < 2*uint64(len(ranks)) { // at most half full: short probes
		n <<= 1
	}
	t := &table{slots: make([]uint64, n), mask: n - 1}
	var arena strings.Builder
	arena.Grow(size)
	for r, tok := range byRank { // in rank order, so the table is the same every build
		if tok == "" {
			continue
		}
		h := hash(tok)
		i := h & t.mask
		for t.slots[i] != 0 {
			i = (i + 1) & t.mask
		}
		t.slots[i] = uint64(arena.Len()) | uint64(len(tok))<<24 | uint64(r)<<32 | h>>56<<56
		arena.WriteString(tok)
	}
	t.arena = arena.String()
	return t, nil
}

// rank returns the rank of token p, and whether p is a token.
func (t *table) rank(p string) (int, bool) {
	h := hash(p)
	want := h>>56<<56 | uint64(len(p))<<24
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if s&(0xff<<56|0xff<<24) == want {
			if off := s & (1<<24 - 1); t.arena[off:off+uint64(len(p))] == p {
				return int(s >> 32 & maxRank), true
			}
		}
	}
}

// hash mixes p eight bytes at a time with a 128-bit multiply (wyhash's
// step): cheap for the few bytes of a token, and every bit of it is used.
func hash(p string) uint64 {
	const k0, k1 = 0xa0761d6478bd642f, 0xe7037ed1a0b428db
	h := uint64(len(p)) ^ k0
	for len(p) >= 8 {
		w := uint64(p[0]) | uint64(p[1])<<8 | uint64(p[2])<<16 | uint64(p[3])<<24 |
			uint64(p[4])<<32 | uint64(p[5])<<40 | uint64(p[6])<<48 | uint64(p[7])<<56
		hi, lo := bits.Mul64(h^w, k1)
		h = hi ^ lo
		p = p[8:]
	}
	if len(p) > 0 {
		var w uint64
		for i := 0; i < len(p); i++ {
			w |= uint64(p[i]) << (8 * i)
		}
		hi, lo := bits.Mul64(h^w, k1)
		h = hi ^ lo
	}
	hi, lo := bits.Mul64(h, k0^k1)
	return hi ^ lo
}
