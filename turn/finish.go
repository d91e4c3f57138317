package turn

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/state/recorder"
	"github.com/ctxpress/ctxpress/wire"
)

// Body is what to forward: the request as the turn rewrote it (with the
// retrieval tool when it is on), or, in observe mode, as the client sent
// it.
func (t *Turn) Body() []byte {
	if t.ts.Observe {
		return t.body
	}
	return t.withTool(t.res.Body)
}

// Stream reports whether the forwarded request asks for a stream.
func (t *Turn) Stream() bool { return t.res.Stream }

// Model is the request's model.
func (t *Turn) Model() string { return t.res.Model }

// DropMismatched reports whether the forwarded body asks the upstream to
// drop thinking blocks whose prefix changed (Anthropic's drop_block),
// which the shell must open with its beta header.
func (t *Turn) DropMismatched() bool { return t.res.DropMismatched && !t.ts.Observe }

// Rewrites reports whether what is forwarded is ctxpress's rewrite (not
// in observe mode): only then may the shell change it further (ask a
// stream for its usage).
func (t *Turn) Rewrites() bool { return !t.ts.Observe }

// Sent tells the turn the bytes forwarded (the body, as the shell may
// have asked a stream for its usage): a background compaction's summary
// call continues them, so the provider's cache of them holds.
//
// The originals its markers point to start being kept (WaitKept).
func (t *Turn) Sent(out []byte) {
	if !t.ts.Observe && t.kept == nil {
		t.kept = t.ts.Keeper.keep(t.ns, t.parsed, t.res.Originals)
	}
	if pc := t.precompact; pc != nil {
		pc.Forwarded, pc.FitDropped = append([]byte(nil), out...), t.res.FitDropped
	}
}

// WaitKept waits, for at most keepWait, until the originals the sent
// body's markers point to are kept: the agent may ask for one as soon as
// it reads the answer, so the shell calls it before relaying the answer.
func (t *Turn) WaitKept() {
	if t.kept == nil {
		return
	}
	timer := time.NewTimer(keepWait)
	defer timer.Stop()
	select {
	case <-t.kept:
	case <-timer.C:
	}
}

// keepWait bounds how long an answer waits for its originals to be kept:
// a slow store delays nothing longer (the marker still names the
// reference, and the keeping goes on).
const keepWait = 2 * time.Second

// ID is the conversation's id ("" when none was found).
func (t *Turn) ID() string { return t.id.ID }

// TokensBefore and TokensAfter are the calibrated estimates (what the
// upstream will most likely count) of the request as sent and as
// forwarded.
func (t *Turn) TokensBefore() int { return t.rt.TokensBefore }

// TokensAfter: see TokensBefore.
func (t *Turn) TokensAfter() int { return t.rt.TokensAfter }

// Compacted reports whether a summary was written for this request (by
// it or by the compaction it joined).
func (t *Turn) Compacted() bool { return t.o.Compacted }

// Finish ends the turn once its answer is done: ok when the upstream (or
// ctxpress, for "/compact") answered it 2xx in full, with the usage it
// reported (the hidden rounds' added, see expanding.billed). The
// answered turn is queued for the record, which observes the usage
// (calibration, breaker, bill), and a background compaction starts when
// the plan and the upstream's count say so.
func (t *Turn) Finish(ok bool, usage wire.Usage) {
	if !t.recording {
		return
	}
	t.recording = false
	usage = t.x.billed(usage)
	if ok {
		t.noteEdits()
		rt := t.rt
		rt.Usage = usage
		t.ts.Recorder.Record(rt)
		if pc := t.precompact; pc != nil && t.precompactPlan.PrecompactAfter(usage.InputTokens, usage.Found && !usage.ServerCompacted) {
			t.ts.Comp.Precompact(*pc)
		}
	}
	t.ts.Recorder.Answered()
}

// Metrics is the turn as the metrics count it, answered with usage.
func (t *Turn) Metrics(usage wire.Usage) *admin.Turn {
	usage = t.x.billed(usage)
	return &admin.Turn{Model: t.rt.Model, TokensBefore: t.rt.TokensBefore, TokensAfter: t.rt.TokensAfter,
		Squashed: t.squashStats, Deduped: t.deduped, DedupSaved: t.dedupSaved, Pruned: t.pruned, PruneSaved: t.pruneSaved,
		Usage: recorder.CallUsage(usage), UsageFound: usage.Found}
}

// Log adds the turn's fields to the request's access-log line: the
// headers' calibrated estimates, tiktoken's own counts, what was taken
// out, the conversation.
func (t *Turn) Log(ev *zerolog.Event) *zerolog.Event {
	ev = ev.Int("tokens_before", t.rt.TokensBefore).Int("tokens_after", t.rt.TokensAfter).
		Int("raw_tokens_before", t.rawBefore).Int("raw_tokens_after", t.rt.RawAfter)
	if t.squashed > 0 || t.deduped > 0 || t.pruned > 0 {
		ev = ev.Int("squashed", t.squashed).Int("deduped", t.deduped).Int("pruned", t.pruned)
	}
	if t.id.ID != "" {
		ev = ev.Str("conversation", t.id.ID)
	}
	return t.x.log(ev)
}
