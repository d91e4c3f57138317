package rewrite

import (
	"testing"

	"github.com/ctxpress/ctxpress/squash"
)

// TestCorpusShellReads measures what keeping shell reads costs and saves on
// the corpus, before (reads squashed by shape, squash.Config.ReadMaxBytes
// -1, which is how squash behaved before reads were recognised) and after
// (the defaults), and prints the table (go test -v -run CorpusShellReads
// ./rewrite/): the tool outputs over 1500 B, how many are shell reads and
// source-shaped outputs, the bytes squash saved on them, the share of the
// savings that came from reads, and the whole pipeline's tokens. It fails
// when a read is changed: no corpus read is over the read cap.
func TestCorpusShellReads(t *testing.T) {
	before := squash.New(squash.Config{ReadMaxBytes: -1})
	after := squash.New(squash.Config{})
	type tally struct{ n, bytes, saved int }
	var all, reads, sources [2]tally
	for _, o := range corpusOutputs(t, squash.DefaultMinBytes) {
		c := squash.Call{Tool: o.call.Name, Args: o.call.Arguments}
		shape := after.Shape(c, o.text)
		for k, s := range []*squash.Squasher{before, after} {
			r := s.ApplyCall(c, o.text)
			saved := r.BytesBefore - r.BytesAfter
			add := func(tl *tally) { tl.n, tl.bytes, tl.saved = tl.n+1, tl.bytes+len(o.text), tl.saved+saved }
			add(&all[k])
			switch shape {
			case squash.ShapeRead:
				add(&reads[k])
				if k == 1 && r.Squashed {
					t.Errorf("%s: a shell read of %d bytes was changed: %.80q", o.trace, len(o.text), o.call.Arguments)
				}
			case squash.ShapeSource:
				add(&sources[k])
			}
		}
	}
	share := func(part, whole int) float64 { return 100 * float64(part) / float64(max(whole, 1)) }
	t.Logf("tool outputs over %d B: %d (%d bytes); shell reads %d (%d bytes); other source-shaped %d (%d bytes)",
		squash.DefaultMinBytes, all[0].n, all[0].bytes, reads[0].n, reads[0].bytes, sources[0].n, sources[0].bytes)
	t.Logf("%-8s %14s %14s %7s %14s %7s", "", "bytes saved", "from reads", "share", "from source", "share")
	for k, name := range []string{"before", "after"} {
		t.Logf("%-8s %14d %14d %6.1f%% %14d %6.1f%%", name, all[k].saved, reads[k].saved, share(reads[k].saved, all[k].saved),
			sources[k].saved, share(sources[k].saved, all[k].saved))
	}
	t.Logf("reads lost %.1f%% of their bytes before, %.1f%% after",
		share(reads[0].saved, reads[0].bytes), share(reads[1].saved, reads[1].bytes))

	// The whole pipeline over the corpus, squash before and after.
	pipelines := []*Pipeline{New(Config{Format: chatFormat, Squasher: before, Dedup: DefaultDedupConfig()}), sharedCorpusPipeline()}
	pipelines[0].counter = pipelines[1].Counter() // the counts are the same texts'
	var tokSaved [2]int
	for k, name := range []string{"before", "after"} {
		var tokBefore, tokAfter, squashed, deduped int
		for _, tr := range loadTraces(t) {
			res := pipelines[k].Rewrite(tr.body)
			tokBefore, tokAfter = tokBefore+res.TokensBefore, tokAfter+res.TokensAfter
			squashed, deduped = squashed+res.Squashed, deduped+res.Deduped
		}
		tokSaved[k] = tokBefore - tokAfter
		t.Logf("pipeline %-6s tokens %d -> %d (-%.1f%%), %d squashed, %d deduped", name, tokBefore, tokAfter,
			share(tokBefore-tokAfter, tokBefore), squashed, deduped)
	}
	t.Logf("the pipeline's token saving before: %.1f%% of it is no longer made (reads and source kept)",
		share(tokSaved[0]-tokSaved[1], tokSaved[0]))
}
