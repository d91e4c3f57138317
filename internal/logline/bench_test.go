package logline

import (
	"io"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// logRequest writes the access line a pass-through request gets.
func logRequest(l *zerolog.Logger) {
	l.Info().Str("method", "POST").Str("path", "/v1/embeddings").Int("status", 200).
		Dur("dur", 412*time.Microsecond).Dur("upstream", 200*time.Microsecond).
		Int("bytes_in", 1024).Int64("bytes_out", 311).Msg("request")
}

// The per-event cost on the logging goroutine, side by side: zerolog's JSON
// straight to the output, this package's Writer (JSON and console), and
// zerolog.ConsoleWriter, which decodes every event with encoding/json.
func BenchmarkLogLine(b *testing.B) {
	cases := []struct {
		name string
		w    func() (io.Writer, func())
	}{
		{"zerolog_json_direct", func() (io.Writer, func()) { return io.Discard, func() {} }},
		{"buffered_json", func() (io.Writer, func()) { w := New(io.Discard, Options{}); return w, func() { w.Close() } }},
		{"buffered_console", func() (io.Writer, func()) {
			w := New(io.Discard, Options{Console: true})
			return w, func() { w.Close() }
		}},
		{"zerolog_ConsoleWriter", func() (io.Writer, func()) {
			return zerolog.ConsoleWriter{Out: io.Discard, NoColor: true, TimeFormat: time.DateTime}, func() {}
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			w, done := c.w()
			l := zerolog.New(w).With().Timestamp().Logger()
			b.ReportAllocs()
			for b.Loop() {
				logRequest(&l)
			}
			b.StopTimer()
			done()
			if bw, ok := w.(*Writer); ok {
				b.ReportMetric(float64(bw.Dropped()), "dropped")
			}
		})
	}
}

// BenchmarkAppendConsole is the flusher's formatting of one access line.
func BenchmarkAppendConsole(b *testing.B) {
	ev := sampleEvents()[0]
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendConsole(dst[:0], ev, false)
	}
}
