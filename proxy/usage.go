package proxy

import (
	"bytes"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/ctxpress/ctxpress/internal/hop"
	"github.com/ctxpress/ctxpress/wire"
)

// usageFromBody reads usage from a whole (non-streamed) JSON answer of
// api's format, decoding a compressed body on a side copy (at most
// maxDecodedAnswer bytes of it); the client still gets the original bytes.
func usageFromBody(api *api, body []byte, contentEncoding []byte) wire.Usage {
	plain, err := decodeBody(body, contentEncoding, maxDecodedAnswer)
	if err != nil {
		return wire.Usage{}
	}
	return api.usageFromJSON(plain)
}

// maxDecodedAnswer bounds what decoding a compressed answer may produce: a
// few megabytes of JSON compress to little, and a body that inflates past
// this is not an answer worth reading.
const maxDecodedAnswer = 4 * maxWholeAnswer

// decodeBody decodes body from its Content-Encoding (gzip, deflate, br,
// zstd; identity or none as it is), producing at most limit bytes.
func decodeBody(body, encoding []byte, limit int) ([]byte, error) {
	enc := bytes.ToLower(hop.TrimOWS(encoding))
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
