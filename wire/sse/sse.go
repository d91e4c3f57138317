// Package sse reads server-sent events as they arrive, whatever the wire
// format they carry: lines end with "\r\n", "\n" or a lone "\r" (mixed, as
// the spec allows) and may be split across reads at any byte.
package sse

import (
	"bytes"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
)

// MaxLine bounds the partial line a LineReader keeps between reads; a
// longer line is skipped whole (no usage event is that long).
const MaxLine = 4 << 20

// LineReader cuts a stream into lines across reads.
type LineReader struct {
	partial  []byte
	skipping bool // inside a line longer than MaxLine
	afterCR  bool // the last byte was a CR: a LF next ends no new line
}

// Feed consumes the next bytes of the stream and calls line for every line
// they complete, without its line end. line must not keep its argument.
func (r *LineReader) Feed(p []byte, line func([]byte)) {
	ends := LineEnds{P: p, lf: -1}
	for from := 0; from < len(p); {
		if r.afterCR && p[from] == '\n' {
			from++
		}
		r.afterCR = false
		i := -1
		if from < len(p) {
			i = ends.Next(from)
		}
		if i < 0 {
			if !r.skipping {
				if len(r.partial)+len(p)-from > MaxLine {
					r.partial, r.skipping = r.partial[:0], true
				} else {
					r.partial = append(r.partial, p[from:]...)
				}
			}
			return
		}
		l := p[from:i]
		r.afterCR = p[i] == '\r'
		from = i + 1
		if r.skipping {
			r.skipping = false
			continue
		}
		if len(r.partial) > 0 {
			r.partial = append(r.partial, l...)
			l = r.partial
		}
		line(l)
		r.partial = r.partial[:0]
	}
}

// LineEnds finds the line ends ('\r' or '\n') of one buffer in order, in
// linear time: each LF is searched for once, each CR only up to the next LF.
type LineEnds struct {
	P  []byte
	lf int // index of the next LF at or after the last search, len(P) when none; -1 before the first
}

// NewLineEnds returns the line ends of p.
func NewLineEnds(p []byte) LineEnds { return LineEnds{P: p, lf: -1} }

// Next returns the index of the first '\r' or '\n' at or after i, or -1.
func (e *LineEnds) Next(i int) int {
	if e.lf < i {
		e.lf = len(e.P)
		if k := bytes.IndexByte(e.P[i:], '\n'); k >= 0 {
			e.lf = i + k
		}
	}
	if k := bytes.IndexByte(e.P[i:e.lf], '\r'); k >= 0 {
		return i + k
	}
	if e.lf == len(e.P) {
		return -1
	}
	return e.lf
}

// Data returns the value of a "data:" line (one leading space dropped, as
// the spec says) and whether line is one.
func Data(line []byte) ([]byte, bool) {
	v, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return nil, false
	}
	return bytes.TrimPrefix(v, []byte(" ")), true
}

// EventData joins the data: lines of one event, as SSE defines.
func EventData(ev []byte) []byte {
	var data []byte
	lines := 0
	for len(ev) > 0 {
		var line []byte
		line, ev = NextLine(ev)
		if v, ok := Data(line); ok {
			if lines > 0 {
				data = append(data, '\n')
			}
			data = append(data, v...)
			lines++
		}
	}
	return data
}

// NextLine splits b after its first line end ("\r\n", "\n" or "\r").
func NextLine(b []byte) (line, rest []byte) {
	i := bytes.IndexAny(b, "\r\n")
	if i < 0 {
		return b, nil
	}
	j := i + 1
	if b[i] == '\r' && j < len(b) && b[j] == '\n' {
		j++
	}
	return b[:i], b[j:]
}

// JSONEvents reads the data: lines of a stream that hold JSON, across
// reads, for a watcher of one format's events.
type JSONEvents struct{ lines LineReader }

// Feed consumes the next bytes of the stream and calls event with the data
// of every complete data: line that contains mark and is valid JSON (mark
// skips the cheap way the lines the watcher has no use for). event must
// not keep its argument.
func (e *JSONEvents) Feed(p, mark []byte, event func(data []byte)) {
	e.lines.Feed(p, func(line []byte) {
		data, ok := Data(line)
		if !ok || !bytes.Contains(data, mark) {
			return
		}
		if data = bytes.TrimSpace(data); jsonvalid.Valid(data) {
			event(data)
		}
	})
}
