package state

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// receiver collects a subscription's payloads.
func receiver(t *testing.T, s Broadcaster) <-chan string {
	t.Helper()
	got := make(chan string, 16)
	stop := s.Subscribe(func(p []byte) { got <- string(p) })
	t.Cleanup(stop)
	return got
}

func next(t *testing.T, got <-chan string, what string) string {
	t.Helper()
	select {
	case p := <-got:
		return p
	case <-time.After(30 * time.Second): // a hang guard, not a bound on speed
		t.Fatalf("no message: %s", what)
		return ""
	}
}

func TestReplicasOnOneRedisSeeEachOthersBroadcasts(t *testing.T) {
	a, b := twoReplicaLeasers(t)
	other := openTestRedis(t, sharedRedisServer(t), RedisOptions{}) // another deployment's prefix
	atB, atOther := receiver(t, b), receiver(t, other)
	// The other deployment's message is in Redis (its own subscriber has
	// it) before a's: b, on one connection, would get it first if it
	// were on b's channel.
	if err := other.Publish([]byte("other deployment")); err != nil {
		t.Fatal(err)
	}
	if p := next(t, atOther, "the other deployment's own"); p != "other deployment" {
		t.Fatalf("the other deployment got %q", p)
	}
	for _, m := range []string{"from a", "from a again"} {
		if err := a.Publish([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if p := next(t, atB, "a's first"); p != "from a" {
		t.Fatalf("b got %q first, want a's message and nothing of another prefix", p)
	}
	if p := next(t, atB, "a's second"); p != "from a again" {
		t.Fatalf("b got %q second, want a's second message, in order", p)
	}
	_ = a.Close() // waits for the publisher: the counts are final
	if st := a.BroadcastStats(); st.Sent != 2 || st.Dropped != 0 || st.Failed != 0 {
		t.Fatalf("a's stats %+v, want 2 sent", st)
	}
}

// A Redis that stops answering must not hold up a publisher (a request):
// the queue fills, and what does not fit is dropped and counted.
func TestBroadcastToAHungRedisDropsInsteadOfBlocking(t *testing.T) {
	r := needRedis(t)
	s := openTestRedis(t, r, RedisOptions{WriteTimeout: time.Minute})
	if err := r.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Signal(syscall.SIGCONT) })
	var full int
	for i := 0; i < broadcastQueue+broadcastBatch+1; i++ {
		if err := s.Publish([]byte("event")); errors.Is(err, ErrBroadcastFull) {
			full++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	// The publisher holds at most one batch in flight; the rest queues.
	if full == 0 {
		t.Fatal("every publish was taken with Redis hung: the queue is not bounded")
	}
	if st := s.BroadcastStats(); st.Dropped != uint64(full) {
		t.Fatalf("stats %+v, want %d dropped", st, full)
	}
}
