package proxy

import (
	"strconv"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
	"github.com/valyala/fasthttp"
)

// Response headers that tell the client what ctxpress did.
const (
	HeaderTokensBefore = "X-Ctxpress-Tokens-Before"
	HeaderTokensAfter  = "X-Ctxpress-Tokens-After"
	HeaderConversation = "X-Ctxpress-Conversation"
	HeaderCompacted    = "X-Ctxpress-Compacted"
)

// turn is what one understood chat request did, for the record and the log.
type turn struct {
	key                       state.Key
	id                        rewrite.Identity
	model                     string
	tokensBefore, tokensAfter int
	squashed, deduped         int
}

// handleChat runs the rewrite pipeline on a chat completion, forwards the
// result and records what the upstream reported. A body the pipeline does
// not understand is forwarded exactly as sent.
func (s *Server) handleChat(ctx *fasthttp.RequestCtx, x *exchange) {
	body := ctx.Request.Body()
	if s.pipeline == nil {
		s.forward(ctx, x, body, forwardOpts{readUsage: true})
		return
	}
	id := s.pipeline.Identify(func(name string) []byte { return ctx.Request.Header.Peek(name) }, body)
	if len(id.Rejected) > 0 {
		s.log.Warn().Strs("sources", id.Rejected).Msg("ignored a conversation id that is too long or not printable")
	}
	res := s.pipeline.Rewrite(body)
	if !res.Understood {
		s.forward(ctx, x, body, forwardOpts{readUsage: true})
		return
	}
	t := &turn{
		id: id, model: res.Model,
		tokensBefore: res.TokensBefore, tokensAfter: res.TokensAfter,
		squashed: res.Squashed, deduped: res.Deduped,
	}
	if id.ID != "" {
		t.key = state.NewKey(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization), id.ID)
	}
	x.turn = t
	out, injected := res.Body, false
	if res.Stream {
		out, injected = rewrite.EnsureStreamUsage(out)
	}
	s.forward(ctx, x, out, forwardOpts{
		readUsage:  true,
		stripUsage: injected,
		headers: func(h *fasthttp.ResponseHeader) {
			h.Set(HeaderTokensBefore, strconv.Itoa(t.tokensBefore))
			h.Set(HeaderTokensAfter, strconv.Itoa(t.tokensAfter))
			h.Set(HeaderCompacted, "false")
			if id.ID != "" {
				h.Set(HeaderConversation, id.ID)
			}
		},
	})
}

// finish ends a request: it records an understood chat turn the upstream
// answered, then writes the access-log line.
func (s *Server) finish(x *exchange) {
	if t := x.turn; t != nil && s.rec != nil && t.id.ID != "" && x.status >= 200 && x.status < 300 && x.err == nil {
		s.rec.record(turnRecord{turn: *t, usage: x.usage})
	}
	s.logExchange(x)
}
