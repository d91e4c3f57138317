package rewrite

import (
	"container/list"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
)

// Parse is the package's Parse, continued from a remembered parse when the
// body repeats an earlier body's bytes up to the end of one of its
// messages: an agent's next request re-sends its whole history with a few
// messages added, and a retry re-sends it all. Only the bytes after that
// message are validated and read. A format that cannot continue a parse
// (not a wire.Resumer) is parsed whole.
func (p *Pipeline) Parse(f wire.Format, body []byte) *Parsed {
	r, ok := f.(wire.Resumer)
	if !ok || p.parses == nil {
		return Parse(f, body)
	}
	var room [8]cacheKey
	keys := prefixKeys(room[:0], f, body)
	from, same := p.parses.find(keys, f, len(body))
	k := 0
	if from != nil {
		k = from.conv.MessagesWithin(same)
	}
	if k == 0 {
		parsed := Parse(f, body)
		if parsed.chat {
			parsed.memo = p.parses.add(keys, f, parsed.conv, nil)
		}
		return parsed
	}
	at := from.conv.Messages[k-1].End
	parsed := &Parsed{body: body, format: f}
	if !jsonvalid.ValidAfterElement(body, at) {
		return parsed
	}
	parsed.valid = true
	var taken int
	parsed.conv, parsed.chat, taken = r.Resume(body, from.conv, at)
	if !parsed.chat {
		return parsed
	}
	if taken > 0 {
		parsed.prior, parsed.shared = from, taken
	}
	if same == len(body) {
		parsed.memo = from // a repeat: what is learnt of it is from's
		return parsed
	}
	// A body that extends from's by whole blocks supersedes it: every
	// prefix of from's now finds this one.
	drop := from
	if same/prefixBlock < len(from.keys)-1 {
		drop = nil
	}
	parsed.memo = p.parses.add(keys, f, parsed.conv, drop)
	return parsed
}

// prefixBlock is the stride of a body's prefix keys. A finer one finds a
// longer shared prefix and hashes more keys per request.
const prefixBlock = 4096

// prefixKeys appends to dst the keys of body's prefixes: one per whole
// prefixBlock, each chained from the one before (the format's name, then
// each block's bytes), and last the key of the whole body (kind
// kindBody, so it never equals a block's). Equal keys mean equal bytes, as
// with cacheKey everywhere.
func prefixKeys(dst []cacheKey, f wire.Format, body []byte) []cacheKey {
	k := newKey(kindPrefix, f.Name())
	at := 0
	for ; len(body)-at >= prefixBlock; at += prefixBlock {
		k = bytesKey(kindPrefix, keyString(&k), body[at:at+prefixBlock])
		dst = append(dst, k)
	}
	return append(dst, bytesKey(kindBody, keyString(&k), body[at:]))
}

// keyString is k's bytes as a string, without a copy (bytesKey only reads
// its parts).
func keyString(k *cacheKey) string { return unsafe.String(&k[0], len(k)) }

// parseMemo remembers recent parses by the keys of their bodies' prefixes
// (prefixKeys), bounded by the bytes their conversations hold. It is safe
// for concurrent use; the conversations in it are never changed.
type parseMemo struct {
	max int64 // byte bound; immutable

	mu    sync.Mutex // guards everything below
	used  int64
	byKey map[cacheKey]*memoParse
	order list.List // of *memoParse, most recently used first
}

// memoParse is one remembered parse.
type memoParse struct {
	format string             // the format's name
	conv   *wire.Conversation // its Body is not kept: only offsets are read
	keys   []cacheKey         // its body's prefixKeys, whole body last; immutable
	size   int64
	elem   *list.Element // its place in the memo's order; nil once forgotten (guarded by its mu)
	// analysis is the last analysis of a request parsed as conv, kept
	// for the next one that shares its messages.
	analysis atomic.Pointer[keptAnalysis]
}

// keptAnalysis is an analysis and the encoding it counted with.
type keptAnalysis struct {
	enc Encoding
	a   *analysis
}

// newParseMemo returns an empty memo of at most max bytes; nil when max is
// not positive (nothing is remembered).
func newParseMemo(max int64) *parseMemo {
	if max <= 0 {
		return nil
	}
	return &parseMemo{max: max, byKey: make(map[cacheKey]*memoParse)}
}

// find returns the remembered parse whose body shares the longest prefix
// with a body of size bytes whose prefixKeys are keys, and how long that
// prefix is at least: the whole body when it was seen before, else its
// whole blocks that match.
func (m *parseMemo) find(keys []cacheKey, f wire.Format, size int) (*memoParse, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(keys) - 1; i >= 0; i-- {
		e, ok := m.byKey[keys[i]]
		if !ok || e.format != f.Name() {
			continue
		}
		m.order.MoveToFront(e.elem)
		if i == len(keys)-1 {
			return e, size
		}
		return e, (i + 1) * prefixBlock
	}
	return nil, 0
}

// add remembers conv, parsed from the body whose prefixKeys are keys, as
// the parse each of those prefixes finds from now on, and returns it (nil
// when it is too big to keep); drop, when not nil, is a remembered parse
// it supersedes, forgotten.
func (m *parseMemo) add(keys []cacheKey, f wire.Format, conv *wire.Conversation, drop *memoParse) *memoParse {
	c := *conv
	c.Body = nil
	e := &memoParse{format: f.Name(), conv: &c, keys: append([]cacheKey(nil), keys...)}
	// The conversation's messages and items, its keys (each in the slice
	// and a map slot), and the analysis kept with it (a fact pointer and
	// a hash per message, a resultRef per tool result).
	results := 0
	for i := range c.Items {
		if c.Items[i].Kind == wire.KindToolResult {
			results++
		}
	}
	e.size = int64(cap(c.Messages))*int64(unsafe.Sizeof(wire.Message{})+unsafe.Sizeof(contentHash{})+8) +
		int64(cap(c.Items))*int64(unsafe.Sizeof(wire.Item{})) + int64(results)*int64(unsafe.Sizeof(resultRef{})) +
		int64(len(e.keys))*3*int64(len(cacheKey{})) + 4*entryOverhead
	if e.size > m.max/8 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if drop != nil && drop.elem != nil {
		m.remove(drop)
	}
	for _, k := range e.keys {
		m.byKey[k] = e
	}
	m.used += e.size
	e.elem = m.order.PushFront(e)
	for m.used > m.max && m.order.Len() > 0 {
		m.remove(m.order.Back().Value.(*memoParse))
	}
	return e
}

// stats reports the parses remembered and the bytes they account for.
func (m *parseMemo) stats() (entries int, bytes int64) {
	if m == nil {
		return 0, 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.order.Len(), m.used
}

// remove forgets e, and each of its keys that still finds it.
func (m *parseMemo) remove(e *memoParse) {
	for _, k := range e.keys {
		if m.byKey[k] == e {
			delete(m.byKey, k)
		}
	}
	m.used -= e.size
	m.order.Remove(e.elem)
	e.elem = nil
}
