package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/ctxpress/ctxpress/admin"
	"strconv"
	"unsafe"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/valyala/fasthttp"
)

// Headers that tell the client what ctxpress did, and the ones a client
// sends to steer it.
const (
	HeaderTokensBefore = "X-Ctxpress-Tokens-Before"
	HeaderTokensAfter  = "X-Ctxpress-Tokens-After"
	HeaderConversation = "X-Ctxpress-Conversation"
	HeaderCompacted    = "X-Ctxpress-Compacted"
	// HeaderCompact: "force" compacts this request's conversation now.
	HeaderCompact = "X-Ctxpress-Compact"
	// HeaderEphemeral: "1" marks a side request (a title, a classification)
	// that is never compacted nor recorded.
	HeaderEphemeral = "X-Ctxpress-Ephemeral"
)

// turn is what one understood conversation request did, for the record
// and the log.
type turn struct {
	key   state.Key
	id    rewrite.Identity
	line  lineRef // the line of history it extends
	model string
	// tokensBefore and tokensAfter are calibrated estimates (what the
	// upstream will most likely count), for the headers, metrics and
	// record; rawBefore and rawAfter are tiktoken's counts, for the log
	// and the calibration.
	tokensBefore, tokensAfter int
	rawBefore, rawAfter       int
	squashed, deduped, pruned int
	squashStats               []rewrite.SquashStat // for metrics
	dedupSaved, pruneSaved    int
	applied                   *state.ChainHash // the summary branch applied, nil when none
	// dedups are the forwarded body's (rewrite.Result.Dedups), for the
	// line's next request; forwarded is false when ctxpress answered the
	// turn itself (/compact), which leaves the line's dedups as they were.
	dedups    []history.DedupMark
	prunes    []history.PruneMark // rewrite.Result.Prunes, kept as dedups are
	forwarded bool
	compacted bool
	trigger   int
	ephemeral bool
	// serverHistory: the provider keeps the rest of the history
	// (rewrite.Result.ServerHistory), or compacts this request at the
	// client's asking (ProviderCompacts), so the upstream's count is not
	// of what ctxpress counted and teaches no calibration.
	serverHistory bool
	// refusedWindow is the window, in the upstream's tokens, the upstream
	// showed by refusing the request as too long before it was rescued
	// (0: not refused): its line keeps it (history.Numbers.Window).
	// Not journaled: a crash before the turn is written loses it until
	// the next refusal.
	refusedWindow int
	// precompact, when set, is the turn's input for a background
	// compaction, which starts when the upstream's count confirms
	// precompactPlan (rewrite.Plan.PrecompactAfter).
	precompact     *turnInput
	precompactPlan rewrite.Plan
}

// turnRun is one understood conversation request on its way through the
// handler: what it learnt (record, line) and what it decided to forward.
type turnRun struct {
	t      *turn // &own: one allocation for both
	own    turn
	api    *api // its wire format
	parsed *rewrite.Parsed
	rec    state.Record
	nums   state.Line     // the line's numbers, as the request is judged by them
	res    rewrite.Result // what is forwarded
	// plan is rewrite's word on compacting res (planned again once a
	// compaction before forwarding has run): whether its history may be
	// rewritten at all, and its calibrated estimate.
	plan rewrite.Plan
	// compactable: compaction is on and the request has a record
	// (plan.Compactable).
	compactable bool
	// creds are the client's, for a summary call (see input), read off
	// header (the client's request, alive while the handler runs) when a
	// compaction first needs them: most turns compact nothing.
	header    *fasthttp.RequestHeader
	creds     clientCreds
	credsRead bool
	o         outcome
}

// handleTurn runs the rewrite pipeline on a conversation request of api's
// format (a chat completion, a Responses request): it applies a stored
// summary, compacts when due, cuts to fit when it cannot, forwards the
// result and records what the upstream reported. A body the pipeline does
// not understand is forwarded exactly as sent.
func (s *Server) handleTurn(ctx *fasthttp.RequestCtx, x *exchange, a *api) {
	c, ok := s.prepareTurn(ctx, x, a)
	if !ok {
		s.forward(ctx, x, ctx.Request.Body(), forwardOpts{api: a, cancellable: true})
		return
	}
	t := c.t
	switch {
	case c.compactable:
		s.compactTurn(ctx, c)
	case c.plan.Why != nil: // asked, on history the provider keeps
		s.log.Info().Err(c.plan.Why).Str("conversation", t.id.ID).Msg("compaction not done; forwarding uncompacted")
	}
	if !c.res.CompactCommand {
		s.fitTurn(c, "")
	}
	t.setResult(c.res, c.nums)
	s.answerTurn(x, t)
	if c.res.CompactCommand {
		if c.o.compacted {
			// Recorded as the turn it is: what the conversation costs now.
			t.tokensAfter = c.o.event.TokensAfter
		}
		t.forwarded = false
		setTurnHeaders(&ctx.Response.Header, t, c.o.compacted)
		s.answerCompactCommand(ctx, x, c.api, c.res, c.o)
		s.finish(x)
		return
	}
	if c.res.DropMismatched { // the API takes drop_block only with its beta
		addAnthropicBeta(&ctx.Request.Header, betaThinkingBinding)
	}
	out, retry := c.res.Body, refusalHook(nil)
	if c.res.Stream {
		out, retry = s.askStreamUsage(a, c.res.Body, c.res.Model)
	}
	if pc := t.precompact; pc != nil {
		// Its summary call continues what this turn forwards, so the
		// provider's cache of it holds.
		pc.forwarded, pc.fitDropped = append([]byte(nil), out...), c.res.FitDropped
	}
	s.forward(ctx, x, out, forwardOpts{
		api:         a,
		unstreamed:  a.parseSeesStream && !c.res.Stream,
		cancellable: true,
		retry:       firstHook(retry, s.rescueHook(ctx, c)),
		headers:     func(h *fasthttp.ResponseHeader) { setTurnHeaders(h, t, c.o.compacted) },
	})
}

// setTurnHeaders tells the client what ctxpress did with its request, on
// an upstream's answer and on ctxpress's own answer to "/compact" alike.
func setTurnHeaders(h *fasthttp.ResponseHeader, t *turn, compacted bool) {
	var n [20]byte // the numbers are copied in: no string per answer
	h.SetCanonical(turnHeaderKeys.tokensBefore, strconv.AppendInt(n[:0], int64(t.tokensBefore), 10))
	h.SetCanonical(turnHeaderKeys.tokensAfter, strconv.AppendInt(n[:0], int64(t.tokensAfter), 10))
	h.SetCanonical(turnHeaderKeys.compacted, strconv.AppendBool(n[:0], compacted))
	if t.id.ID != "" {
		// SetCanonical copies the value: a view of the id is enough.
		h.SetCanonical(turnHeaderKeys.conversation, unsafe.Slice(unsafe.StringData(t.id.ID), len(t.id.ID)))
	}
}

// turnHeaderKeys are the turn headers' names, canonical already (as
// fasthttp would write them), so that setting them normalises nothing.
var turnHeaderKeys = struct{ tokensBefore, tokensAfter, compacted, conversation []byte }{
	[]byte(HeaderTokensBefore), []byte(HeaderTokensAfter), []byte(HeaderCompacted), []byte(HeaderConversation),
}

// prepareTurn parses (as api's format) and identifies the request, loads
// its record, finds its line and rewrites it; ok false when the pipeline
// does not understand the body (it is then forwarded as sent).
func (s *Server) prepareTurn(ctx *fasthttp.RequestCtx, x *exchange, a *api) (*turnRun, bool) {
	if s.pipeline == nil {
		return nil, false
	}
	parsed, ok := s.parse(a.format, ctx.Request.Body())
	if !ok {
		return nil, false
	}
	// fasthttp finds a header whatever the case of its name.
	id := s.pipeline.IdentifyParsedFold(func(name string) []byte { return ctx.Request.Header.Peek(name) }, parsed)
	if len(id.Rejected) > 0 {
		s.log.Warn().Strs("sources", id.Rejected).Msg("ignored a conversation id that is too long or not printable")
	}
	c := &turnRun{api: a, parsed: parsed, header: &ctx.Request.Header}
	c.t, c.own = &c.own, turn{id: id, ephemeral: string(ctx.Request.Header.Peek(HeaderEphemeral)) == "1"}
	if id.ID != "" {
		c.t.key = state.Key{Namespace: s.namespaces.of(x.credential), ID: id.ID}
		if s.store != nil {
			var err error
			if s.rec != nil {
				// With its turns still queued for the store.
				c.rec, err = s.rec.read(c.t.key)
			} else {
				c.rec, _, err = s.store.Get(c.t.key)
			}
			if err != nil {
				s.storeFailed("read", "cannot read the conversation record", err)
				s.comp.storeFailing() // state-less for now: no summary to keep
			}
		}
	}
	if c.res, ok = s.rewrite(parsed, s.comp.options(c.rec, state.ChainHash{})); !ok || !c.res.Understood {
		return nil, false
	}
	if c.res.SummaryMiss {
		s.log.Info().Str("conversation", id.ID).Msg("history differs from every stored summary (edited, rewound, or compacted by the provider); no summary applied")
	}
	if id.ID != "" {
		c.t.line, c.nums = lineOf(&c.rec, c.res)
		if len(c.nums.Dedups) > 0 || len(c.nums.Prunes) > 0 {
			// The line's last request deduped or pruned: those stay
			// (sticky), and the minimum applies to what this one adds.
			if again, ok := s.rewrite(parsed, s.comp.options(c.rec, c.t.line.id)); ok {
				c.res = again
			}
		}
	}
	c.t.model, c.t.serverHistory = c.res.Model, c.res.ServerHistory || c.res.ProviderCompacts
	if id.ID != "" && s.comp.on() && !c.t.ephemeral && !c.t.serverHistory &&
		s.comp.sendsPrepared(c.rec, lineKey{key: c.t.key, line: c.t.line.id}, c.nums.Turns+1) {
		s.sendPrepared(c)
	}
	c.plan = s.comp.policy.PlanTurn(s.turnFacts(ctx, c), s.comp.now())
	if c.plan.Compactable {
		c.compactable = true
		c.t.trigger = c.plan.Trigger
	}
	return c, true
}

// sendPrepared sends from c's request on the summary a precompaction
// prepared for it (compactions.sendPrepared), judged, as every request
// is, by the record with the turns still queued folded in.
func (s *Server) sendPrepared(c *turnRun) {
	ti := c.input(c.res)
	if !s.comp.sendPrepared(&ti) {
		return
	}
	rec := ti.rec
	if s.rec != nil {
		if folded, err := s.rec.read(c.t.key); err == nil {
			rec = folded
		}
	}
	if res, ok := s.rewrite(c.parsed, s.comp.options(rec, c.t.line.id)); ok && res.Understood {
		c.rec, c.res = rec, res
	}
}

// input is c's compaction input with res as the request to compact. It is
// made when a compaction needs it, not on every turn: it holds a copy of
// the record, the line's numbers and the result (a kilobyte and more).
func (c *turnRun) input(res rewrite.Result) turnInput {
	if !c.credsRead {
		c.creds, c.credsRead = credsOf(c.header), true
	}
	return turnInput{api: c.api, key: c.t.key, rec: c.rec, line: c.t.line, nums: c.nums, parsed: c.parsed, res: res,
		trigger: c.t.trigger, creds: c.creds}
}

// turnFacts are what rewrite plans c's compaction from.
func (s *Server) turnFacts(ctx *fasthttp.RequestCtx, c *turnRun) rewrite.TurnFacts {
	return rewrite.TurnFacts{Model: c.res.Model, Tokens: c.res.TokensAfter, Line: c.nums.Numbers,
		Identified: c.t.id.ID != "", Ephemeral: c.t.ephemeral, ServerHistory: c.res.ServerHistory,
		ProviderCompacts: c.res.ProviderCompacts,
		Manual:           bytes.EqualFold(ctx.Request.Header.Peek(HeaderCompact), []byte("force")) || c.rec.ForceNext || c.res.CompactCommand,
		Command:          c.res.CompactCommand, StoreFailedAt: s.comp.lastStoreFailure(),
		Economics: s.comp.compactionEconomics(c.nums.Numbers), SummaryReusesCache: s.comp.summariserIsOwn(c.res.Model)}
}

// compactTurn compacts the request when its plan says now, and prepares a
// background compaction when the plan (made again after a compaction now)
// says so.
func (s *Server) compactTurn(ctx *fasthttp.RequestCtx, c *turnRun) {
	if c.plan.Action == rewrite.ActNone {
		c.o.err = c.plan.Why
		s.reportCompactionError(c)
		return
	}
	// The request as it came: a compaction now replaces c.res, and a
	// background one after it starts from the request again.
	ti := c.input(c.res)
	if c.plan.Action == rewrite.ActNow {
		facts := s.turnFacts(ctx, c)
		c.res, c.o = s.comp.maybeCompact(ti, c.plan.Kind)
		c.t.compacted = c.o.compacted && !c.o.joined
		facts.Tokens, facts.AfterNow, facts.Compacted = c.res.TokensAfter, true, c.o.compacted
		c.plan = s.comp.policy.PlanTurn(facts, s.comp.now())
	}
	s.reportCompactionError(c)
	if c.plan.Action == rewrite.ActBackground {
		// The body is gone once the handler returns; the background
		// compaction parses its own copy.
		ti.body, ti.parsed = append([]byte(nil), ctx.Request.Body()...), nil
		c.t.precompact, c.t.precompactPlan = &ti, c.plan
	}
}

// reportCompactionError logs why c's compaction was not done, if it was
// not, at the level the reason deserves.
func (s *Server) reportCompactionError(c *turnRun) {
	switch {
	case errors.Is(c.o.err, errStoreFailing):
		// A broken disk is reported once per interval, not per turn.
		// Not counted again: the failed write that paused it was.
		s.warn.warn(s.cfg.Clock(), s.log, "compaction paused while the conversation store fails", c.o.err)
	case errors.Is(c.o.err, rewrite.ErrSkipped):
		// Too little to reclaim, nothing outside the raw tail, breaker or
		// backoff: the compaction event already says so, at info; a warning
		// on every turn of a conversation near its trigger would be noise.
		s.log.Debug().Err(c.o.err).Str("conversation", c.t.id.ID).Msg("compaction not done; forwarding uncompacted")
	case c.o.err != nil:
		s.log.Warn().Err(c.o.err).Str("conversation", c.t.id.ID).Msg("compaction not done; forwarding uncompacted")
	}
}

// setResult sets what t forwards: res, with its estimates calibrated by
// the line's numbers nums.
func (t *turn) setResult(res rewrite.Result, nums state.Line) {
	t.model, t.rawBefore, t.rawAfter = res.Model, res.TokensBefore, res.TokensAfter
	// One estimator for both (Calibration.Upstream, monotone in the raw
	// count): a rewrite that took tokens out never reads as one that
	// added some.
	t.tokensBefore, t.tokensAfter = nums.Calibration.Upstream(res.TokensBefore), nums.Calibration.Upstream(res.TokensAfter)
	t.squashed, t.deduped, t.pruned = res.Squashed, res.Deduped, res.Pruned
	t.squashStats, t.dedupSaved, t.pruneSaved = res.SquashStats, res.DedupSavedTokens, res.PruneSavedTokens
	t.applied = nil
	if h, ok := res.AppliedHash(); ok {
		applied := state.ChainHash(h)
		t.applied = &applied
	}
	t.dedups = append(t.dedups[:0], res.Dedups...)
	t.prunes = append(t.prunes[:0], res.Prunes...)
	t.forwarded = true
}

// parse validates and reads the body, as format's, once for every later
// step; a panic inside it is logged and the request goes upstream as the
// client sent it (ok false).
func (s *Server) parse(format wire.Format, body []byte) (parsed *rewrite.Parsed, ok bool) {
	defer s.recoverPipeline(&ok)
	return s.pipeline.Parse(format, body), true
}

// rewrite runs the pipeline, with parse's safety net.
func (s *Server) rewrite(parsed *rewrite.Parsed, opts rewrite.Options) (res rewrite.Result, ok bool) {
	defer s.recoverPipeline(&ok)
	return s.pipeline.RewriteParsed(parsed, opts), true
}

func (s *Server) recoverPipeline(ok *bool) {
	if p := recover(); p != nil {
		s.log.Error().Str("panic", fmt.Sprint(p)).Msg("rewrite failed; forwarding the request unchanged")
		*ok = false
	}
}

// answerTurn makes t the turn x answers, which finish records.
func (s *Server) answerTurn(x *exchange, t *turn) {
	x.turn = t
	if s.recordable(t) {
		s.rec.answer() // until finish queues it
	}
}

// recordable reports whether t's answer is recorded when it succeeds: it
// has a conversation and is not a side request, and there is a store.
func (s *Server) recordable(t *turn) bool {
	return s.rec != nil && t.id.ID != "" && !t.ephemeral
}

// finish is the one way a request ends, once, whoever answered it (the
// upstream, ctxpress's own /compact reply or error, a refused client key,
// the 500 of a recovered panic): it returns the request's upstream client and gate
// share, counts it in the metrics, records an understood turn that was
// answered (which emits its turn event once written), starts a
// precompaction when the turn's plan and the upstream's count say so, and
// writes the access-log line.
func (s *Server) finish(x *exchange) {
	x.finished = true
	s.releaseUpstreamClient(x)
	if x.gate != nil {
		x.gate()
		x.gate = nil
	}
	t := x.turn
	s.metrics.Exchange(exchangeOf(x))
	if t != nil && s.recordable(t) {
		if x.status >= 200 && x.status < 300 && x.err == nil {
			tr := turnRecord{turn: *t, usage: x.usage}
			// The precompaction's body copy is for precompact below; a queued
			// record must not pin it (up to a thousand queued bodies under load).
			tr.turn.precompact = nil
			s.rec.record(tr)
			if pc := t.precompact; pc != nil && t.precompactPlan.PrecompactAfter(x.usage.InputTokens, x.usage.Found && !x.usage.ServerCompacted) {
				s.comp.precompact(*pc)
			}
		}
		s.rec.answered()
	}
	s.logExchange(x)
}

// exchangeOf is x as the metrics count it: a conversation request's turn
// only when the upstream answered it 2xx (the rule of the record).
func exchangeOf(x *exchange) admin.Exchange {
	e := admin.Exchange{Path: x.path, Status: x.status, Upstream: x.upstream}
	if t := x.turn; t != nil && x.status >= 200 && x.status < 300 && x.err == nil {
		e.Turn = &admin.Turn{Model: t.model, TokensBefore: t.tokensBefore, TokensAfter: t.tokensAfter,
			Squashed: t.squashStats, Deduped: t.deduped, DedupSaved: t.dedupSaved, Pruned: t.pruned, PruneSaved: t.pruneSaved,
			Usage: callUsage(x.usage), UsageFound: x.usage.Found}
	}
	return e
}
