package bpe

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ctxpress/ctxpress/internal/corpustest"
	"github.com/tidwall/gjson"
)

// corpusText is one text of the corpus: a message's content, a tool call's
// arguments, or a whole loghub file.
type corpusText struct{ name, text string }

// corpusTexts returns every text of the corpus: each message content (and
// content part) and tool-call argument string of every trace, and every
// file of logs/ (the loghub samples: the raw .log and its two CSVs).
func corpusTexts(tb testing.TB) []corpusText {
	tb.Helper()
	var texts []corpusText
	for _, tr := range corpustest.Traces(tb) {
		gjson.GetBytes(tr.Body, "messages").ForEach(func(_, m gjson.Result) bool {
			add := func(r gjson.Result) bool {
				if r.Type == gjson.String {
					texts = append(texts, corpusText{tr.Name, r.String()})
				}
				return true
			}
			if c := m.Get("content"); c.IsArray() {
				c.ForEach(func(_, part gjson.Result) bool { return add(part.Get("text")) })
			} else {
				add(c)
			}
			m.Get("tool_calls.#.function.arguments").ForEach(func(_, a gjson.Result) bool { return add(a) })
			return true
		})
	}
	logs, err := filepath.Glob(filepath.Join(corpustest.Dir(tb), "logs", "*_2k.log*"))
	if err != nil || len(logs) == 0 {
		tb.Fatalf("no loghub logs in the corpus (%v)", err)
	}
	for _, f := range logs {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		texts = append(texts, corpusText{filepath.Base(f), string(b)})
	}
	return texts
}

// TestCorpusTokensMatchTiktoken: on every text of the corpus (every
// message and tool output of every trace, every loghub log), both
// encodings give tiktoken-go's token ids, and Count their number. It takes
// ~30 s of CPU, tiktoken-go's regexp the bulk of it: -short skips it, and
// under -race (ten times slower) it checks every 64th text.
func TestCorpusTokensMatchTiktoken(t *testing.T) {
	if testing.Short() {
		t.Skip("the whole corpus through tiktoken-go")
	}
	texts := corpusTexts(t)
	step := 1
	if raceEnabled {
		step = 64
	}
	for _, e := range bothEncodings(t) {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			bytes, tokens := 0, 0
			for i := 0; i < len(texts); i += step {
				c := texts[i]
				want := e.tiktoken.EncodeOrdinary(c.text)
				if got := e.fast.encode(c.text); !slices.Equal(got, want) {
					k := 0
					for k < min(len(got), len(want)) && got[k] == want[k] {
						k++
					}
					t.Errorf("%s text %d: token %d differs (%d tokens, tiktoken %d)", c.name, i, k, len(got), len(want))
					continue
				}
				if got := e.fast.Count(c.text); got != len(want) {
					t.Errorf("%s text %d: Count %d, tiktoken %d tokens", c.name, i, got, len(want))
				}
				bytes += len(c.text)
				tokens += len(want)
			}
			t.Logf("%d of %d texts, %d bytes, %d tokens: tiktoken-go's", (len(texts)+step-1)/step, len(texts), bytes, tokens)
		})
	}
}
