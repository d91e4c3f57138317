package bpe

import (
	"os"
	"path/filepath"
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
		if i%4 == 0 { // a quarter of the corpus: real text of every kind, in seconds
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
