// Package bpe counts tiktoken tokens of ordinary text (o200k_base,
// cl100k_base) from the tables embedded by tiktoken-go-loader: never a
// network fetch.
//
// It splits text with tiktoken's published pre-token patterns and counts
// each piece by byte-pair merging over the ranks tiktoken-go-loader embeds.
// tiktoken-go itself would give the same counts (TestCountsMatchTiktoken
// holds this package to it), but it also downloads encodings over HTTP,
// which would put net/http under ctxpress's pure core: rewrite counts
// tokens, and its go list -deps must name no network package.
package bpe

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dlclark/regexp2"
	loader "github.com/pkoukk/tiktoken-go-loader"
)

// Encoding names.
const (
	O200K  = "o200k_base"
	CL100K = "cl100k_base"
)

// ErrUnknownEncoding means New was asked for an encoding it does not have.
var ErrUnknownEncoding = errors.New("bpe: unknown encoding")

// encodings are the tables and pre-token patterns, as tiktoken-go spells them.
var encodings = map[string]struct{ file, pattern string }{
	O200K: {
		"https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
		strings.Join([]string{
			`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
			`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
			`\p{N}{1,3}`,
			` ?[^\s\p{L}\p{N}]+[\r\n/]*`,
			`\s*[\r\n]+`,
			`\s+(?!\S)`,
			`\s+`,
		}, "|"),
	},
	CL100K: {
		"https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
		`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	},
}

// Encoder counts the tokens of one encoding. It is immutable once built
// and safe for concurrent use.
type Encoder struct {
	ranks map[string]int
	re    *regexp2.Regexp
}

// New builds the encoder of name (O200K or CL100K) from the embedded
// tables; it takes a fraction of a second and tens of MB of heap, so
// callers build each once.
func New(name string) (*Encoder, error) {
	enc, ok := encodings[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownEncoding, name)
	}
	ranks, err := loader.NewOfflineLoader().LoadTiktokenBpe(enc.file)
	if err != nil {
		return nil, fmt.Errorf("bpe: loading %s: %w", name, err)
	}
	re, err := regexp2.Compile(enc.pattern, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("bpe: compiling %s's pattern: %w", name, err)
	}
	return &Encoder{ranks: ranks, re: re}, nil
}

// Count returns how many tokens text encodes to, special-token text such
// as "<|endoftext|>" counted as ordinary text (tiktoken's EncodeOrdinary).
func (e *Encoder) Count(text string) int {
	n := 0
	runes := []rune(text)
	m, _ := e.re.FindStringMatch(text)
	for m != nil {
		// regexp2 indexes runes, not bytes.
		start, end := max(m.Index, 0), min(m.Index+m.Length, len(runes))
		piece := string(runes[start:end])
		if _, ok := e.ranks[piece]; ok {
			n++
		} else {
			n += pairMergeCount([]byte(piece), e.ranks)
		}
		m, _ = e.re.FindNextMatch(m)
	}
	return n
}

// noRank marks a pair of parts whose joined bytes are no token.
const noRank = math.MaxInt

// pairMergeCount counts the tokens byte-pair encoding makes of piece: it
// starts from single bytes and merges, again and again, the adjacent pair
// of parts whose joined bytes have the lowest rank (the leftmost on a tie),
// until no pair joins into a token.
func pairMergeCount(piece []byte, ranks map[string]int) int {
	if len(piece) < 2 {
		return len(piece)
	}
	// Part k is piece[bounds[k]:bounds[k+1]]; pair[k] is the rank of parts
	// k and k+1 joined.
	bounds := make([]int, len(piece)+1)
	for i := range bounds {
		bounds[i] = i
	}
	joined := func(k int) int {
		if k+2 >= len(bounds) {
			return noRank
		}
		if r, ok := ranks[string(piece[bounds[k]:bounds[k+2]])]; ok {
			return r
		}
		return noRank
	}
	pair := make([]int, len(piece)-1)
	for k := range pair {
		pair[k] = joined(k)
	}
	for len(pair) > 0 {
		best := 0
		for k := 1; k < len(pair); k++ {
			if pair[k] < pair[best] {
				best = k
			}
		}
		if pair[best] == noRank {
			break
		}
		bounds = slices.Delete(bounds, best+1, best+2)
		pair = slices.Delete(pair, best, best+1)
		if best < len(pair) {
			pair[best] = joined(best)
		}
		if best > 0 {
			pair[best-1] = joined(best - 1)
		}
	}
	return len(bounds) - 1
}
