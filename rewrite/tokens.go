package rewrite

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/ctxpress/ctxpress/internal/bpe"
	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
)

// Encoding names a tiktoken encoding.
type Encoding string

// The encodings ctxpress counts with; both are embedded in the binary.
const (
	O200K  Encoding = "o200k_base"  // gpt-4o, gpt-4.1, o-series, and the default for unknown models
	CL100K Encoding = "cl100k_base" // gpt-4, gpt-3.5-turbo, text-embedding-3 / ada-002
)

// EncodingForModel returns the encoding to count tokens for model with:
// cl100k_base for the gpt-4 (not gpt-4o/4.1/4.5), gpt-3.5-turbo and
// text-embedding-3 / ada-002 families, o200k_base for everything else,
// including models that are not OpenAI's (their own tokenizers are not
// embedded; o200k_base is a close, modern stand-in). A provider prefix such
// as "openai/" or "azure/" is ignored.
func EncodingForModel(model string) Encoding {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	switch {
	case m == "gpt-4", strings.HasPrefix(m, "gpt-4-"),
		strings.HasPrefix(m, "gpt-3.5"), strings.HasPrefix(m, "gpt-35"),
		strings.HasPrefix(m, "text-embedding-3"), strings.HasPrefix(m, "text-embedding-ada"):
		return CL100K
	}
	return O200K
}

// The tiktoken encoders are process-wide, and this is the package's only
// state. An encoder is a set of immutable tables (about 6 MB of heap for
// o200k_base, 3 MB for cl100k_base) that takes ~0.4 s to build and is the
// same for every caller, so each is built once, on first use:
// encoder.once. Nothing they guard changes after it is built; the map
// itself is never written.
var encoders = map[Encoding]*encoder{O200K: {}, CL100K: {}}

// encoder builds one tiktoken encoding lazily, once.
type encoder struct {
	once sync.Once
	tk   *bpe.Encoder // nil when the encoding failed to load
}

// get returns the tiktoken encoder for enc, building it on first use from
// the embedded tables (never a network fetch); safe for concurrent callers
// (they wait for the one build). It returns nil only if the embedded tables
// fail to load.
func (e *encoder) get(enc Encoding) *bpe.Encoder {
	e.once.Do(func() {
		if tk, err := bpe.New(string(enc)); err == nil {
			e.tk = tk
		}
	})
	return e.tk
}

// Counter counts tokens, caching counts by content hash within a memory
// bound. It is safe for concurrent use. The proxy (via Pipeline.Counter) and
// the `ctxpress count` CLI share this one implementation.
type Counter struct {
	cache *lru
	// counts are Count of each encoding as a wire.Count, made once: a
	// request's counter is then not an allocation per request.
	counts map[Encoding]wire.Count
}

// newCounter returns a Counter over cache.
func newCounter(cache *lru) *Counter {
	c := &Counter{cache: cache, counts: make(map[Encoding]wire.Count, len(encoders))}
	for enc := range encoders {
		c.counts[enc] = func(s string) int { return c.Count(enc, s) }
	}
	return c
}

// NewCounter returns a Counter whose cache holds at most cacheBytes
// (0 means DefaultCacheBytes; negative disables caching).
func NewCounter(cacheBytes int64) *Counter {
	if cacheBytes == 0 {
		cacheBytes = DefaultCacheBytes
	}
	return newCounter(newLRU(cacheBytes))
}

// Count returns the number of tokens text encodes to with enc. It is the
// only place in ctxpress where tokens are counted; everything else sums its
// results. Special-token text such as "<|endoftext|>" is counted as ordinary
// text, as a provider counts user content. An empty text is 0 tokens. An
// unknown encoding counts as o200k_base. Should the embedded tables ever fail
// to load, the count falls back to one token per 4 bytes rather than fail a
// request.
func (c *Counter) Count(enc Encoding, text string) int {
	if text == "" {
		return 0
	}
	e, ok := encoders[enc]
	if !ok {
		enc, e = O200K, encoders[O200K]
	}
	key := newKey(kindTokens, string(enc), text)
	if v, ok := c.cache.get(key); ok {
		return v.(int)
	}
	var n int
	if tk := e.get(enc); tk != nil {
		n = encodeBounded(tk, text)
	} else {
		n = (len(text) + 3) / 4
	}
	c.cache.add(key, n, 8)
	return n
}

// Texts above sampleOver bytes that ctxpress replaces (a squashed tool
// output) are never sent, so their token count is only a figure for the
// savings: Estimate counts sampleWindows evenly spread windows of
// sampleWindow bytes and scales, instead of tokenising megabytes on the
// request path.
const (
	sampleOver    = 128 << 10
	sampleWindows = 32
	sampleWindow  = 2 << 10
)

// Estimate returns Count for a text up to sampleOver bytes, and otherwise
// an estimate from samples (within a few percent on real logs and code).
// It is deterministic.
func (c *Counter) Estimate(enc Encoding, text string) int {
	if len(text) <= sampleOver {
		return c.Count(enc, text)
	}
	sampled, tokens := 0, 0
	for i := range sampleWindows {
		start := runeStart(text, i*(len(text)-sampleWindow)/(sampleWindows-1))
		end := runeStart(text, start+sampleWindow)
		tokens += c.Count(enc, text[start:end])
		sampled += end - start
	}
	if sampled == 0 {
		return c.Count(enc, text)
	}
	return int(float64(tokens) * float64(len(text)) / float64(sampled))
}

// runeStart moves i back to the start of the rune it is in (or len(s)).
func runeStart(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// CountText returns the tokens of text with the encoding for model.
func (c *Counter) CountText(model, text string) int {
	return c.Count(EncodingForModel(model), text)
}

// CountRequest returns the prompt tokens of a request body in format f
// as ctxpress estimates them: every message by the format's rules (chat:
// 3 tokens of framing, its role, content, name + 1, tool_call_id and tool
// calls), the format's priming, and the spans it counts as raw text (chat:
// the `tools` or legacy `functions` schema). Providers render tool schemas
// into their own, more compact, prompt format, so the schema part is an
// overestimate by a few percent of it. It returns ErrInvalidJSON or
// ErrNotChat for bodies it cannot count.
func (c *Counter) CountRequest(f wire.Format, body []byte) (int, error) {
	if !jsonvalid.Valid(body) {
		return 0, ErrInvalidJSON
	}
	conv, ok := f.Parse(body)
	if !ok {
		return 0, ErrNotChat
	}
	req := c.request(conv, f)
	n := c.fixedTokens(&req)
	for i := range req.Messages {
		n += c.messageTokens(&req, i)
	}
	return n, nil
}

// request returns conv with its format and a counter of its model's
// encoding.
func (c *Counter) request(conv *wire.Conversation, f wire.Format) request {
	return request{Conversation: conv, f: f, count: c.counts[EncodingForModel(conv.Model)]}
}

// fixedTokens returns the tokens a request costs besides its messages: the
// format's priming and the spans it counts as they are (tool schemas).
func (c *Counter) fixedTokens(req *request) int {
	n := req.Priming
	enc := EncodingForModel(req.Model)
	for _, s := range req.Counted {
		n += c.countBytes(enc, s.Of(req.Body))
	}
	return n
}

// countBytes is Count of string(b), without copying b when its count is
// cached: a request's tool schemas (kilobytes, the same every turn).
func (c *Counter) countBytes(enc Encoding, b []byte) int {
	if len(b) == 0 {
		return 0
	}
	if _, ok := encoders[enc]; !ok {
		enc = O200K
	}
	if v, ok := c.cache.get(bytesKey(kindTokens, string(enc), b)); ok {
		return v.(int)
	}
	return c.Count(enc, string(b))
}

// messageTokens returns the tokens of message i as sent.
func (c *Counter) messageTokens(req *request, i int) int {
	n := req.f.Overhead(req.Conversation, i, req.count)
	if !req.Messages[i].Object {
		return n
	}
	r := req.Messages[i].Items
	for it := r.Start; it < r.End; it++ {
		n += contentTokens(req, it)
	}
	return n
}

// contentTokens counts item it's content: its text parts' texts and the
// other parts as the format counts them.
func contentTokens(req *request, it int) int {
	if !req.Items[it].Content.Exists() {
		return 0
	}
	n := 0
	for _, p := range req.f.Parts(req.Conversation, it, req.count) {
		if p.IsText {
			n += req.count(p.Text)
		} else {
			n += p.Tokens
		}
	}
	return n
}

// maxRun bounds the unbroken run of non-space bytes, and of whitespace,
// encoded in one piece. tiktoken-go's BPE is quadratic in the length of one
// pre-token, so a tool output holding a 40 KB base64 blob or a minified
// line took almost a second to count, and 160 KB of spaces (padding, a
// fixed-width dump) 16 s; cut into 256-byte pieces it takes microseconds,
// and the count changes only by a token or so at each cut.
const maxRun = 256

// encodeBounded counts text's tokens, encoding long unbroken runs (of
// whitespace or not) in maxRun-byte pieces (at rune boundaries).
func encodeBounded(tk *bpe.Encoder, text string) int {
	n, start, run, spaces := 0, 0, 0, 0
	for i := 0; i < len(text); {
		r, size := rune(text[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(text[i:])
		}
		cut := false
		if unicode.IsSpace(r) {
			run = 0
			spaces += size
			cut = spaces > maxRun
		} else {
			spaces = 0
			run += size
			cut = run > maxRun
		}
		if cut {
			n += tk.Count(text[start:i])
			start = i
			run, spaces = 0, 0
			continue // r starts the next piece
		}
		i += size
	}
	return n + tk.Count(text[start:])
}
