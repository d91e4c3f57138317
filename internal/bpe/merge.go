package bpe

import (
	"math"
	"slices"
	"sync"
)

// noRank marks a pair of parts whose joined bytes are no token.
const noRank = math.MaxInt32

// stackPiece is the longest piece merged in arrays on the stack; most
// pieces are a few bytes, and longer ones (a run of punctuation, a long
// identifier) borrow a scratch from scratchPool, so no merge allocates.
const stackPiece = 64

// scratch is the merge's working memory for a piece longer than stackPiece.
type scratch struct{ starts, ranks []int32 }

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// countPiece counts the tokens of one pre-token piece: one when the piece
// is itself a token (most are), else what byte-pair merging makes of it.
func (e *Encoder) countPiece(p string) int {
	if len(p) == 1 {
		return 1 // every byte is a token
	}
	if len(p) == 2 {
		if e.byteRanks[int(p[0])<<8|int(p[1])] != noRank {
			return 1
		}
		return 2
	}
	if _, ok := e.ranks.rank(p); ok {
		return 1
	}
	return e.merge(p, nil)
}

// appendPiece appends the token ids of one piece to ids.
func (e *Encoder) appendPiece(ids []int, p string) []int {
	if r, ok := e.ranks.rank(p); ok {
		return append(ids, r)
	}
	e.merge(p, &ids)
	return ids
}

// merge byte-pair merges piece p and returns how many tokens it makes,
// appending their ids to *ids when ids is not nil.
func (e *Encoder) merge(p string, ids *[]int) int {
	if len(p) <= stackPiece {
		var starts [stackPiece + 1]int32
		var ranks [stackPiece]int32
		return e.mergeIn(p, starts[:len(p)+1], ranks[:len(p)], ids)
	}
	sc := scratchPool.Get().(*scratch)
	sc.starts = slices.Grow(sc.starts[:0], len(p)+1)[:len(p)+1]
	sc.ranks = slices.Grow(sc.ranks[:0], len(p))[:len(p)]
	n := e.mergeIn(p, sc.starts, sc.ranks, ids)
	scratchPool.Put(sc)
	return n
}

// mergeIn is tiktoken's byte-pair merge: it starts from single bytes and
// merges, again and again, the adjacent pair of parts whose joined bytes
// have the lowest rank (the leftmost on a tie), until no pair joins into a
// token. Part k is p[starts[k]:starts[k+1]]; ranks[k] is the rank of parts
// k and k+1 joined. len(starts) is len(p)+1, len(ranks) len(p).
func (e *Encoder) mergeIn(p string, starts, ranks []int32, ids *[]int) int {
	m := len(p) // parts
	for k := range starts {
		starts[k] = int32(k)
	}
	pair := func(k int) int32 {
		if k+1 >= m {
			return noRank
		}
		if r, ok := e.ranks.rank(p[starts[k]:starts[k+2]]); ok {
			return int32(r)
		}
		return noRank
	}
	// The first pairs are two bytes: their ranks come from a table, not
	// the map.
	for k := 0; k < m-1; k++ {
		ranks[k] = e.byteRanks[int(p[k])<<8|int(p[k+1])]
	}
	ranks[m-1] = noRank
	for m > 1 {
		best, lowest := -1, int32(noRank)
		for k, r := range ranks[:m-1] {
			if r < lowest {
				best, lowest = k, r
			}
		}
		if best < 0 {
			break
		}
		// Parts best and best+1 become one: drop the boundary between
		// them and the rank of the pair that started at best+1.
		copy(starts[best+1:m], starts[best+2:m+1])
		copy(ranks[best+1:m-1], ranks[best+2:m])
		m--
		ranks[best] = pair(best)
		if best > 0 {
			ranks[best-1] = pair(best - 1)
		}
	}
	if ids != nil {
		for k := 0; k < m; k++ {
			r, _ := e.ranks.rank(p[starts[k]:starts[k+1]])
			*ids = append(*ids, r)
		}
	}
	return m
}
