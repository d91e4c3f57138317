// Package bpe counts tiktoken tokens of ordinary text (o200k_base,
// cl100k_base) from the tables embedded by tiktoken-go-loader: never a
// network fetch.
//
// The counting is a copy of the part of github.com/pkoukk/tiktoken-go
// (MIT License, Copyright (c) 2023 ImmortalFog) that encodes ordinary text
// (CoreBPE.encodeOrdinaryNative, bytePairMerge), reduced to counting. The
// library itself also downloads encodings over HTTP, which would put
// net/http under ctxpress's pure core (rewrite counts tokens); this copy
// gives the same counts (TestCountsMatchTiktoken) without it.
package bpe

import (
	"errors"
	"fmt"
	"math"
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

// pairMergeCount is the number of tokens byte-pair merging makes of piece
// (tiktoken-go's bytePairMerge, counting the parts instead of mapping
// them).
func pairMergeCount(piece []byte, ranks map[string]int) int {
	if len(piece) == 1 {
		return 1
	}
	parts := make([][2]int, len(piece)+1)
	for i := range parts {
		parts[i][0], parts[i][1] = i, math.MaxInt // max int: no rank
	}
	rankOf := func(startIdx, skip int) int {
		if startIdx+skip+2 < len(parts) {
			if rank, ok := ranks[string(piece[parts[startIdx][0]:parts[startIdx+skip+2][0]])]; ok {
				return rank
			}
		}
		return -1 // none
	}
	for i := 0; i < len(parts)-2; i++ {
		if rank := rankOf(i, 0); rank >= 0 {
			parts[i][1] = rank
		}
	}
	for len(parts) > 1 {
		minRank, minIdx := math.MaxInt, -1
		for i := 0; i < len(parts)-1; i++ {
			if parts[i][1] < minRank {
				minRank, minIdx = parts[i][1], i
			}
		}
		if minRank == math.MaxInt {
			break
		}
		i := minIdx
		if rank := rankOf(i, 1); rank >= 0 {
			parts[i][1] = rank
		} else {
			parts[i][1] = math.MaxInt
		}
		if i > 0 {
			if rk := rankOf(i-1, 1); rk >= 0 {
				parts[i-1][1] = rk
			} else {
				parts[i-1][1] = math.MaxInt
			}
		}
		parts = append(parts[:i+1], parts[i+2:]...)
	}
	return len(parts) - 1
}
