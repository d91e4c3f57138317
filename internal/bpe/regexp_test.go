package bpe

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/dlclark/regexp2"
	loader "github.com/pkoukk/tiktoken-go-loader"
)

// patterns are tiktoken's published pre-token patterns, as tiktoken-go
// spells them: the reference split.go is held to.
var patterns = map[string]string{
	O200K: strings.Join([]string{
		`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
		`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
		`\p{N}{1,3}`,
		` ?[^\s\p{L}\p{N}]+[\r\n/]*`,
		`\s*[\r\n]+`,
		`\s+(?!\S)`,
		`\s+`,
	}, "|"),
	CL100K: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
}

// regexpEncoder is this package as it was before split.go: the pattern
// through regexp2, on runes, as tiktoken-go does it. It is the reference for
// the pieces and the baseline of the benchmarks.
type regexpEncoder struct {
	ranks map[string]int
	re    *regexp2.Regexp
}

// newEncoders returns the encoding name twice: as this package builds it,
// and as it was (regexpEncoder), from one load of its ranks.
func newEncoders(tb testing.TB, name string) (*Encoder, *regexpEncoder) {
	tb.Helper()
	ranks, err := loader.NewOfflineLoader().LoadTiktokenBpe(encodings[name].file)
	if err != nil {
		tb.Fatal(err)
	}
	fast, err := newEncoder(ranks, encodings[name].split)
	if err != nil {
		tb.Fatal(err)
	}
	return fast, &regexpEncoder{ranks: ranks, re: regexp2.MustCompile(patterns[name], regexp2.None)}
}

// pieces returns the pre-token pieces of text.
func (e *regexpEncoder) pieces(text string) []string {
	var ps []string
	runes := []rune(text)
	m, _ := e.re.FindStringMatch(text)
	for m != nil {
		// regexp2 indexes runes, not bytes.
		start, end := max(m.Index, 0), min(m.Index+m.Length, len(runes))
		ps = append(ps, string(runes[start:end]))
		m, _ = e.re.FindNextMatch(m)
	}
	return ps
}

// Count is the old Count, unchanged.
func (e *regexpEncoder) Count(text string) int {
	n := 0
	runes := []rune(text)
	m, _ := e.re.FindStringMatch(text)
	for m != nil {
		start, end := max(m.Index, 0), min(m.Index+m.Length, len(runes))
		piece := string(runes[start:end])
		if _, ok := e.ranks[piece]; ok {
			n++
		} else {
			n += refPairMergeCount([]byte(piece), e.ranks)
		}
		m, _ = e.re.FindNextMatch(m)
	}
	return n
}

// refPairMergeCount is the old merge, unchanged.
func refPairMergeCount(piece []byte, ranks map[string]int) int {
	if len(piece) < 2 {
		return len(piece)
	}
	bounds := make([]int, len(piece)+1)
	for i := range bounds {
		bounds[i] = i
	}
	joined := func(k int) int {
		if k+2 >= len(bounds) {
			return math.MaxInt
		}
		if r, ok := ranks[string(piece[bounds[k]:bounds[k+2]])]; ok {
			return r
		}
		return math.MaxInt
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
		if pair[best] == math.MaxInt {
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

// pieces returns the pieces split.go cuts text into (after the same UTF-8
// repair Count makes).
func (e *Encoder) pieces(text string) []string {
	text = validUTF8(text)
	var ps []string
	for i := 0; i < len(text); {
		j := e.split(text, i)
		ps = append(ps, text[i:j])
		i = j
	}
	return ps
}
