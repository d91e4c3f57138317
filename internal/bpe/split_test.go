package bpe

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// trickyTexts are the corners of the patterns: each line names the rule it
// exercises. They seed the fuzz target too.
var trickyTexts = []string{
	"", "a", " ", "  ", "\n", "hello world", "  \n\n\t x", "x  ", "x \t\n \ny", " \r\n\r\n  z",
	"it's they'll WE'RE I'M you'Ve he'D don'T 'S' ''s x'", "'s", "'", "'ll'", "ſ's", // contractions, case-insensitive
	"12345678 3.14159 ٣٤٥٦ ①②③④ ½¼ abc123 x2y_3",                 // \p{N}{1,3}, non-ASCII numbers
	"a // b /// c\n/\n//x  ...\n\n\n /*", " ?!/\r\n/", "){\r\n/", // punctuation and its [\r\n/]* tail
	"\t\t\n\t x", " \u00a0\u2003x", "\u0085x\u2028y", "\v\f\r", // \s*[\r\n]+, \s+(?!\S), Unicode spaces
	"HelloWorld HTTPServer getHTTPResponse ÀÉÎõü DŽeto ǅa",        // o200k's case classes, Lt
	"ʰʱ ªº 東京タワー 한국어 ẞß", "e\u0301 A\u0301B \u0301\u0301 x\u20dd", // Lm, Lo, marks
	"naïve café 東京 🙂👍🏽 👨‍👩‍👧", "\x00\x01\x7f", "<|endoftext|> is text",
	"\xff\xfe bad \xc3 utf8 \xe2\x82 \xed\xa0\x80 x\xffy", "\xc3\xa9\xff'", // invalid UTF-8
	strings.Repeat("=", 300), strings.Repeat(" ", 70) + "x", strings.Repeat("ab", 80),
	"func main() {\n\tfmt.Println(\"hi\")\n}\n", "C:\\Users\\x> dir /s\r\n",
}

var tiktokenOnce sync.Once

// tiktokenEncoding returns tiktoken-go's encoder of name, from the
// embedded tables.
func tiktokenEncoding(tb testing.TB, name string) *tiktoken.Tiktoken {
	tb.Helper()
	tiktokenOnce.Do(func() { tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader()) })
	enc, err := tiktoken.GetEncoding(name)
	if err != nil {
		tb.Fatal(err)
	}
	return enc
}

// encoders holds the three implementations of one encoding under test.
type encoders struct {
	name     string
	fast     *Encoder
	regexp   *regexpEncoder
	tiktoken *tiktoken.Tiktoken
}

var (
	encodersOnce sync.Once
	allEncoders  []encoders
)

func bothEncodings(tb testing.TB) []encoders {
	tb.Helper()
	encodersOnce.Do(func() {
		for _, name := range []string{O200K, CL100K} {
			fast, old := newEncoders(tb, name)
			allEncoders = append(allEncoders, encoders{name, fast, old, tiktokenEncoding(tb, name)})
		}
	})
	return allEncoders
}

// checkSame fails tb unless the hand-written splitter cuts text where the
// regexp does, and the token ids and count are tiktoken-go's.
func checkSame(tb testing.TB, e encoders, text string) {
	tb.Helper()
	if got, want := e.fast.pieces(text), e.regexp.pieces(text); !slices.Equal(got, want) {
		tb.Fatalf("%s splits %q\ninto  %q\nregexp %q", e.name, text, got, want)
	}
	want := e.tiktoken.EncodeOrdinary(text)
	if got := e.fast.encode(text); !slices.Equal(got, want) {
		tb.Fatalf("%s encodes %q\nas       %v\ntiktoken %v", e.name, text, got, want)
	}
	if got := e.fast.Count(text); got != len(want) {
		tb.Fatalf("%s counts %q as %d tokens, tiktoken %d", e.name, text, got, len(want))
	}
}

// TestSplitMatchesRegexp: on each corner of the patterns, the pieces are
// the regexp's and the tokens tiktoken-go's, for both encodings.
func TestSplitMatchesRegexp(t *testing.T) {
	for _, e := range bothEncodings(t) {
		for _, s := range trickyTexts {
			checkSame(t, e, s)
		}
	}
}

// TestEveryRuneSplitsAsRegexp: every assigned plane of Unicode (planes 0
// to 3 and 14; the rest is unassigned or private use, of no class), rune
// by rune between the characters that steer the patterns, splits as the
// regexp does: the class table (ASCII and unicode.Is) is regexp2's. -short
// skips it; -race samples every sixteenth rune.
func TestEveryRuneSplitsAsRegexp(t *testing.T) {
	if testing.Short() {
		t.Skip("a million runes through regexp2")
	}
	stride := rune(1)
	if raceEnabled {
		stride = 16 // ten times slower: every sixteenth rune
	}
	var b strings.Builder
	for r := rune(0); r <= 0x10FFFF; r += stride {
		if r >= 0xD800 && r <= 0xDFFF || r >= 0x40000 && r < 0xE0000 {
			continue
		}
		if r == 0xF0000 {
			break
		}
		if r%7 == 0 { // keep the variety of neighbours
			b.WriteString("a")
		}
		b.WriteRune(r)
		b.WriteString([]string{"A", "'s", " ", "1", "\n", "", "é"}[r%7])
	}
	text := b.String()
	for _, e := range bothEncodings(t) {
		if got, want := e.fast.pieces(text), e.regexp.pieces(text); !slices.Equal(got, want) {
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("%s: piece %d is %q, regexp %q", e.name, i, got[i], want[i])
				}
			}
			t.Fatalf("%s: %d pieces, regexp %d", e.name, len(got), len(want))
		}
	}
}

// FuzzPreTokenizerMatchesRegexp: for any input, both encodings' pieces are
// the regexp's and their tokens tiktoken-go's.
func FuzzPreTokenizerMatchesRegexp(f *testing.F) {
	for _, s := range trickyTexts {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, e := range bothEncodings(t) {
			checkSame(t, e, s)
		}
	})
}
