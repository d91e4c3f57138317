package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"github.com/ctxpress/ctxpress/admin"
	"github.com/valyala/fasthttp"
	"math"
	"strings"
	"time"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// Compaction kinds: what made a turn compact (Event.Trigger too).
const (
	kindAuto       = rewrite.KindAuto
	kindPrecompact = rewrite.KindPrecompact
	kindManual     = rewrite.KindManual
	kindRescue     = rewrite.KindRescue
)

// maybeCompact compacts the request in ti as kind asks: kindAuto when it
// is due, kindManual always, kindRescue always but without touching the
// breaker (the upstream refused the request as too long). It returns the
// rewrite to forward: with the new summary applied on success, else the
// one given. A request arriving while its line is being compacted waits
// for that compaction and uses its summary; only a manual one then runs
// another on top.
func (c *compactions) maybeCompact(ti turnInput, kind string) (rewrite.Result, outcome) {
	ti.kind = kind
	if pl := c.plan(&ti); pl.Action != rewrite.ActNow && pl.Action != rewrite.ActRescue {
		return ti.res, outcome{err: pl.Why}
	}
	asked := ti.res
	done, mine := c.acquire(ti.lockKey())
	for !mine {
		if !c.join(done) {
			return ti.res, outcome{err: fmt.Errorf("%w: another compaction of this conversation is still running", errSkipped)}
		}
		fresh, ok, err := c.store.Get(ti.key)
		if err != nil || !ok {
			return ti.res, outcome{}
		}
		res := c.pipeline.RewriteParsed(ti.parsed, c.options(fresh, ti.line.id))
		if kind != kindManual && !c.prepared(fresh) {
			return res, outcome{}
		}
		// The user asked for a compaction of this request: the background
		// one that just ended may have covered less, so run one now on top.
		ti.rec, ti.res = fresh, res
		done, mine = c.acquire(ti.lockKey())
	}
	defer c.release(ti.lockKey(), done)
	// Another replica's compaction of the line is waited for like a local
	// one; refresh then finds its summary in the record.
	releaseUpstreamClient, ok := c.awaitLease(ti.lockKey())
	if !ok {
		return ti.res, outcome{err: fmt.Errorf("%w: another replica's compaction of this conversation is still running", errSkipped)}
	}
	defer releaseUpstreamClient()
	if c.promote(&ti, math.MaxInt) && kind != kindManual {
		return ti.res, outcome{}
	}
	if changed, due := c.refresh(&ti); (changed && kind == kindRescue) || (!due && kind == kindAuto) {
		// A compaction of this line stored its summary between this turn's
		// read of the record and the lock: its result is what to send.
		return ti.res, outcome{}
	}
	newRec, ev, err := c.run(ti)
	if err != nil {
		if ti.rec.ForceNext {
			c.clearForceNext(ti.key) // one scheduled attempt, not one per turn
		}
		if kind == kindManual && errors.Is(err, errSkipped) && ti.res.Covered > asked.Covered {
			// The background compaction waited on already covered what
			// there was: the user's request is compacted all the same.
			cal := ti.nums.Calibration
			ev = admin.Event{Time: c.now(), Conversation: ti.key.ID, Model: ti.res.Model, Trigger: kindManual, Result: "ok",
				Covered: ti.res.Covered, TokensBefore: cal.Upstream(asked.TokensAfter), TokensAfter: cal.Upstream(ti.res.TokensAfter)}
			return ti.res, outcome{compacted: true, joined: true, event: ev}
		}
		return ti.res, outcome{event: ev, err: err}
	}
	res := c.pipeline.RewriteParsed(ti.parsed, c.options(newRec, ti.line.id))
	ev.TokensAfter = ti.nums.Calibration.Upstream(res.TokensAfter)
	c.events.Publish(ev)
	return res, outcome{compacted: true, event: ev}
}

// join waits for the compaction that will close done, at most a summary
// call's timeout and a margin; it reports whether that one ended.
func (c *compactions) join(done chan struct{}) bool {
	c.waiting.Add(1)
	defer c.waiting.Add(-1)
	select {
	case <-done:
		return true
	case <-time.After(c.summaryTimeout() + 5*time.Second):
		return false
	}
}

// plan asks rewrite what the compaction of kind in ti comes to now, with
// the line's numbers as ti has them: ActNow or ActRescue when it is to run,
// else Why says why not when it was due or asked. It sets ti.urgent.
func (c *compactions) plan(ti *turnInput) rewrite.Plan {
	pl := c.policy.PlanTurn(rewrite.TurnFacts{Model: ti.res.Model, Tokens: ti.res.TokensAfter, Line: ti.nums.Numbers,
		Identified: true, Manual: ti.kind == kindManual, Refused: ti.kind == kindRescue, StoreFailedAt: c.lastStoreFailure()}, c.now())
	ti.urgent = pl.Urgent
	return pl
}

// due reports whether the request in ti is over its trigger and its line
// may be compacted automatically; err says why not when it is over but may
// not (breaker, backoff, a failing store). It sets ti.urgent.
func (c *compactions) due(ti *turnInput) (bool, error) {
	auto := *ti
	auto.kind = kindAuto
	pl := c.plan(&auto)
	ti.urgent = auto.urgent
	return pl.Action == rewrite.ActNow, pl.Why
}

// refresh re-reads the record once the line's lock is held: a background
// compaction of the line may have stored a summary (or failed and backed
// off) since the turn read it, and compacting from the stale record would
// pay for a second summary of the same messages. It reports whether the
// stored summaries changed (ti.res is then rewritten with them) and
// whether the request is still due.
func (c *compactions) refresh(ti *turnInput) (changed, due bool) {
	fresh, ok, err := c.store.Get(ti.key)
	if err != nil || !ok {
		return false, c.stillDue(ti)
	}
	if l := fresh.LineByID(ti.line.id); l != nil {
		ti.nums.Breaker = l.Breaker
	}
	if changed = !sameBranches(fresh.Branches, ti.rec.Branches); changed {
		ti.res = c.pipeline.RewriteParsed(ti.parsed, c.options(fresh, ti.line.id))
	}
	ti.rec = fresh
	return changed, c.stillDue(ti)
}

// stillDue reports whether an automatic compaction in ti is still due; a
// manual or rescue one is asked, not due, and keeps its urgency.
func (c *compactions) stillDue(ti *turnInput) bool {
	if ti.kind != kindAuto {
		return true
	}
	due, _ := c.due(ti)
	return due
}

// sameBranches reports whether a and b hold the same summaries.
func sameBranches(a, b []state.Branch) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Hash != b[i].Hash || a[i].Covered != b[i].Covered {
			return false
		}
	}
	return true
}

// scaled is tokens × calibration, rounded: a tiktoken count in the
// upstream's tokens.
func scaled(tokens int, cal float64) int { return int(math.Round(float64(tokens) * cal)) }

// precompact prepares a summary in the background from a copy of a request
// body, so the turn that crosses the trigger finds it ready.
func (c *compactions) precompact(ti turnInput) {
	if rewrite.StorePaused(c.lastStoreFailure(), c.now()) != nil {
		return
	}
	done, mine := c.acquire(ti.lockKey())
	if !mine {
		return
	}
	ti.applyAt = ti.nums.Turns + 1 + rewrite.PrecompactLagTurns
	c.mu.Lock()
	c.preparing[ti.lockKey()] = ti.applyAt
	c.mu.Unlock()
	c.bg.Add(1)
	c.bgCount.Add(1)
	go func() {
		defer c.bg.Done()
		defer c.bgCount.Add(-1)
		defer c.release(ti.lockKey(), done)
		releaseUpstreamClient, mine := c.takeLease(ti.lockKey())
		if !mine { // another replica is preparing it
			return
		}
		defer releaseUpstreamClient()
		rec, ok, err := c.store.Get(ti.key)
		if err != nil {
			return
		}
		if !ok { // the turn that asked is still queued for the store
			rec = state.Record{Key: ti.key}
		}
		if l := rec.LineByID(ti.line.id); l != nil {
			ti.nums.Breaker = l.Breaker
		}
		if rewrite.BreakerBlocks(ti.nums.Breaker, c.now()) != nil {
			return
		}
		ti.rec = rec
		ti.parsed = c.pipeline.Parse(ti.api.format, ti.body) // the turn's own body: its parse is remembered
		if c.prepared(rec) {
			// One summary waits for the trigger already: the turns up to it
			// do not each prepare another.
			if res := c.pipeline.RewriteParsed(ti.parsed, c.promotingOptions(rec, ti.line.id)); res.Applied >= 0 && rec.Branches[res.Applied].Prepared {
				return
			}
		}
		ti.res = c.pipeline.RewriteParsed(ti.parsed, c.options(rec, ti.line.id))
		if !ti.res.Understood {
			return
		}
		ti.kind = kindPrecompact
		if _, ev, err := c.run(ti); err == nil {
			c.events.Publish(ev)
		}
	}()
}

// wait blocks until background precompactions have ended.
func (c *compactions) wait() { c.bg.Wait() }

// answerCompactCommand answers a "/compact" user message itself, in the
// client's format (api) and stream mode, without a completion call; the
// caller ends the request (finish). The reply starts with
// rewrite.CompactReplyPrefix: that is how later requests, which carry the
// command and this reply, leave both out of what they forward.
func (s *Server) answerCompactCommand(ctx *fasthttp.RequestCtx, x *exchange, a *api, res rewrite.Result, o outcome) {
	var text string
	switch {
	case o.compacted:
		text = fmt.Sprintf("compacted this conversation: %d earlier messages are now a summary; context %d → %d tokens.",
			o.event.Covered, o.event.TokensBefore, o.event.TokensAfter)
	case o.err != nil:
		text = "did not compact this conversation: " + strings.TrimPrefix(o.err.Error(), errSkipped.Error()+": ")
	default:
		text = "did not compact this conversation."
	}
	reply := a.reply(res.Model, rewrite.CompactReplyPrefix+" "+text, res.Stream, time.Now())
	x.status = fasthttp.StatusOK
	ctx.SetContentType(reply.ContentType)
	x.bytesOut = int64(len(reply.Body))
	if !res.Stream {
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
