package chat

import (
	"bytes"

	"github.com/ctxpress/ctxpress/wire/sse"

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
	ends := sse.NewLineEnds(p)
	for i := 0; i < len(p); i++ {
		if l.inLine {
			if i = ends.Next(i); i < 0 {
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

// event appends ev to dst unless it is the usage-only chunk.
func (f *UsageChunkFilter) event(dst, ev []byte) []byte {
	if !bytes.Contains(ev, []byte(`"usage"`)) {
		return append(dst, ev...)
	}
	data := sse.EventData(ev)
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

// SSEUsage watches a side copy of an SSE stream for usage. It never changes
// the bytes the client gets.
type SSEUsage struct {
	events sse.JSONEvents
	usage  Usage
}

// Observe feeds the next bytes of the stream.
func (s *SSEUsage) Observe(p []byte) { s.events.Feed(p, []byte(`"usage"`), s.event) }

func (s *SSEUsage) event(data []byte) {
	if u := ReadUsage(gjson.GetBytes(data, "usage")); u.Found {
		s.usage = u
	}
}

// Usage is the last usage the stream reported (Found=false: none yet).
func (s *SSEUsage) Usage() Usage { return s.usage }

// Usage is the last usage an event reported (Found=false: none yet).
func (f *UsageChunkFilter) Usage() Usage { return f.usage }
