package rewrite

import (
	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/wire"
)

// Parsed is a request body validated and read once, by the adapter of its
// wire format. The proxy identifies the conversation, rewrites the request
// and, after a compaction, rewrites it again; with a Parsed those steps
// share one scan of the body instead of validating and walking its
// megabytes of history each time. It is read-only once made, and valid
// only while the body it was made from is.
type Parsed struct {
	body   []byte
	valid  bool               // the body is JSON
	conv   *wire.Conversation // its conversation, when understood
	format wire.Format        // the adapter that read it; nil: none
	chat   bool               // a request of the format (chat: an object with a `messages` array)
	// prior is the remembered parse this one continued, its first shared
	// messages being prior's; memo is where this parse is remembered (nil:
	// it is not), the next one's prior.
	prior, memo *memoParse
	shared      int
}

// Parse validates body and reads the conversation out of it with the
// adapter f (nil: the body is only validated, and not understood).
func Parse(f wire.Format, body []byte) *Parsed {
	p := &Parsed{body: body, format: f}
	if !jsonvalid.Valid(body) {
		return p
	}
	p.valid = true
	if f != nil {
		p.conv, p.chat = f.Parse(body)
	}
	return p
}

// Body returns the bytes p was made from.
func (p *Parsed) Body() []byte { return p.body }

// request is a conversation with its format and the counter of its
// encoding: what every step reads.
type request struct {
	*wire.Conversation
	f     wire.Format
	count wire.Count
}

// priorAnalysis is the analysis kept with the parse p continued, when it
// counted with enc, and how many of p's first messages it covers.
func (p *Parsed) priorAnalysis(enc Encoding) (*analysis, int) {
	if p.prior == nil {
		return nil, 0
	}
	kept := p.prior.analysis.Load()
	if kept == nil || kept.enc != enc {
		return nil, 0
	}
	return kept.a, min(p.shared, len(kept.a.facts))
}
