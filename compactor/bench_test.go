package compactor

import (
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/redact"
)

// BenchmarkTranscript serialises (and redacts) the corpus trace with the most
// text; SetBytes is that text's size.
func BenchmarkTranscript(b *testing.B) {
	tr := bigTrace(b)
	b.SetBytes(int64(textBytes(tr.msgs)))
	b.ReportAllocs()
	for b.Loop() {
		Transcript(tr.msgs, 0)
	}
}

// BenchmarkTranscriptCapped adds the global cap a small summary window needs.
func BenchmarkTranscriptCapped(b *testing.B) {
	tr := bigTrace(b)
	b.SetBytes(int64(textBytes(tr.msgs)))
	b.ReportAllocs()
	for b.Loop() {
		Transcript(tr.msgs, 100_000)
	}
}

// BenchmarkRedactCorpus redacts every message of the big trace, as
// Transcript does, without the rendering: the baseline for the scan itself.
func BenchmarkRedactCorpus(b *testing.B) {
	tr := bigTrace(b)
	var sb strings.Builder
	for _, m := range tr.msgs {
		sb.WriteString(m.Text)
	}
	text := sb.String()
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		redact.Secrets(text)
	}
}
