package compaction

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ctxpress/ctxpress/admin"

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

// MaybeCompact compacts the request in ti as kind asks: kindAuto when it
// is due, kindManual always, kindRescue always but without touching the
// breaker (the upstream refused the request as too long). It returns the
// rewrite to forward: with the new summary applied on success, else the
// one given. A request arriving while its line is being compacted waits
// for that compaction and uses its summary; only a manual one then runs
// another on top.
func (c *Engine) MaybeCompact(ti Input, kind string) (rewrite.Result, Outcome) {
	ti.Kind = kind
	if pl := c.plan(&ti); pl.Action != rewrite.ActNow && pl.Action != rewrite.ActRescue {
		return ti.Res, Outcome{Err: pl.Why}
	}
	asked := ti.Res
	done, mine := c.acquire(ti.lockKey())
	for !mine {
		if !c.join(done) {
			return ti.Res, Outcome{Err: fmt.Errorf("%w: another compaction of this conversation is still running", errSkipped)}
		}
		fresh, ok, err := c.store.Get(ti.Key)
		if err != nil || !ok {
			return ti.Res, Outcome{}
		}
		res := c.pipeline.RewriteParsed(ti.Parsed, c.Options(fresh, ti.Line.ID))
		if kind != kindManual && !c.prepared(fresh) {
			return res, Outcome{}
		}
		// The user asked for a compaction of this request: the background
		// one that just ended may have covered less, so run one now on top.
		ti.Rec, ti.Res = fresh, res
		done, mine = c.acquire(ti.lockKey())
	}
	defer c.release(ti.lockKey(), done)
	// Another replica's compaction of the line is waited for like a local
	// one; refresh then finds its summary in the record.
	releaseUpstreamClient, ok := c.awaitLease(ti.lockKey())
	if !ok {
		return ti.Res, Outcome{Err: fmt.Errorf("%w: another replica's compaction of this conversation is still running", errSkipped)}
	}
	defer releaseUpstreamClient()
	if c.promote(&ti, math.MaxInt) && kind != kindManual {
		return ti.Res, Outcome{}
	}
	if changed, due := c.refresh(&ti); (changed && kind == kindRescue) || (!due && kind == kindAuto) {
		// A compaction of this line stored its summary between this turn's
		// read of the record and the lock: its result is what to send.
		return ti.Res, Outcome{}
	}
	newRec, ev, err := c.run(ti)
	if err != nil {
		if ti.Rec.ForceNext {
			c.clearForceNext(ti.Key) // one scheduled attempt, not one per turn
		}
		if kind == kindManual && errors.Is(err, errSkipped) && ti.Res.Covered > asked.Covered {
			// The background compaction waited on already covered what
			// there was: the user's request is compacted all the same.
			cal := ti.Nums.Calibration
			ev = admin.Event{Time: c.now(), Conversation: ti.Key.ID, Model: ti.Res.Model, Trigger: kindManual, Result: "ok",
				Covered: ti.Res.Covered, TokensBefore: cal.Upstream(asked.TokensAfter), TokensAfter: cal.Upstream(ti.Res.TokensAfter)}
			return ti.Res, Outcome{Compacted: true, Joined: true, Event: ev}
		}
		return ti.Res, Outcome{Event: ev, Err: err}
	}
	res := c.pipeline.RewriteParsed(ti.Parsed, c.Options(newRec, ti.Line.ID))
	ev.TokensAfter = ti.Nums.Calibration.Upstream(res.TokensAfter)
	c.events.Publish(ev)
	return res, Outcome{Compacted: true, Event: ev}
}

// join waits for the compaction that will close done, at most a summary
// call's timeout and a margin; it reports whether that one ended.
func (c *Engine) join(done chan struct{}) bool {
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
// else Why says why not when it was due or asked. It sets ti.Urgent.
func (c *Engine) plan(ti *Input) rewrite.Plan {
	pl := c.policy.PlanTurn(rewrite.TurnFacts{Model: ti.Res.Model, Tokens: ti.Res.TokensAfter, Line: ti.Nums.Numbers,
		Identified: true, Manual: ti.Kind == kindManual, Refused: ti.Kind == kindRescue, StoreFailedAt: c.LastStoreFailure()}, c.now())
	ti.Urgent = pl.Urgent
	return pl
}

// due reports whether the request in ti is over its trigger and its line
// may be compacted automatically; err says why not when it is over but may
// not (breaker, backoff, a failing store). It sets ti.Urgent.
func (c *Engine) due(ti *Input) (bool, error) {
	auto := *ti
	auto.Kind = kindAuto
	pl := c.plan(&auto)
	ti.Urgent = auto.Urgent
	return pl.Action == rewrite.ActNow, pl.Why
}

// refresh re-reads the record once the line's lock is held: a background
// compaction of the line may have stored a summary (or failed and backed
// off) since the turn read it, and compacting from the stale record would
// pay for a second summary of the same messages. It reports whether the
// stored summaries changed (ti.Res is then rewritten with them) and
// whether the request is still due.
func (c *Engine) refresh(ti *Input) (changed, due bool) {
	fresh, ok, err := c.store.Get(ti.Key)
	if err != nil || !ok {
		return false, c.stillDue(ti)
	}
	if l := fresh.LineByID(ti.Line.ID); l != nil {
		ti.Nums.Breaker = l.Breaker
	}
	if changed = !sameBranches(fresh.Branches, ti.Rec.Branches); changed {
		ti.Res = c.pipeline.RewriteParsed(ti.Parsed, c.Options(fresh, ti.Line.ID))
	}
	ti.Rec = fresh
	return changed, c.stillDue(ti)
}

// stillDue reports whether an automatic compaction in ti is still due; a
// manual or rescue one is asked, not due, and keeps its urgency.
func (c *Engine) stillDue(ti *Input) bool {
	if ti.Kind != kindAuto {
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

// Precompact prepares a summary in the background from a copy of a request
// body, so the turn that crosses the trigger finds it ready.
func (c *Engine) Precompact(ti Input) {
	if rewrite.StorePaused(c.LastStoreFailure(), c.now()) != nil {
		return
	}
	done, mine := c.acquire(ti.lockKey())
	if !mine {
		return
	}
	ti.ApplyAt = ti.Nums.Turns + 1 + rewrite.PrecompactLagTurns
	c.mu.Lock()
	c.preparing[ti.lockKey()] = ti.ApplyAt
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
		rec, ok, err := c.store.Get(ti.Key)
		if err != nil {
			return
		}
		if !ok { // the turn that asked is still queued for the store
			rec = state.Record{Key: ti.Key}
		}
		if l := rec.LineByID(ti.Line.ID); l != nil {
			ti.Nums.Breaker = l.Breaker
		}
		if rewrite.BreakerBlocks(ti.Nums.Breaker, c.now()) != nil {
			return
		}
		ti.Rec = rec
		ti.Parsed = c.pipeline.Parse(ti.Format, ti.Body) // the turn's own body: its parse is remembered
		if c.prepared(rec) {
			// One summary waits for the trigger already: the turns up to it
			// do not each prepare another.
			res := c.pipeline.RewriteParsed(ti.Parsed, c.promotingOptions(rec, ti.Line.ID))
			if b, ok := appliedBranch(rec, res); ok && b.Prepared {
				return
			}
		}
		ti.Res = c.pipeline.RewriteParsed(ti.Parsed, c.Options(rec, ti.Line.ID))
		if !ti.Res.Understood {
			return
		}
		ti.Kind = kindPrecompact
		if _, ev, err := c.run(ti); err == nil {
			c.events.Publish(ev)
		}
	}()
}

// Wait blocks until background precompactions have ended.
func (c *Engine) Wait() { c.bg.Wait() }
