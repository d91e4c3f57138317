package admin

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	"github.com/ctxpress/ctxpress/state"
	"github.com/prometheus/client_golang/prometheus"
)

// sharedEvent is an event on its way to the other replicas through the
// store's Broadcaster. Origin tells a replica its own events apart when
// they come back (every subscriber gets every message); it is random per
// process, so two replicas given one name still see each other's.
type sharedEvent struct {
	Origin string          `json:"origin"`
	Type   string          `json:"type"`
	Event  json.RawMessage `json:"event"`
}

// sharedTypes are the event types replicas send each other: all of them.
// Compactions are the point; turns are one small message per request
// (~300 bytes, sent off the request path in batches) and they are what
// redraws a dashboard, whose conversation list the replicas share.
var sharedTypes = map[string]bool{EventCompaction: true, EventCompactionStarted: true, EventTurn: true}

// Join makes b send its events to the other replicas on bc and deliver
// theirs to its subscribers, until leave. Theirs are not logged, counted
// or posted to the webhook: their own replica did that.
func (b *Bus) Join(bc state.Broadcaster) {
	var id [8]byte
	_, _ = rand.Read(id[:])
	b.origin = hex.EncodeToString(id[:])
	b.shared = bc
	b.stopShared = bc.Subscribe(b.Receive)
}

// Leave ends the subscription of Join, before the store closes.
func (b *Bus) Leave() {
	if b.stopShared != nil {
		b.stopShared()
	}
}

// share sends one event of this replica to the others; it never waits (a
// full queue drops it, and the Broadcaster counts it).
func (b *Bus) share(typ string, data []byte) {
	if b.shared == nil {
		return
	}
	msg, _ := json.Marshal(sharedEvent{Origin: b.origin, Type: typ, Event: data})
	_ = b.shared.Publish(msg)
}

// Receive delivers another replica's event to the local subscribers.
func (b *Bus) Receive(payload []byte) {
	var m sharedEvent
	if json.Unmarshal(payload, &m) != nil || m.Origin == b.origin || !sharedTypes[m.Type] || len(m.Event) == 0 {
		return
	}
	b.send(frame{m.Type, m.Event})
}

// RegisterSharedEventMetrics counts the events sent to other replicas.
func RegisterSharedEventMetrics(reg *prometheus.Registry, bc state.Broadcaster) {
	for _, r := range []struct {
		result string
		get    func(state.BroadcastStats) uint64
	}{
		{"sent", func(s state.BroadcastStats) uint64 { return s.Sent }},
		{"dropped", func(s state.BroadcastStats) uint64 { return s.Dropped }},
		{"failed", func(s state.BroadcastStats) uint64 { return s.Failed }},
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ctxpress_events_shared_total",
			Help:        "Events sent to the other replicas through the state store: sent, dropped (queue full: the store is down or slow), failed (the store refused them).",
			ConstLabels: prometheus.Labels{"result": r.result}},
			func() float64 { return float64(r.get(bc.BroadcastStats())) }))
	}
}
