package compaction

import (
	"errors"
	"slices"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// A summary a precompaction prepares is stored as a prepared branch and
// sent from a request fixed when the precompaction starts (the line's
// ApplyAt-th), or from the request that crosses the trigger if sooner:
// never from whichever request happens to come after its call ended, so
// a slow or fast summary call changes no byte forwarded. A request that
// comes while the call still runs waits for it.

// prepared reports whether rec holds a summary prepared ahead of the
// trigger that no request has sent yet.
func (c *Engine) prepared(rec state.Record) bool {
	return slices.ContainsFunc(rec.Branches, func(b state.Branch) bool { return b.Prepared })
}

// SendsPrepared reports whether the request in c, the line's index-th,
// is one a prepared summary is due for: stored with an ApplyAt it
// reached, or still being prepared for it.
func (c *Engine) SendsPrepared(rec state.Record, key state.LineKey, index int) bool {
	c.mu.Lock()
	at, running := c.preparing[key]
	c.mu.Unlock()
	return running && at <= index || slices.ContainsFunc(rec.Branches, func(b state.Branch) bool {
		return b.Prepared && b.ApplyAt > 0 && b.ApplyAt <= index
	})
}

// SendPrepared sends, from ti's request on, the summary prepared for it
// (sendsPrepared), waiting for its precompaction if that still runs. It
// reports whether ti.Res and ti.Rec now have it.
func (c *Engine) SendPrepared(ti *Input) bool {
	index := ti.Nums.Turns + 1
	c.mu.Lock()
	at, running := c.preparing[ti.lockKey()]
	done := c.inflight[ti.lockKey()]
	c.mu.Unlock()
	if running && at <= index && !c.join(done) {
		return false
	}
	return c.promote(ti, index)
}

// promote sends, from ti's request on, a summary prepared for its history
// whose ApplyAt is at most upTo (math.MaxInt at the trigger: any), if one
// matches: it is stored as a summary every later request sends, and
// ti.Rec and ti.Res have it. It reports whether one was promoted.
func (c *Engine) promote(ti *Input, upTo int) bool {
	rec, ok, err := c.store.Get(ti.Key)
	if err != nil || !ok || !c.prepared(rec) {
		return false
	}
	res := c.pipeline.RewriteParsed(ti.Parsed, c.promotingOptions(rec, ti.Line.ID))
	if !res.Understood || res.Applied < 0 {
		return false
	}
	b, ok := appliedBranch(rec, res)
	if !ok || !b.Prepared || b.ApplyAt > upTo {
		return false
	}
	h := b.Hash
	promoted, err := c.store.Update(ti.Key, func(r *state.Record) error {
		if !r.PromoteBranch(h, c.now()) {
			return errNotPrepared
		}
		return nil
	})
	if err != nil {
		if !errors.Is(err, errNotPrepared) {
			c.storeFailed()
			c.log.Warn().Err(err).Msg("cannot store the prepared summary as sent; forwarding without it")
		}
		return false
	}
	ti.Rec, ti.Res = promoted, c.pipeline.RewriteParsed(ti.Parsed, c.Options(promoted, ti.Line.ID))
	return true
}

// errNotPrepared: the branch to promote was promoted or dropped meanwhile.
var errNotPrepared = errors.New("the prepared summary is gone")

// appliedBranch is the branch of rec whose summary res applied.
func appliedBranch(rec state.Record, res rewrite.Result) (state.Branch, bool) {
	h, ok := res.AppliedHash()
	if !ok {
		return state.Branch{}, false
	}
	i := slices.IndexFunc(rec.Branches, func(b state.Branch) bool { return b.Hash == state.ChainHash(h) })
	if i < 0 {
		return state.Branch{}, false
	}
	return rec.Branches[i], true
}
