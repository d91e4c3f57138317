package proxy

import (
	"bufio"
	"bytes"
	"strconv"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/compaction"
	"github.com/ctxpress/ctxpress/internal/geminipath"
	"github.com/ctxpress/ctxpress/turn"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/gemini"
	"github.com/ctxpress/ctxpress/wire/messages"
)

// Headers that tell the client what ctxpress did, and the ones a client
// sends to steer it.
const (
	HeaderTokensBefore = "X-Ctxpress-Tokens-Before"
	HeaderTokensAfter  = "X-Ctxpress-Tokens-After"
	HeaderConversation = "X-Ctxpress-Conversation"
	HeaderCompacted    = "X-Ctxpress-Compacted"
	// HeaderCompact: "force" compacts this request's conversation now.
	HeaderCompact = turn.HeaderCompact
	// HeaderEphemeral: "1" marks a side request (a title, a classification)
	// that is never compacted nor recorded.
	HeaderEphemeral = turn.HeaderEphemeral
)

// handleTurn serves a conversation request of api's format (a chat
// completion, a Responses or Messages request) as a turn: the turn runs
// its phases up to forwarding (turn.Turns.Begin), the shell forwards the
// body it gives, hands it a refusal to rescue, and finishes it with the
// answer's status and usage (finish). A body the pipeline does not
// understand is forwarded exactly as sent.
func (s *Server) handleTurn(ctx *fasthttp.RequestCtx, x *exchange, a *api) {
	t, ok := s.turns.Begin(a.turnOf(ctx.Path()), ctx.Request.Body(), (*requestHeader)(&ctx.Request.Header), s.namespaces.of(x.credential))
	if !ok {
		s.forward(ctx, x, ctx.Request.Body(), forwardOpts{api: a, cancellable: true})
		return
	}
	x.turn = t
	if text, ok := t.CompactReply(); ok {
		setTurnHeaders(&ctx.Response.Header, t)
		s.answerOwn(ctx, x, a, t, text)
		s.finish(x)
		return
	}
	if t.DropMismatched() { // the API takes drop_block only with its beta
		addAnthropicBeta(&ctx.Request.Header, messages.BetaThinkingBinding)
	}
	out, retry := t.Body(), refusalHook(nil)
	if t.Stream() && t.Rewrites() {
		out, retry = s.askStreamUsage(a, out, t.Model())
	}
	t.Sent(out)
	s.forward(ctx, x, out, forwardOpts{
		api:         a,
		unstreamed:  a.parseSeesStream && !t.Stream(),
		cancellable: true,
		retry:       firstHook(retry, s.rescueHook(ctx, a, t)),
		answered:    t.AnswerHook(),
		headers: func(h *fasthttp.ResponseHeader) {
			t.WaitKept() // the agent may ask for an original as soon as it reads the answer
			setTurnHeaders(h, t)
		},
	})
}

// rescueHook is the retry hook of a conversation request: an answer that
// refuses it as longer than the model's window, before any of it was
// relayed, is the turn's to rescue (turn.Turn.Refused); the body it sends
// once more asks for its stream's usage as the first did, and one that
// now asks drop_block goes with its beta, on ctx's request the retry is
// built from.
func (s *Server) rescueHook(ctx *fasthttp.RequestCtx, a *api, t *turn.Turn) refusalHook {
	if !t.Rescues() {
		return nil
	}
	return func(status int, _ *fasthttp.ResponseHeader, answer []byte) ([]byte, bool) {
		out, ok := t.Refused(status, answer)
		if !ok {
			return nil, false
		}
		if t.DropMismatched() {
			addAnthropicBeta(&ctx.Request.Header, messages.BetaThinkingBinding)
		}
		if t.Stream() {
			out, _ = s.askStreamUsage(a, out, t.Model())
		}
		return out, true
	}
}

// firstHook asks a, then b: the first that retries wins. A nil hook is
// skipped.
func firstHook(a, b refusalHook) refusalHook {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(status int, h *fasthttp.ResponseHeader, body []byte) ([]byte, bool) {
		if next, ok := a(status, h, body); ok {
			return next, true
		}
		return b(status, h, body)
	}
}

// setTurnHeaders tells the client what ctxpress did with its request, on
// an upstream's answer and on ctxpress's own answer to "/compact" alike.
func setTurnHeaders(h *fasthttp.ResponseHeader, t *turn.Turn) {
	var n [20]byte // the numbers are copied in: no string per answer
	h.SetCanonical(turnHeaderKeys.tokensBefore, strconv.AppendInt(n[:0], int64(t.TokensBefore()), 10))
	h.SetCanonical(turnHeaderKeys.tokensAfter, strconv.AppendInt(n[:0], int64(t.TokensAfter()), 10))
	h.SetCanonical(turnHeaderKeys.compacted, strconv.AppendBool(n[:0], t.Compacted()))
	if id := t.ID(); id != "" {
		// SetCanonical copies the value: a view of the id is enough.
		h.SetCanonical(turnHeaderKeys.conversation, unsafe.Slice(unsafe.StringData(id), len(id)))
	}
}

// turnHeaderKeys are the turn headers' names, canonical already (as
// fasthttp would write them), so that setting them normalises nothing.
var turnHeaderKeys = struct{ tokensBefore, tokensAfter, compacted, conversation []byte }{
	[]byte(HeaderTokensBefore), []byte(HeaderTokensAfter), []byte(HeaderCompacted), []byte(HeaderConversation),
}

// answerOwn answers a turn ctxpress answers itself ("/compact") with
// text, in the client's format (api) and stream mode, without a
// completion call; the caller ends the request (finish).
func (s *Server) answerOwn(ctx *fasthttp.RequestCtx, x *exchange, a *api, t *turn.Turn, text string) {
	stream := t.Stream()
	var reply wire.Reply
	if stream && a.arrayReply != nil && !gemini.SSEAsked(ctx.URI().QueryString()) {
		reply = a.arrayReply(t.Model(), text, time.Now())
	} else {
		reply = a.reply(t.Model(), text, stream, time.Now())
	}
	x.status = fasthttp.StatusOK
	ctx.SetContentType(reply.ContentType)
	x.bytesOut = int64(len(reply.Body))
	if !stream {
		ctx.SetBody(reply.Body)
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		_, _ = w.Write(reply.Body)
		_ = w.Flush()
	})
	x.stream = true
}

// finish is the one way a request ends, once, whoever answered it (the
// upstream, ctxpress's own /compact reply or error, a refused client key,
// the 500 of a recovered panic): it returns the request's upstream client
// and gate share, counts it in the metrics, finishes its turn (recorded
// when answered 2xx, which emits its turn event once written; a
// precompaction started when its plan and the upstream's count say so),
// and writes the access-log line.
func (s *Server) finish(x *exchange) {
	x.finished = true
	s.releaseUpstreamClient(x)
	if x.gate != nil {
		x.gate()
		x.gate = nil
	}
	answered := x.status >= 200 && x.status < 300 && x.err == nil
	e := admin.Exchange{Path: x.path, Status: x.status, Upstream: x.upstream}
	if t := x.turn; t != nil {
		if answered {
			e.Turn = t.Metrics(x.usage)
			s.admin.Keep(t.Describe())
		}
		t.Finish(answered, x.usage)
	}
	s.metrics.Exchange(e)
	s.logExchange(x)
}

// requestHeader is the client's request header as a turn reads it
// (turn.Header).
type requestHeader fasthttp.RequestHeader

// Peek finds a header whatever the case of its name.
func (h *requestHeader) Peek(name string) []byte { return (*fasthttp.RequestHeader)(h).Peek(name) }

// Creds are what a summary call to the conversation's own upstream
// carries from the conversation's request: the client's credentials
// (Authorization, and Anthropic's x-api-key), and the anthropic-version and
// anthropic-beta they are used under, several anthropic-beta headers
// joined, in order, as one list. The betas go along as sent: a beta only
// opens features, which the summary body uses none of, and some
// credentials need theirs (an OAuth token is refused without
// oauth-2025-04-20). ctxpress's own keys were removed from the request
// before (authenticate): they never reach a summary call.
func (h *requestHeader) Creds() compaction.Creds {
	rh := (*fasthttp.RequestHeader)(h)
	_, query, _ := bytes.Cut(rh.RequestURI(), []byte("?"))
	return compaction.Creds{
		Authorization: string(rh.Peek(fasthttp.HeaderAuthorization)),
		APIKey:        string(rh.Peek(HeaderAPIKey)),
		Version:       string(rh.Peek(messages.HeaderVersion)),
		Beta:          string(bytes.Join(rh.PeekAll(messages.HeaderBeta), []byte(","))),
		GoogleKey:     geminipath.KeyOf(rh.Peek(geminipath.HeaderAPIKey), query),
	}
}

// addAnthropicBeta makes the request's anthropic-beta headers name beta,
// as one header of the client's betas and beta (messages.WithBeta).
func addAnthropicBeta(h *fasthttp.RequestHeader, beta string) {
	var values []string
	for _, v := range h.PeekAll(messages.HeaderBeta) {
		values = append(values, string(v))
	}
	if merged, added := messages.WithBeta(values, beta); added {
		h.Del(messages.HeaderBeta)
		h.Set(messages.HeaderBeta, merged)
	}
}
