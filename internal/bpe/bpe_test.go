package bpe

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/corpustest"
	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// TestCountsMatchTiktoken: this package counts what tiktoken-go counts, on
// edge cases and on every corpus trace, for both encodings.
func TestCountsMatchTiktoken(t *testing.T) {
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	texts := []string{"", "a", "hello world", "<|endoftext|> is text", "  \n\n\t x", "naïve café 東京 🙂",
		strings.Repeat("=", 300), "it's they'll WE'RE", "12345678 3.14159", "func main() {\n\tfmt.Println(\"hi\")\n}\n"}
	for i, tr := range corpustest.Traces(t) {
		// A quarter of the corpus bodies, as JSON: real text of every kind,
		// in seconds (minutes under -race, which TestCorpusTokensMatchTiktoken
		// samples instead).
		if i%4 == 0 && !raceEnabled {
			texts = append(texts, string(tr.Body))
		}
	}
	if files, _ := filepath.Glob("*.go"); len(files) > 0 {
		b, _ := os.ReadFile(files[0])
		texts = append(texts, string(b))
	}
	for _, name := range []string{O200K, CL100K} {
		want, err := tiktoken.GetEncoding(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := New(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range texts {
			if w, g := len(want.EncodeOrdinary(s)), got.Count(s); w != g {
				t.Errorf("%s, text %d (%.40q): %d tokens, tiktoken %d", name, i, s, g, w)
			}
		}
	}
}

func TestUnknownEncoding(t *testing.T) {
	if _, err := New("p50k_base"); err == nil {
		t.Error("an encoding it does not have")
	}
}

// TestTableHoldsEveryToken: the rank table answers every token of both
// encodings with its rank, and a byte string that is no token as none.
func TestTableHoldsEveryToken(t *testing.T) {
	for _, name := range []string{O200K, CL100K} {
		ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(encodings[name].file)
		if err != nil {
			t.Fatal(err)
		}
		tab, err := newTable(ranks)
		if err != nil {
			t.Fatal(err)
		}
		for tok, want := range ranks {
			if got, ok := tab.rank(tok); !ok || got != want {
				t.Fatalf("%s: token %q has rank %d (%v), want %d", name, tok, got, ok, want)
			}
			other := tok + "\x00\xff"
			_, want := ranks[other]
			if _, ok := tab.rank(other); ok != want {
				t.Fatalf("%s: %q is a token: %v, want %v", name, other, ok, want)
			}
		}
	}
}

// TestCountAllocatesNothing: counting valid UTF-8 allocates nothing, short
// pieces and long ones (merged in a pooled scratch) alike.
func TestCountAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("under -race, sync.Pool drops a quarter of what it is given")
	}
	e, err := New(O200K)
	if err != nil {
		t.Fatal(err)
	}
	text := "func main() {\n\tfmt.Println(\"naïve café 東京\")\n}\n xqzvbnmqw ZqZqZqZqZq" +
		strings.Repeat("Zq", 100) + " " + strings.Repeat("=-", 90)
	if n := testing.AllocsPerRun(100, func() { e.Count(text) }); n != 0 {
		t.Errorf("Count allocates %v times a call", n)
	}
}

// TestTableTellsAPrefixFromItsToken: a lookup of the first byte of a token
// misses even when both hash to the same slot with the same tag byte (the
// slot's length is compared, not only its bytes).
func TestTableTellsAPrefixFromItsToken(t *testing.T) {
	for i := 0; i < 1<<20; i++ {
		tok := "a" + strconv.Itoa(i)
		hp, ht := hash(tok[:1]), hash(tok)
		if hp>>56 != ht>>56 || hp&1 != ht&1 {
			continue
		}
		tab, err := newTable(map[string]int{tok: 7}) // two slots
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := tab.rank(tok[:1]); ok {
			t.Fatalf("%q, a prefix of token %q, is a token of rank %d", tok[:1], tok, r)
		}
		if r, ok := tab.rank(tok); !ok || r != 7 {
			t.Fatalf("%q has rank %d (%v), want 7", tok, r, ok)
		}
		return
	}
	t.Fatal("no token whose first byte shares its slot and tag")
}
