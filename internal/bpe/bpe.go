// Package bpe counts tiktoken tokens of ordinary text (o200k_base,
// cl100k_base) from the tables embedded by tiktoken-go-loader: never a
// network fetch.
//
// It splits text as tiktoken's published pre-token patterns do (by hand,
// split.go, without a regexp engine) and counts each piece by byte-pair
// merging over the ranks tiktoken-go-loader embeds (merge.go).
// tiktoken-go itself would give the same counts (TestCountsMatchTiktoken
// holds this package to it), but it also downloads encodings over HTTP,
// which would put net/http under ctxpress's pure core: rewrite counts
// tokens, and its go list -deps must name no network package.
package bpe

import (
	"errors"
	"fmt"
	"unicode/utf8"

	loader "github.com/pkoukk/tiktoken-go-loader"
)

// Encoding names.
const (
	O200K  = "o200k_base"
	CL100K = "cl100k_base"
)

// ErrUnknownEncoding means New was asked for an encoding it does not have.
var ErrUnknownEncoding = errors.New("bpe: unknown encoding")

// encodings are the embedded tables (named by the address tiktoken-go
// fetches them from, which tiktoken-go-loader maps to its embedded copy) and
// the pre-tokeniser of each (split.go; pattern in regexp_test.go).
var encodings = map[string]struct {
	file  string
	split func(s string, i int) int
}{
	O200K:  {"https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken", splitO200K},
	CL100K: {"https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken", splitCL100K},
}

// Encoder counts the tokens of one encoding. It is immutable once built
// and safe for concurrent use.
type Encoder struct {
	ranks *table
	// byteRanks[a<<8|b] is the rank of the two bytes a, b (noRank when
	// they are no token): the merge's first pairs, without the map.
	byteRanks *[1 << 16]int32
	split     func(s string, i int) int // the end of the piece that starts at i
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
	return newEncoder(ranks, enc.split)
}

// newEncoder builds an encoder from the ranks of an encoding and its
// pre-tokeniser.
func newEncoder(ranks map[string]int, split func(string, int) int) (*Encoder, error) {
	byteRanks := new([1 << 16]int32)
	for i := range byteRanks {
		byteRanks[i] = noRank
	}
	for tok, r := range ranks {
		if len(tok) == 2 {
			byteRanks[int(tok[0])<<8|int(tok[1])] = int32(r)
		}
	}
	t, err := newTable(ranks)
	if err != nil {
		return nil, err
	}
	return &Encoder{ranks: t, byteRanks: byteRanks, split: split}, nil
}

// Count returns how many tokens text encodes to, special-token text such
// as "<|endoftext|>" counted as ordinary text (tiktoken's EncodeOrdinary).
// It allocates nothing for valid UTF-8.
func (e *Encoder) Count(text string) int {
	text = validUTF8(text)
	n := 0
	for i := 0; i < len(text); {
		j := e.split(text, i)
		n += e.countPiece(text[i:j])
		i = j
	}
	return n
}

// encode returns text's token ids, as tiktoken's EncodeOrdinary does (the
// tests hold them to tiktoken-go's).
func (e *Encoder) encode(text string) []int {
	text = validUTF8(text)
	var ids []int
	for i := 0; i < len(text); {
		j := e.split(text, i)
		ids = e.appendPiece(ids, text[i:j])
		i = j
	}
	return ids
}

// validUTF8 returns text with each byte that is not part of valid UTF-8
// replaced by U+FFFD, as tiktoken-go's []rune conversion does (it then
// matches and merges the replacement's three bytes).
func validUTF8(text string) string {
	if utf8.ValidString(text) {
		return text
	}
	return string([]rune(text))
}
