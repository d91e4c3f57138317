package rewrite

import "github.com/ctxpress/ctxpress/internal/jsonvalid"

// Parsed is a request body validated and read once. The proxy identifies
// the conversation, rewrites the request and, after a compaction, rewrites
// it again; with a Parsed those steps share one scan of the body instead of
// validating and walking its megabytes of history each time. It is
// read-only once made, and valid only while the body it was made from is.
type Parsed struct {
	body  []byte
	valid bool    // the body is JSON
	req   request // its fields, when valid
	chat  bool    // an object with a `messages` array
}

// Parse validates body and reads the fields ctxpress uses out of it.
func Parse(body []byte) *Parsed {
	p := &Parsed{body: body}
	if !jsonvalid.Valid(body) {
		return p
	}
	p.valid = true
	p.req, p.chat = parseRequest(body)
	return p
}

// Body returns the bytes p was made from.
func (p *Parsed) Body() []byte { return p.body }
