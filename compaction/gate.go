package compaction

import (
	"sync"
	"sync/atomic"
)

// Gate keeps ctxpress's summary calls and the live chat requests to a
// local model server from running at the same time. llama-server (and LM
// Studio, which runs it) serves several slots from one KV cache by
// default: a background summary call beside the agent's next turn can
// overflow it together, and both get "Context size has been exceeded."
// although each alone would fit. A summary call waits for the live
// requests in flight to end, and live requests that arrive meanwhile wait
// for it (writer first, so the summary is not starved); a hosted upstream
// has no gate. The nil gate lets everything through.
type Gate struct {
	mu      sync.RWMutex
	waiting atomic.Int64 // live requests waiting for a summary call, for metrics
	// unlockLive is mu.RUnlock as a func made once: a request's share is
	// given back through the exchange (x.gate, cleared once called), and
	// wrapping it per request (sync.OnceFunc) allocated on every turn.
	unlockLive func()
}

func NewGate() *Gate {
	g := &Gate{}
	g.unlockLive = g.mu.RUnlock
	return g
}

// Live takes a live request's share; release gives it back. The caller
// calls release once (the exchange clears it when it has).
func (g *Gate) Live() (release func()) {
	if g == nil {
		return func() {}
	}
	if !g.mu.TryRLock() {
		g.waiting.Add(1)
		g.mu.RLock()
		g.waiting.Add(-1)
	}
	return g.unlockLive
}

// Summary takes the gate for one summary call; release gives it back, once.
func (g *Gate) Summary() (release func()) {
	if g == nil {
		return func() {}
	}
	g.mu.Lock()
	return sync.OnceFunc(g.mu.Unlock)
}

// WaitingNow is how many live requests wait for a summary call.
func (g *Gate) WaitingNow() int64 {
	if g == nil {
		return 0
	}
	return g.waiting.Load()
}
