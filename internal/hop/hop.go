// Package hop removes the hop-by-hop headers of a request or an answer a
// proxy forwards: the headers that describe one connection (RFC 9110
// section 7.6.1), and those a Connection header names.
package hop

import (
	"bytes"

	"github.com/valyala/fasthttp"
)

// Headers are hop-by-hop headers (RFC 9110 section 7.6.1, plus the older
// ones net/http/httputil also drops): they describe one connection and are
// never forwarded. Headers named in a Connection header are dropped too.
var Headers = [...]string{
	"Connection",
	"Proxy-Connection",
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
}

// Set is a set of Headers, bit i for Headers[i].
type Set uint16

// All is every hop-by-hop header: what a header that cannot be read
// ahead may hold.
const All = Set(1)<<len(Headers) - 1

// Header is a request's or an answer's header.
type Header interface {
	Peek(string) []byte
	Del(string)
	DelBytes([]byte)
}

// Remove drops the hop-by-hop headers of set, and those a Connection
// header names when set holds Connection. Deleting an absent header costs
// as much as deleting a present one (a key normalised, the fields
// scanned), so the caller passes the ones present (OfRequest, OfAnswer).
func Remove(h Header, set Set) {
	if set&1 != 0 { // Headers[0]: Connection
		if c := h.Peek(fasthttp.HeaderConnection); len(c) > 0 {
			// Read in place, no copies: deleting other headers leaves the
			// Connection value's bytes where they are.
			for rest := c; len(rest) > 0; {
				var name []byte
				name, rest, _ = bytes.Cut(rest, []byte(","))
				if name = TrimOWS(name); len(name) > 0 {
					h.DelBytes(name)
				}
			}
		}
	}
	for i, name := range Headers {
		if set&(1<<i) != 0 {
			h.Del(name)
		}
	}
}

// OfRequest is the set of hop-by-hop headers in the client's request h,
// read from the raw header block it was parsed from: Connection too when
// the connection is to close without one (HTTP/1.0), and all of them when
// the block is gone or a trailer may follow (a body of unknown length).
func OfRequest(h *fasthttp.RequestHeader) Set {
	raw := h.RawHeaders()
	if len(raw) == 0 || h.ContentLength() < 0 {
		return All
	}
	var set Set
	if h.ConnectionClose() {
		set |= 1
	}
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		// A folded line's continuation (a space or tab first) names nothing.
		if len(line) == 0 || line[0] == ' ' || line[0] == '\t' {
			continue
		}
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			set |= Of(TrimOWS(line[:i]))
		}
	}
	return set
}

// OfAnswer is OfRequest for an upstream answer's headers, which keep no
// raw block: their fields are visited instead.
func OfAnswer(h *fasthttp.ResponseHeader) Set {
	if h.ContentLength() < 0 {
		return All
	}
	var set Set
	if h.ConnectionClose() {
		set |= 1
	}
	for name := range h.All() {
		set |= Of(name)
	}
	return set
}

// Of is the set of the one hop-by-hop header called name (any case), or
// the empty set.
func Of(name []byte) Set {
	switch len(name) {
	case 2, 7, 10, 16, 17, 18, 19: // the lengths of Headers' names
	default:
		return 0
	}
	for i, h := range Headers {
		if equalFold(name, h) {
			return 1 << i
		}
	}
	return 0
}

// equalFold is strings.EqualFold for ASCII names.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c, d := b[i], s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// TrimOWS is b without HTTP's optional whitespace (spaces and tabs) at
// either end.
func TrimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}
