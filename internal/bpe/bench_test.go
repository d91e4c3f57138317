package bpe

import (
	"testing"
	"time"
)

// BenchmarkCountCorpus: cold counting throughput (MB/s) on an eighth of the
// corpus texts (every eighth message, tool output and loghub file, ~2 MB),
// for each encoding: regexp is the old pre-tokeniser (regexp2, as
// tiktoken-go), handwritten is split.go and merge.go. Run them side by side:
//
//	go test -run '^$' -bench CountCorpus -benchtime 3x -count 3 ./internal/bpe/
func BenchmarkCountCorpus(b *testing.B) {
	all := corpusTexts(b)
	var texts []string
	size := 0
	for i := 0; i < len(all); i += 8 {
		texts = append(texts, all[i].text)
		size += len(all[i].text)
	}
	for _, name := range []string{O200K, CL100K} {
		fast, old := newEncoders(b, name)
		for _, impl := range []struct {
			name  string
			count func(string) int
		}{{"regexp", old.Count}, {"handwritten", fast.Count}} {
			b.Run(name+"/"+impl.name, func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				tokens := 0
				for b.Loop() {
					tokens = 0
					for _, s := range texts {
						tokens += impl.count(s)
					}
				}
				b.ReportMetric(float64(tokens), "tokens")
			})
		}
	}
}

// BenchmarkCountCorpusSideBySide: the two pre-tokenisers of
// BenchmarkCountCorpus timed text by text, alternately, so a shared and
// noisy machine slows both alike; it reports each one's MB/s and the
// ratio (x).
func BenchmarkCountCorpusSideBySide(b *testing.B) {
	all := corpusTexts(b)
	for _, name := range []string{O200K, CL100K} {
		fast, old := newEncoders(b, name)
		b.Run(name, func(b *testing.B) {
			var oldTime, newTime time.Duration
			size := 0
			for b.Loop() {
				for i := 0; i < len(all); i += 8 {
					s := all[i].text
					t0 := time.Now()
					old.Count(s)
					t1 := time.Now()
					fast.Count(s)
					newTime += time.Since(t1)
					oldTime += t1.Sub(t0)
					size += len(s)
				}
			}
			b.ReportMetric(float64(size)/oldTime.Seconds()/1e6, "regexp-MB/s")
			b.ReportMetric(float64(size)/newTime.Seconds()/1e6, "handwritten-MB/s")
			b.ReportMetric(oldTime.Seconds()/newTime.Seconds(), "x")
		})
	}
}
