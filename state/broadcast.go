package state

import "errors"

// Broadcaster carries small messages to every process sharing the store:
// the Redis store is one, so that each replica's dashboard and event
// stream show the compactions of all of them. A per-process store (bolt,
// memory) needs none.
type Broadcaster interface {
	// Publish queues payload for every subscriber, this process's own
	// included, and returns at once: it never waits on the network. It
	// fails with ErrBroadcastFull when the queue is full (the store is
	// down or slow); the payload is dropped and counted.
	Publish(payload []byte) error
	// Subscribe calls handler, from one goroutine, with each payload
	// published by any process (its own too) from about now on, until
	// stop. Delivery is at most once: a message published while the
	// connection is down is lost; the subscription comes back by itself.
	Subscribe(handler func(payload []byte)) (stop func())
	// BroadcastStats counts the messages so far.
	BroadcastStats() BroadcastStats
}

// BroadcastStats counts a Broadcaster's messages.
type BroadcastStats struct {
	Sent    uint64 // published to the store
	Dropped uint64 // not queued: the queue was full
	Failed  uint64 // queued, but the store did not take them
}

// ErrBroadcastFull: Publish found its queue full.
var ErrBroadcastFull = errors.New("state: broadcast queue full")
