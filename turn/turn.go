// Package turn runs one conversation request as one value, its phases in
// the order DESIGN.md gives: parse, identify, load, plan, compact, fit
// (Begin); then forward, which is the HTTP shell's (Body, Sent, Refused);
// then observe and record (Finish). Each phase replaces the turn's result
// (what is forwarded) at most once. The package knows no HTTP: the shell
// hands it the body, a view of the request's headers and the namespace,
// and gets back the body to forward and what to tell the client.
package turn

import (
	"bytes"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/compaction"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/state/recorder"
	"github.com/ctxpress/ctxpress/wire"
)

// Headers a client sends to steer ctxpress.
const (
	// HeaderCompact: "force" compacts this request's conversation now.
	HeaderCompact = "X-Ctxpress-Compact"
	// HeaderEphemeral: "1" marks a side request (a title, a classification)
	// that is never compacted nor recorded.
	HeaderEphemeral = "X-Ctxpress-Ephemeral"
)

// API is what a turn needs of its wire format.
type API struct {
	// Name is also the summary call's API when the summariser is the
	// conversation's own upstream (compaction.APIChat, …).
	Name string
	// Format reads request bodies into the neutral conversation and
	// writes the core's edits back.
	Format wire.Format
	// OutputCaps are the body fields, in order of precedence, that
	// reserve room in the window for the answer.
	OutputCaps []string
}

// Header is the client's request as a turn reads it: a header by name
// (any case), and the credentials a summary call to the conversation's
// own upstream carries.
type Header interface {
	Peek(name string) []byte
	Creds() compaction.Creds
}

// Turns is what every turn shares: the pipeline, the store and its
// recorder, the compaction engine. Nil Pipeline: no turn begins.
type Turns struct {
	Pipeline *rewrite.Pipeline
	Store    state.Store        // nil: no per-conversation state
	Recorder *recorder.Recorder // nil without a store
	Comp     *compaction.Engine // always set; compaction itself may be off
	Events   *admin.Bus
	Log      zerolog.Logger
	// StoreFailed reports a store failure on the request path (the shell
	// counts and rate-limits it); the request goes on without the record.
	StoreFailed func(op, msg string, err error)
	// Paused warns, rate-limited, that compaction is paused while the
	// store fails.
	Paused func(err error)
	// Keeper keeps the originals the forwarded bodies' markers point to
	// (nil: none are kept; the pipeline's markers then name none).
	Keeper *Keeper
	// Observe: observe mode. Every request is forwarded as the client
	// sent it (Body), and the turn is what ctxpress would have done:
	// counted, recorded and shown, with no summary call made
	// (compaction.Engine.ObserveCompaction).
	Observe bool
	// ExpandTool: every request that offers tools is offered the
	// retrieval tool too (expand.ToolName), whose calls ctxpress answers
	// itself from the originals Store keeps (Answered). Off in observe
	// mode, and with a Store that keeps no originals (state.Originals).
	ExpandTool bool
}

// Turn is one understood conversation request on its way through: what it
// learnt (record, line), what it decided to forward (res), and what the
// record keeps of it (rt).
type Turn struct {
	ts     *Turns
	api    *API
	header Header
	body   []byte // the client's, as it sent it: forwarded in observe mode
	parsed *rewrite.Parsed
	id     rewrite.Identity
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
	o           compaction.Outcome
	// creds are the client's, for a summary call, read off the header
	// when a compaction first needs them: most turns compact nothing.
	creds     compaction.Creds
	credsRead bool
	ephemeral bool
	// rt is what the record keeps of the turn; rawBefore and the squash,
	// dedup and prune figures are for the log and the metrics.
	rt                        recorder.Turn
	rawBefore                 int
	squashed, deduped, pruned int
	squashStats               []rewrite.SquashStat
	dedupSaved, pruneSaved    int
	// precompact, when set, is the turn's input for a background
	// compaction, which starts when the upstream's count confirms
	// precompactPlan (rewrite.Plan.PrecompactAfter).
	precompact     *compaction.Input
	precompactPlan rewrite.Plan
	recording      bool // counted by the recorder as being answered
	noted          bool // noteEdits ran
	// ns is the client's namespace, where the originals are kept and the
	// retrieval tool looks them up; kept closes when those of the body
	// sent are (nil: nothing to wait for); x is what the tool did.
	ns   string
	kept <-chan struct{}
	x    expanding
}

// Begin runs a request's phases up to forwarding: parse (as api's
// format), identify, load its record, plan, compact when planned, fit the
// window. ok is false when the pipeline does not understand the body: it
// is then forwarded as sent, and there is no turn to finish. A turn begun
// must be finished (Finish), whoever answers it.
func (ts *Turns) Begin(api *API, body []byte, h Header, namespace string) (t *Turn, ok bool) {
	if ts.Pipeline == nil {
		return nil, false
	}
	t = &Turn{ts: ts, api: api, header: h, body: body}
	if !t.parse(body) {
		return nil, false
	}
	t.ns = namespace
	ts.Keeper.countFileReads(namespace, t.parsed)
	t.identify(namespace)
	t.load()
	if !t.planTurn() {
		return nil, false
	}
	t.compact(body)
	if !t.res.CompactCommand {
		t.fit("")
	}
	t.setResult(t.res)
	if t.res.CompactCommand {
		if t.o.Compacted {
			// Recorded as the turn it is: what the conversation costs now.
			t.rt.TokensAfter = t.o.Event.TokensAfter
		}
		t.rt.Forwarded = false // ctxpress answers it (CompactReply)
	}
	if t.recordable() {
		ts.Recorder.Answer() // until Finish queues it
		t.recording = true
	}
	return t, true
}

// parse validates and reads the body, as the turn's format, once for
// every later step.
func (t *Turn) parse(body []byte) (ok bool) {
	defer t.recoverPipeline(&ok)
	t.parsed = t.ts.Pipeline.Parse(t.api.Format, body)
	return true
}

// identify names the conversation: key = namespace + id.
func (t *Turn) identify(namespace string) {
	t.id = t.ts.Pipeline.IdentifyParsedFold(t.header.Peek, t.parsed)
	if len(t.id.Rejected) > 0 {
		t.ts.Log.Warn().Strs("sources", t.id.Rejected).Msg("ignored a conversation id that is too long or not printable")
	}
	t.ephemeral = string(t.header.Peek(HeaderEphemeral)) == "1"
	if t.id.ID != "" {
		t.rt.Key = state.Key{Namespace: namespace, ID: t.id.ID}
	}
}

// load reads the conversation's record, with its turns still queued for
// the store folded in.
func (t *Turn) load() {
	ts := t.ts
	if t.id.ID == "" || ts.Store == nil {
		return
	}
	var err error
	if ts.Recorder != nil {
		t.rec, err = ts.Recorder.Read(t.rt.Key)
	} else {
		t.rec, _, err = ts.Store.Get(t.rt.Key)
	}
	if err != nil {
		ts.StoreFailed("read", "cannot read the conversation record", err)
		ts.Comp.StoreFailing() // state-less for now: no summary to keep
	}
}

// planTurn rewrites the request as its record says (a stored summary
// applied, squash, dedup, prune), finds its line, sends a summary prepared
// for it, and asks rewrite whether to compact. ok is false when the
// pipeline does not understand the body.
func (t *Turn) planTurn() bool {
	ts := t.ts
	var ok bool
	if t.res, ok = t.rewrite(ts.Comp.Options(t.rec, state.ChainHash{})); !ok || !t.res.Understood {
		return false
	}
	if t.res.SummaryMiss {
		ts.Log.Info().Str("conversation", t.id.ID).Msg("history differs from every stored summary (edited, rewound, or compacted by the provider); no summary applied")
	}
	if t.id.ID != "" {
		t.rt.Line, t.nums = lineOf(&t.rec, t.res)
		if len(t.nums.Dedups) > 0 || len(t.nums.Prunes) > 0 {
			// The line's last request deduped or pruned: those stay
			// (sticky), and the minimum applies to what this one adds.
			if again, ok := t.rewrite(ts.Comp.Options(t.rec, t.rt.Line.ID)); ok {
				t.res = again
			}
		}
	}
	t.rt.Model, t.rt.ServerHistory = t.res.Model, t.res.ServerHistory || t.res.ProviderCompacts
	if t.id.ID != "" && ts.Comp.On() && !t.ephemeral && !t.rt.ServerHistory &&
		ts.Comp.SendsPrepared(t.rec, t.lineKey(), t.nums.Turns+1) {
		t.sendPrepared()
	}
	t.plan = ts.Comp.Plan(t.facts())
	if t.plan.Compactable {
		t.compactable = true
		t.rt.Trigger = t.plan.Trigger
	}
	return true
}

func (t *Turn) lineKey() state.LineKey { return state.LineKey{Key: t.rt.Key, Line: t.rt.Line.ID} }

// sendPrepared sends from the turn's request on the summary a
// precompaction prepared for it, judged, as every request is, by the
// record with the turns still queued folded in.
func (t *Turn) sendPrepared() {
	in := t.input(t.res)
	if !t.ts.Comp.SendPrepared(&in) {
		return
	}
	rec := in.Rec
	if t.ts.Recorder != nil {
		if folded, err := t.ts.Recorder.Read(t.rt.Key); err == nil {
			rec = folded
		}
	}
	if res, ok := t.rewrite(t.ts.Comp.Options(rec, t.rt.Line.ID)); ok && res.Understood {
		t.rec, t.res = rec, res
	}
}

// input is the turn's compaction input with res as the request to
// compact. It is made when a compaction needs it, not on every turn: it
// holds a copy of the record, the line's numbers and the result (a
// kilobyte and more).
func (t *Turn) input(res rewrite.Result) compaction.Input {
	if !t.credsRead {
		t.creds, t.credsRead = t.header.Creds(), true
	}
	return compaction.Input{API: t.api.Name, Format: t.api.Format, Key: t.rt.Key, Rec: t.rec, Line: t.rt.Line, Nums: t.nums,
		Parsed: t.parsed, Res: res, Trigger: t.rt.Trigger, Creds: t.creds}
}

// facts are what rewrite plans the turn's compaction from.
func (t *Turn) facts() rewrite.TurnFacts {
	comp := t.ts.Comp
	return rewrite.TurnFacts{Model: t.res.Model, Tokens: t.res.TokensAfter, Line: t.nums.Numbers,
		Identified: t.id.ID != "", Ephemeral: t.ephemeral, ServerHistory: t.res.ServerHistory,
		ProviderCompacts: t.res.ProviderCompacts,
		Manual:           bytes.EqualFold(t.header.Peek(HeaderCompact), []byte("force")) || t.rec.ForceNext || t.res.CompactCommand,
		Command:          t.res.CompactCommand, StoreFailedAt: comp.LastStoreFailure(),
		Economics: comp.CompactionEconomics(t.api.Name, t.nums.Numbers), SummaryReusesCache: comp.SummariserIsOwn(t.api.Name, t.res.Model)}
}

// rewrite runs the pipeline; a panic inside it is logged and ok is false
// (the request then goes upstream as the client sent it).
func (t *Turn) rewrite(opts rewrite.Options) (res rewrite.Result, ok bool) {
	defer t.recoverPipeline(&ok)
	return t.ts.Pipeline.RewriteParsed(t.parsed, opts), true
}

func (t *Turn) recoverPipeline(ok *bool) {
	if p := recover(); p != nil {
		t.ts.Log.Error().Str("panic", fmt.Sprint(p)).Msg("rewrite failed; forwarding the request unchanged")
		*ok = false
	}
}

// recordable reports whether the turn's answer is recorded when it
// succeeds: it has a conversation and is not a side request, and there
// is a store.
func (t *Turn) recordable() bool {
	return t.ts.Recorder != nil && t.id.ID != "" && !t.ephemeral
}

// setResult sets what the turn forwards: res, with its estimates
// calibrated by the line's numbers.
func (t *Turn) setResult(res rewrite.Result) {
	t.res = res
	rt := &t.rt
	rt.Model, t.rawBefore, rt.RawAfter = res.Model, res.TokensBefore, res.TokensAfter
	// One estimator for both (Calibration.Upstream, monotone in the raw
	// count): a rewrite that took tokens out never reads as one that
	// added some.
	rt.TokensBefore, rt.TokensAfter = t.nums.Calibration.Upstream(res.TokensBefore), t.nums.Calibration.Upstream(res.TokensAfter)
	t.squashed, t.deduped, t.pruned = res.Squashed, res.Deduped, res.Pruned
	t.squashStats, t.dedupSaved, t.pruneSaved = res.SquashStats, res.DedupSavedTokens, res.PruneSavedTokens
	rt.Applied = nil
	if h, ok := res.AppliedHash(); ok {
		applied := state.ChainHash(h)
		rt.Applied = &applied
	}
	rt.Dedups = append(rt.Dedups[:0], res.Dedups...)
	rt.Prunes = append(rt.Prunes[:0], res.Prunes...)
	rt.Forwarded = true
	if t.ts.Observe {
		// What was sent is the client's request: the upstream's count of
		// it is what calibrates.
		rt.RawAfter, rt.Observed = res.TokensBefore, true
	}
}
