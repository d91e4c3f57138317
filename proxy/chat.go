package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
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

// turn is what one understood chat request did, for the record and the log.
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
	squashed, deduped         int
	squashStats               []rewrite.SquashStat // for metrics
	dedupSaved                int
	applied                   *state.ChainHash // the summary branch applied, nil when none
	// dedups are the forwarded body's (rewrite.Result.Dedups), for the
	// line's next request; forwarded is false when ctxpress answered the
	// turn itself (/compact), which leaves the line's dedups as they were.
	dedups    []state.DedupMark
	forwarded bool
	compacted bool
	trigger   int
	ephemeral bool
	// precompact, when set, is the turn's input for a background
	// compaction once the upstream has said how big the request was.
	precompact *turnInput
}

// handleChat runs the rewrite pipeline on a chat completion (applying a
// stored summary, compacting when due), forwards the result and records
// what the upstream reported. A body the pipeline does not understand is
// forwarded exactly as sent.
func (s *Server) handleChat(ctx *fasthttp.RequestCtx, x *exchange) {
	body := ctx.Request.Body()
	if s.pipeline == nil {
		s.forward(ctx, x, body, forwardOpts{readUsage: true, cancellable: true})
		return
	}
	parsed, ok := s.parse(body)
	if !ok {
		s.forward(ctx, x, body, forwardOpts{readUsage: true, cancellable: true})
		return
	}
	id := s.pipeline.IdentifyParsed(func(name string) []byte { return ctx.Request.Header.Peek(name) }, parsed)
	if len(id.Rejected) > 0 {
		s.log.Warn().Strs("sources", id.Rejected).Msg("ignored a conversation id that is too long or not printable")
	}
	t := &turn{id: id, ephemeral: string(ctx.Request.Header.Peek(HeaderEphemeral)) == "1"}
	var rec state.Record
	if id.ID != "" {
		t.key = state.NewKey(x.credential, id.ID)
		if s.store != nil {
			var err error
			if rec, _, err = s.store.Get(t.key); err != nil {
				s.storeFailed("cannot read the conversation record", err)
			}
			if s.rec != nil {
				s.rec.overlay(t.key, &rec)
			}
		}
	}
	res, ok := s.rewrite(parsed, s.comp.options(rec, state.ChainHash{}))
	if !ok || !res.Understood {
		s.forward(ctx, x, body, forwardOpts{readUsage: true, cancellable: true})
		return
	}
	if res.SummaryMiss {
		s.log.Info().Str("conversation", id.ID).Msg("history differs from every stored summary (edited or rewound); no summary applied")
	}
	var nums state.Line
	if id.ID != "" {
		t.line, nums = lineOf(&rec, res)
		if len(nums.Dedups) > 0 {
			// The line's last request deduped: those dedups stay (sticky),
			// and the minimum applies to what this one adds.
			if again, ok := s.rewrite(parsed, s.comp.options(rec, t.line.id)); ok {
				res = again
			}
		}
	}
	var o outcome
	if s.comp.cfg.Enabled && id.ID != "" && s.store != nil && !t.ephemeral {
		t.trigger = s.comp.cfg.Trigger.Trigger(res.Model)
		ti := turnInput{key: t.key, rec: rec, line: t.line, nums: nums, parsed: parsed, res: res, trigger: t.trigger,
			authorization: string(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization))}
		force := bytes.EqualFold(ctx.Request.Header.Peek(HeaderCompact), []byte("force")) || rec.ForceNext || res.CompactCommand
		res, o = s.comp.maybeCompact(ti, force)
		t.compacted = o.compacted && !o.joined
		switch {
		case errors.Is(o.err, errStoreFailing):
			// A broken disk is reported once per interval, not per turn.
			s.storeFailed("compaction paused while the conversation store fails", o.err)
		case o.err != nil:
			s.log.Warn().Err(o.err).Str("conversation", id.ID).Msg("compaction not done; forwarding uncompacted")
		}
		if s.comp.cfg.Precompact && !o.compacted && !res.CompactCommand {
			effective := calibrated(res.TokensAfter, nums)
			if float64(effective) >= 0.9*s.comp.cfg.precompactRatio()*float64(t.trigger) {
				// The body is gone once the handler returns; the background
				// compaction parses its own copy.
				ti.body, ti.parsed = append([]byte(nil), body...), nil
				t.precompact = &ti
			}
		}
	}
	t.model, t.rawBefore, t.rawAfter = res.Model, res.TokensBefore, res.TokensAfter
	t.tokensAfter = calibrated(res.TokensAfter, nums)
	t.tokensBefore = t.tokensAfter
	if res.TokensBefore != res.TokensAfter {
		t.tokensBefore = scaled(res.TokensBefore, calibrationOf(nums))
	}
	t.squashed, t.deduped = res.Squashed, res.Deduped
	t.squashStats, t.dedupSaved = res.SquashStats, res.DedupSavedTokens
	if h, ok := res.AppliedHash(); ok {
		applied := state.ChainHash(h)
		t.applied = &applied
	}
	for _, d := range res.Dedups {
		t.dedups = append(t.dedups, state.DedupMark{Index: d.Index, Digest: d.Digest})
	}
	t.forwarded = !res.CompactCommand
	x.turn = t
	if res.CompactCommand {
		if o.compacted {
			// Recorded as the turn it is: what the conversation costs now.
			t.tokensAfter = o.event.TokensAfter
		}
		s.answerCompactCommand(ctx, x, res, o)
		return
	}
	out, retry := res.Body, refusalHook(nil)
	if res.Stream {
		out, retry = s.askStreamUsage(res.Body, res.Model)
	}
	s.forward(ctx, x, out, forwardOpts{
		readUsage:   true,
		cancellable: true,
		retry:       retry,
		headers: func(h *fasthttp.ResponseHeader) {
			h.Set(HeaderTokensBefore, strconv.Itoa(t.tokensBefore))
			h.Set(HeaderTokensAfter, strconv.Itoa(t.tokensAfter))
			h.Set(HeaderCompacted, strconv.FormatBool(o.compacted))
			if id.ID != "" {
				h.Set(HeaderConversation, id.ID)
			}
		},
	})
}

// parse validates and reads the body once for every later step; a panic
// inside it is logged and the request goes upstream as the client sent it
// (ok false).
func (s *Server) parse(body []byte) (parsed *rewrite.Parsed, ok bool) {
	defer s.recoverPipeline(&ok)
	return rewrite.Parse(body), true
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

// finish ends a request: it records an understood chat turn the upstream
// answered, starts a precompaction when the turn came near the trigger, and
// writes the access-log line.
func (s *Server) finish(x *exchange) {
	if x.release != nil {
		x.release()
		x.release = nil
	}
	t := x.turn
	s.metrics.exchange(x)
	if t != nil && s.rec != nil && t.id.ID != "" && !t.ephemeral && x.status >= 200 && x.status < 300 && x.err == nil {
		tr := turnRecord{turn: *t, usage: x.usage}
		// The precompaction's body copy is for precompact below; a queued
		// record must not pin it (up to a thousand queued bodies under load).
		tr.turn.precompact = nil
		s.rec.record(tr)
		if pc := t.precompact; pc != nil && x.usage.Found &&
			float64(x.usage.InputTokens) >= s.comp.cfg.precompactRatio()*float64(t.trigger) {
			s.comp.precompact(*pc)
		}
	}
	s.logExchange(x)
}
