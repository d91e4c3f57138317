package state

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

var _ Broadcaster = (*redisStore)(nil)

// Bounds of the broadcast queue: enough for a burst of events while Redis
// answers slowly, little enough memory (events are ~300 bytes) when it is
// gone for good.
const (
	broadcastQueue = 1024
	broadcastBatch = 64 // messages per pipelined round trip
)

// redisBroadcast is the Redis store's Broadcaster: PUBLISH on the channel
// <prefix>events from one goroutine, in pipelined batches, so a request
// that publishes never waits on Redis, and one round trip carries what
// queued while the previous one ran.
type redisBroadcast struct {
	once                  sync.Once
	queue                 chan []byte
	quit                  chan struct{}
	done                  chan struct{}
	sent, dropped, failed atomic.Uint64
}

func (s *redisStore) eventsChannel() string { return s.prefix + "events" }

// Publish queues payload for the publisher, started on first use.
func (s *redisStore) Publish(payload []byte) error {
	if s.closed.Load() {
		return errClosed("publish")
	}
	b := &s.broadcast
	b.once.Do(func() {
		b.queue = make(chan []byte, broadcastQueue)
		b.quit, b.done = make(chan struct{}), make(chan struct{})
		go s.publishLoop()
	})
	select {
	case b.queue <- payload:
		return nil
	default:
		b.dropped.Add(1)
		return ErrBroadcastFull
	}
}

// publishLoop sends the queue until the store closes; what Redis does not
// take (it is down, or slower than the write timeout) is counted as failed
// and not retried: events are a notification, not a ledger.
func (s *redisStore) publishLoop() {
	b := &s.broadcast
	defer close(b.done)
	batch := make([][]byte, 0, broadcastBatch)
	for {
		select {
		case <-b.quit:
			return
		case p := <-b.queue:
			batch = append(batch[:0], p)
		}
	fill:
		for len(batch) < broadcastBatch {
			select {
			case p := <-b.queue:
				batch = append(batch, p)
			default:
				break fill
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
		_, err := s.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for _, p := range batch {
				pipe.Publish(ctx, s.eventsChannel(), p)
			}
			return nil
		})
		cancel()
		if err != nil {
			b.failed.Add(uint64(len(batch)))
		} else {
			b.sent.Add(uint64(len(batch)))
		}
	}
}

// stopPublishing ends the publisher, if it started; what is queued is lost.
func (b *redisBroadcast) stopPublishing() {
	b.once.Do(func() {}) // none starts after this
	if b.quit != nil {
		close(b.quit)
		<-b.done
	}
}

// Subscribe is SUBSCRIBE <prefix>events on a connection of its own, which
// go-redis redials and resubscribes when it breaks (a Redis restart). It
// waits, up to the write timeout, for Redis to confirm the subscription,
// so that what is published after it returns reaches handler; when Redis
// is down it returns anyway and the subscription begins when Redis is back.
func (s *redisStore) Subscribe(handler func([]byte)) (stop func()) {
	ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
	ps := s.client.Subscribe(ctx, s.eventsChannel())
	_, _ = ps.Receive(ctx) // the confirmation, or a failure the channel recovers from
	cancel()
	msgs := ps.Channel(redis.WithChannelHealthCheckInterval(s.writeTimeout*3),
		redis.WithChannelPingTimeout(s.writeTimeout), redis.WithChannelReconnectTimeout(s.writeTimeout))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range msgs { // closed by ps.Close
			handler([]byte(m.Payload))
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = ps.Close()
			<-done
		})
	}
}

func (s *redisStore) BroadcastStats() BroadcastStats {
	b := &s.broadcast
	return BroadcastStats{Sent: b.sent.Load(), Dropped: b.dropped.Load(), Failed: b.failed.Load()}
}
