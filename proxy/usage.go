package proxy

import (
	"bytes"
	"errors"

	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// Usage is what the upstream reported about one completion.
type Usage struct {
	// InputTokens is usage.prompt_tokens, or usage.input_tokens for
	// servers speaking the Responses naming; cached tokens are included, as
	// the upstream counts them.
	InputTokens  int
	OutputTokens int
	CachedTokens int
	// Found reports whether the answer carried usage at all.
	Found bool
}

// parseUsage reads a "usage" object; a missing or null one gives Found=false.
func parseUsage(u gjson.Result) Usage {
	if !u.IsObject() {
		return Usage{}
	}
	in := u.Get("prompt_tokens")
	if !in.Exists() {
		in = u.Get("input_tokens")
	}
	if !in.Exists() {
		return Usage{}
	}
	out := u.Get("completion_tokens")
	if !out.Exists() {
		out = u.Get("output_tokens")
	}
	cached := u.Get("prompt_tokens_details.cached_tokens")
	if !cached.Exists() {
		cached = u.Get("input_tokens_details.cached_tokens")
	}
	return Usage{InputTokens: int(in.Int()), OutputTokens: int(out.Int()), CachedTokens: int(cached.Int()), Found: true}
}

// usageFromBody reads usage from a whole (non-streamed) JSON answer, decoding
// a compressed body on a side copy (at most maxDecodedAnswer bytes of it);
// the client still gets the original bytes.
func usageFromBody(body []byte, contentEncoding []byte) Usage {
	plain, err := decodeBody(body, contentEncoding, maxDecodedAnswer)
	if err != nil || !jsonvalid.Valid(plain) {
		return Usage{}
	}
	return parseUsage(gjson.GetBytes(plain, "usage"))
}

// maxDecodedAnswer bounds what decoding a compressed answer may produce: a
// few megabytes of JSON compress to little, and a body that inflates past
// this is not a chat completion worth reading.
const maxDecodedAnswer = 4 * maxWholeAnswer

// decodeBody decodes body from its Content-Encoding (gzip, deflate, br,
// zstd; identity or none as it is), producing at most limit bytes.
func decodeBody(body, encoding []byte, limit int) ([]byte, error) {
	enc := bytes.ToLower(trimSpace(encoding))
	switch string(enc) {
	case "", "identity":
		return body, nil
	case "x-gzip":
		enc = []byte("gzip")
	}
	r := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(r)
	r.Header.SetContentEncodingBytes(enc)
	r.SetBodyRaw(body)
	plain, err := r.BodyUncompressedWithLimit(limit)
	if errors.Is(err, fasthttp.ErrContentEncodingUnsupported) {
		return body, nil
	}
	if err != nil {
		return nil, err
	}
	// plain may be r's own buffer (or body itself), which Release recycles.
	return append([]byte(nil), plain...), nil
}

// maxSSELine bounds the partial line sseUsage keeps between reads; a longer
// line cannot be a usage chunk worth reading and is skipped.
const maxSSELine = 4 << 20

// sseUsage watches a side copy of an SSE stream for usage. It never changes
// the bytes the client gets. Lines end with "\r\n", "\n" or a lone "\r"
// (mixed, as the spec allows), and may be split across reads at any byte.
type sseUsage struct {
	partial  []byte
	skipping bool // inside a line longer than maxSSELine
	afterCR  bool // the last byte was a CR: a LF next ends no new line
	usage    Usage
}

// observe feeds the next bytes of the stream.
func (s *sseUsage) observe(p []byte) {
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

func (s *sseUsage) line(line []byte) {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok || !bytes.Contains(data, []byte(`"usage"`)) {
		return
	}
	data = bytes.TrimSpace(data)
	if !jsonvalid.Valid(data) {
		return
	}
	if u := parseUsage(gjson.GetBytes(data, "usage")); u.Found {
		s.usage = u
	}
}
