package compaction

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/ctxpress/ctxpress/state"
)

// Replicas sharing a store (Redis) each have their own in-process lock
// (acquire), so a compaction also takes a lease of its line in the store:
// one replica summarises a branch at a time, as one request does within a
// replica. A store that is no state.Leaser is one process's own, where
// the lock is enough.

// compactionLeaseTTL is how long the lease of a replica that died keeps
// the others from compacting its line; a live holder renews it.
const compactionLeaseTTL = 10 * time.Second

// leasePoll is how often a turn waiting for another replica's compaction
// asks whether its lease is gone.
const leasePoll = 50 * time.Millisecond

// LeaseName is the store's name of the lease on key's line: hashed, so a
// conversation id of any bytes and length makes a short key.
func LeaseName(key state.LineKey) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", key.Key.Namespace, key.Key.ID)
	h.Write(key.Line[:])
	return "compact:" + hex.EncodeToString(h.Sum(nil))
}

// takeLease takes the lease on key's line for a compaction; mine is false
// when another replica holds it. Without a Leaser, or when the store
// fails, the compaction goes on as a single process's would (mine true):
// a store outage costs at worst a second summary, never a request.
func (c *Engine) takeLease(key state.LineKey) (release func(), mine bool) {
	leaser, ok := c.store.(state.Leaser)
	if !ok {
		return func() {}, true
	}
	l, ok, err := leaser.Acquire(LeaseName(key), compactionLeaseTTL)
	if err != nil {
		c.countStoreFailure("lease")
		c.leaseWarn.Warn(c.now(), c.log, "cannot take the compaction lease in the store: compacting without it", err)
		return func() {}, true
	}
	if !ok {
		return nil, false
	}
	return func() {
		if err := l.Release(); err != nil {
			// It expires on its own within compactionLeaseTTL.
			c.countStoreFailure("lease")
			c.leaseWarn.Warn(c.now(), c.log, "cannot release the compaction lease in the store", err)
		}
	}, true
}

// awaitLease takes the lease on key's line, waiting while another replica
// holds it, at most as long as join waits for a local compaction; ok is
// false when the wait ran out.
func (c *Engine) awaitLease(key state.LineKey) (release func(), ok bool) {
	if release, ok = c.takeLease(key); ok {
		return release, true
	}
	c.waiting.Add(1)
	defer c.waiting.Add(-1)
	bound := time.NewTimer(c.summaryTimeout() + 5*time.Second)
	defer bound.Stop()
	tick := time.NewTicker(leasePoll)
	defer tick.Stop()
	for {
		select {
		case <-bound.C:
			return nil, false
		case <-tick.C:
			if release, ok = c.takeLease(key); ok {
				return release, true
			}
		}
	}
}
