package chat

import (
	"bytes"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/tidwall/gjson"
)

// maxHeldEvent bounds how much of one unfinished SSE event the filter holds;
// past it the event is passed on as is (it cannot be a usage-only chunk).
const maxHeldEvent = 1 << 20

// UsageChunkFilter removes the usage-only chunk ({"choices":[],"usage":{…}})
// from an SSE stream whose client did not ask for usage: ctxpress asked for
// it, so the client must not see it. Every other event passes through byte
// for byte, each as soon as its terminating blank line arrives; usage seen
// in any event is recorded.
type UsageChunkFilter struct {
	held    []byte // start of an event whose end has not arrived
	passing bool   // the held event grew past maxHeldEvent: pass the rest through
	lines   sseLines
	// pendingLF: the last event ended on a CR at the end of a read; a LF
	// first in the next read completes its "\r\n", and goes (or is
	// stripped) with it. dropLF: that event was stripped.
	pendingLF, dropLF bool
	usage             Usage
	stripped          bool
}

// Filter consumes p and appends what the client should get to dst.
func (f *UsageChunkFilter) Filter(dst, p []byte) []byte {
	for len(p) > 0 {
		if f.pendingLF {
			f.pendingLF = false
			if p[0] == '\n' {
				if !f.dropLF {
					dst = append(dst, '\n')
				}
				f.lines.afterCR, p = false, p[1:]
				continue
			}
		}
		end := f.lines.eventEnd(p)
		if end < 0 {
			if f.passing {
				return append(dst, p...)
			}
			f.held = append(f.held, p...)
			if len(f.held) > maxHeldEvent {
				dst = append(dst, f.held...)
				f.held, f.passing = f.held[:0], true
			}
			return dst
		}
		if f.passing {
			dst = append(dst, p[:end]...)
			f.passing, f.dropLF = false, false
		} else {
			f.held = append(f.held, p[:end]...)
			n := len(dst)
			dst = f.event(dst, f.held)
			f.dropLF = len(dst) == n
			f.held = f.held[:0]
		}
		f.pendingLF = f.lines.afterCR
		p = p[end:]
	}
	return dst
}

// Flush returns what is still held, at the end of the stream.
func (f *UsageChunkFilter) Flush(dst []byte) []byte {
	dst = append(dst, f.held...)
	f.held = f.held[:0]
	return dst
}

// sseLines follows SSE line ends across reads: "\r\n", "\n" or "\r"
// alone, mixed as the spec allows, so that a stream whose lines end with a
// lone CR is cut into events as it arrives, not at its end.
type sseLines struct {
	afterCR bool // the last byte was a CR: a LF next completes the same line end
	inLine  bool // the current line has bytes
}

// eventEnd consumes p up to the end of the current event, just past its
// blank line (with the LF of a blank line's "\r\n" when it is in p), and
// returns that index; -1 when the event goes on past p.
func (l *sseLines) eventEnd(p []byte) int {
	ends := lineEnds{p: p, lf: -1}
	for i := 0; i < len(p); i++ {
		if l.inLine {
			if i = ends.next(i); i < 0 {
				return -1
			}
		}
		c := p[i]
		switch {
		case c == '\n' && l.afterCR:
			l.afterCR = false // the second half of "\r\n"
		case c == '\r' || c == '\n':
			l.afterCR = c == '\r'
			if l.inLine {
				l.inLine = false
				continue
			}
			// A blank line: the event ends here.
			end := i + 1
			if l.afterCR && end < len(p) && p[end] == '\n' {
				end, l.afterCR = end+1, false
			}
			return end
		default:
			l.inLine, l.afterCR = true, false
		}
	}
	return -1
}

// lineEnds finds the line ends ('\r' or '\n') of one buffer in order, in
// linear time: each LF is searched for once, each CR only up to the next LF.
type lineEnds struct {
	p  []byte
	lf int // index of the next LF at or after the last search, len(p) when none; -1 before the first
}

// next returns the index of the first '\r' or '\n' at or after i, or -1.
func (e *lineEnds) next(i int) int {
	if e.lf < i {
		e.lf = len(e.p)
		if k := bytes.IndexByte(e.p[i:], '\n'); k >= 0 {
			e.lf = i + k
		}
	}
	if k := bytes.IndexByte(e.p[i:e.lf], '\r'); k >= 0 {
		return i + k
	}
	if e.lf == len(e.p) {
		return -1
	}
	return e.lf
}

// event appends ev to dst unless it is the usage-only chunk.
func (f *UsageChunkFilter) event(dst, ev []byte) []byte {
	if !bytes.Contains(ev, []byte(`"usage"`)) {
		return append(dst, ev...)
	}
	data := eventData(ev)
	if !jsonvalid.Valid(data) {
		return append(dst, ev...)
	}
	u := ReadUsage(gjson.GetBytes(data, "usage"))
	if !u.Found {
		return append(dst, ev...)
	}
	f.usage = u
	if ch := gjson.GetBytes(data, "choices"); ch.IsArray() && len(ch.Array()) == 0 {
		f.stripped = true
		return dst
	}
	return append(dst, ev...)
}

// eventData joins the data: lines of one event, as SSE defines.
func eventData(ev []byte) []byte {
	var data []byte
	lines := 0
	for len(ev) > 0 {
		var line []byte
		line, ev = nextLine(ev)
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if lines > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
			lines++
		}
	}
	return data
}

// nextLine splits b after its first line end ("\r\n", "\n" or "\r").
func nextLine(b []byte) (line, rest []byte) {
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

// maxSSELine bounds the partial line SSEUsage keeps between reads; a longer
// line cannot be a usage chunk worth reading and is skipped.
const maxSSELine = 4 << 20

// SSEUsage watches a side copy of an SSE stream for usage. It never changes
// the bytes the client gets. Lines end with "\r\n", "\n" or a lone "\r"
// (mixed, as the spec allows), and may be split across reads at any byte.
type SSEUsage struct {
	partial  []byte
	skipping bool // inside a line longer than maxSSELine
	afterCR  bool // the last byte was a CR: a LF next ends no new line
	usage    Usage
}

// Observe feeds the next bytes of the stream.
func (s *SSEUsage) Observe(p []byte) {
	ends := lineEnds{p: p, lf: -1}
	for from := 0; from < len(p); {
		if s.afterCR && p[from] == '\n' {
			from++
		}
		s.afterCR = false
		i := -1
		if from < len(p) {
			i = ends.next(from)
		}
		if i < 0 {
			if !s.skipping {
				if len(s.partial)+len(p)-from > maxSSELine {
					s.partial, s.skipping = s.partial[:0], true
				} else {
					s.partial = append(s.partial, p[from:]...)
				}
			}
			return
		}
		line := p[from:i]
		s.afterCR = p[i] == '\r'
		from = i + 1
		if s.skipping {
			s.skipping = false
			continue
		}
		if len(s.partial) > 0 {
			s.partial = append(s.partial, line...)
			line = s.partial
		}
		s.line(line)
		s.partial = s.partial[:0]
	}
}

func (s *SSEUsage) line(line []byte) {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok || !bytes.Contains(data, []byte(`"usage"`)) {
		return
	}
	data = bytes.TrimSpace(data)
	if !jsonvalid.Valid(data) {
		return
	}
	if u := ReadUsage(gjson.GetBytes(data, "usage")); u.Found {
		s.usage = u
	}
}

// Usage is the last usage the stream reported (Found=false: none yet).
func (s *SSEUsage) Usage() Usage { return s.usage }

// Usage is the last usage an event reported (Found=false: none yet).
func (f *UsageChunkFilter) Usage() Usage { return f.usage }
