package proxy

import (
	"bytes"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/tidwall/gjson"
)

// maxHeldEvent bounds how much of one unfinished SSE event the filter holds;
// past it the event is passed on as is (it cannot be a usage-only chunk).
const maxHeldEvent = 1 << 20

// usageChunkFilter removes the usage-only chunk ({"choices":[],"usage":{…}})
// from an SSE stream whose client did not ask for usage: ctxpress asked for
// it, so the client must not see it. Every other event passes through byte
// for byte, each as soon as its terminating blank line arrives; usage seen
// in any event is recorded.
type usageChunkFilter struct {
	held     []byte // start of an event whose end has not arrived
	passing  bool   // the held event grew past maxHeldEvent: pass the rest through
	usage    Usage
	stripped bool
}

// filter consumes p and appends what the client should get to dst.
func (f *usageChunkFilter) filter(dst, p []byte) []byte {
	for len(p) > 0 {
		if f.passing {
			end := eventEnd(p, 0)
			if end < 0 {
				return append(dst, p...)
			}
			dst = append(dst, p[:end]...)
			p = p[end:]
			f.passing = false
			continue
		}
		// Find the end of the event that starts with f.held, looking back a
		// few bytes so a "\n\n" split across reads is found.
		from := len(f.held)
		f.held = append(f.held, p...)
		end := eventEnd(f.held, max(from-3, 0))
		if end < 0 {
			if len(f.held) > maxHeldEvent {
				dst = append(dst, f.held...)
				f.held, f.passing = f.held[:0], true
			}
			return dst
		}
		consumed := end - from
		dst = f.event(dst, f.held[:end])
		f.held = f.held[:0]
		p = p[consumed:]
	}
	return dst
}

// flush returns what is still held, at the end of the stream.
func (f *usageChunkFilter) flush(dst []byte) []byte {
	dst = append(dst, f.held...)
	f.held = f.held[:0]
	return dst
}

// eventEnd returns the index just past the first blank line ("\n\n" or
// "\r\n\r\n") at or after from, or -1.
func eventEnd(b []byte, from int) int {
	for i := from; i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		if i+1 < len(b) && b[i+1] == '\n' {
			return i + 2
		}
		if i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n' {
			return i + 3
		}
	}
	return -1
}

// event appends ev to dst unless it is the usage-only chunk.
func (f *usageChunkFilter) event(dst, ev []byte) []byte {
	if !bytes.Contains(ev, []byte(`"usage"`)) {
		return append(dst, ev...)
	}
	data := eventData(ev)
	if !jsonvalid.Valid(data) {
		return append(dst, ev...)
	}
	u := parseUsage(gjson.GetBytes(data, "usage"))
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
		line := ev
		if i := bytes.IndexByte(ev, '\n'); i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
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
