package state

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A record's TTL is the retention, set again by every write, so an idle
// conversation leaves Redis without a sweep.
func TestRedisRecordExpiresAfterRetention(t *testing.T) {
	r := sharedRedisServer(t)
	raw := rawClient(t, r)
	ctx := context.Background()
	const retention = 2 * time.Hour
	s := openTestRedis(t, r, RedisOptions{Retention: retention, SweepInterval: -1})
	mustUpdate(t, s, keyA, func(*Record) error { return nil })
	rk := s.recordKey(keyA.encode())
	ttl, err := raw.PTTL(ctx, rk).Result()
	if err != nil || ttl <= retention/2 || ttl > retention {
		t.Fatalf("TTL after a write = %v, %v; want about %v", ttl, err, retention)
	}
	// Shorten it behind the store's back: the next write sets it again.
	raw.PExpire(ctx, rk, time.Second)
	mustUpdate(t, s, keyA, func(r *Record) error { r.Requests++; return nil })
	if ttl, _ := raw.PTTL(ctx, rk).Result(); ttl <= time.Second {
		t.Fatalf("TTL after a second write = %v; want the retention again", ttl)
	}

	forever := openTestRedis(t, r, RedisOptions{Retention: -1, SweepInterval: -1})
	mustUpdate(t, forever, keyA, func(*Record) error { return nil })
	if ttl, _ := raw.PTTL(ctx, forever.recordKey(keyA.encode())).Result(); ttl != -1 {
		t.Fatalf("TTL with retention < 0 = %v; want none (-1)", ttl)
	}
}

// Replicas share a Redis: two stores on one Redis serialise concurrent
// Updates of one key, so no replica's turn is lost.
func TestTwoRedisStoresDoNotLoseConcurrentUpdates(t *testing.T) {
	r := sharedRedisServer(t)
	opts := RedisOptions{Prefix: fmt.Sprintf("two%d:", redisPrefixes.Add(1)), WriteTimeout: contractWriteTimeout, SweepInterval: -1}
	a, b := openTestRedis(t, r, opts), openTestRedis(t, r, opts)
	const workers, increments = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers)
	for w := range 2 * workers {
		s := a
		if w%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for range increments {
				// A request: Get, then the turn's write.
				if _, _, err := s.Get(keyA); err != nil {
					errs <- err
					return
				}
				if _, err := s.Update(keyA, func(r *Record) error { r.AddTurn(Turn{TokensBefore: 10, TokensAfter: 7}); return nil }); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, s := range []*redisStore{a, b} {
		if rec := mustGet(t, s, keyA); rec.Requests != 2*workers*increments {
			t.Fatalf("requests = %d, want %d: an update was lost", rec.Requests, 2*workers*increments)
		}
	}
}

// A Redis that dies mid-run makes every call fail, not hang; the proxy then
// goes on state-less.
func TestRedisKilledMidRunReturnsErrors(t *testing.T) {
	r := needRedis(t)
	s := openTestRedis(t, r, RedisOptions{SweepInterval: -1})
	mustUpdate(t, s, keyA, func(*Record) error { return nil })
	mustGet(t, s, keyA)
	r.Stop()
	start := time.Now()
	if _, _, err := s.Get(keyA); err == nil {
		t.Error("Get on a dead Redis: no error")
	}
	t.Logf("Get on a dead Redis failed after %v", time.Since(start))
	if _, err := s.Update(keyA, func(*Record) error { return nil }); err == nil {
		t.Error("Update on a dead Redis: no error")
	}
	if _, _, err := s.UpdateMany([]Mutation{{Key: keyA, Fn: func(*Record) error { return nil }}}); err == nil {
		t.Error("UpdateMany on a dead Redis: no error")
	}
	if _, err := s.List(ListOptions{}); err == nil {
		t.Error("List on a dead Redis: no error")
	}
}

// A Redis that stops answering (stopped, overloaded, partitioned) costs a
// request its read or write timeout, then an error; never a hang.
func TestRedisThatStopsAnsweringTimesOut(t *testing.T) {
	r := needRedis(t)
	s := openTestRedis(t, r, RedisOptions{ReadTimeout: 50 * time.Millisecond, WriteTimeout: 100 * time.Millisecond, SweepInterval: -1})
	mustUpdate(t, s, keyA, func(*Record) error { return nil })
	if err := r.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Signal(syscall.SIGCONT) })
	start := time.Now()
	if _, _, err := s.Get(keyA); !isTimeout(err) {
		t.Errorf("Get on a stopped Redis: %v; want a timeout", err)
	}
	t.Logf("Get on a stopped Redis failed after %v (read timeout 50ms)", time.Since(start))
	if _, err := s.Update(keyA, func(*Record) error { return nil }); !isTimeout(err) {
		t.Errorf("Update on a stopped Redis: %v; want a timeout", err)
	}
	if _, err := s.Update(keyB, func(*Record) error { return nil }); !isTimeout(err) {
		t.Errorf("Update of an unread key on a stopped Redis: %v; want a timeout", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout()
}

// A Redis written by a newer ctxpress is refused, as a newer bolt file is.
func TestRedisNewerSchemaIsRefused(t *testing.T) {
	r := sharedRedisServer(t)
	prefix := fmt.Sprintf("schema%d:", redisPrefixes.Add(1))
	rawClient(t, r).Set(context.Background(), prefix+"schema_version", SchemaVersion+1, 0)
	_, err := OpenRedis(RedisOptions{URL: r.URL(), Prefix: prefix})
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("OpenRedis on a newer schema: %v; want ErrSchemaTooNew", err)
	}
}

// roundTrips counts the round trips a client makes: one per command, one
// per pipeline or transaction.
type roundTrips struct{ n atomic.Int64 }

// handshake are the commands of a new connection, not of a request.
var handshake = map[string]bool{"hello": true, "auth": true, "select": true, "client": true}

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake[cmd.Name()] {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !handshake[cmds[0].Name()] {
			h.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// count returns the round trips f made.
func (h *roundTrips) count(f func()) int64 {
	before := h.n.Load()
	f()
	return h.n.Load() - before
}

// A request costs one read (its Get) and one write (the turn's
// UpdateMany), for a new conversation and for a going one; a write after
// another replica's costs one more.
func TestRedisRequestIsOneReadAndOneWrite(t *testing.T) {
	r := sharedRedisServer(t)
	opts := RedisOptions{Prefix: fmt.Sprintf("rt%d:", redisPrefixes.Add(1)), SweepInterval: -1}
	s, other := openTestRedis(t, r, opts), openTestRedis(t, r, opts)
	h := &roundTrips{}
	s.client.AddHook(h)
	turn := []Mutation{{Key: keyA, Fn: func(r *Record) error { r.AddTurn(Turn{TokensBefore: 2, TokensAfter: 1}); return nil }}}
	for _, c := range []struct {
		name   string
		before func()
		reads  int64
		writes int64
	}{
		{"new conversation", func() {}, 1, 1},
		{"second turn", func() {}, 1, 1},
		{"after another replica's turn, between this one's read and write", nil, 1, 2},
	} {
		var writes int64
		reads := h.count(func() {
			if _, _, err := s.Get(keyA); err != nil {
				t.Fatal(err)
			}
		})
		if c.before == nil {
			mustUpdate(t, other, keyA, func(r *Record) error { r.Requests++; return nil })
		}
		writes = h.count(func() {
			if _, errs, err := s.UpdateMany(turn); err != nil || errs[0] != nil {
				t.Fatal(err, errs[0])
			}
		})
		t.Logf("%s: %d read, %d write round trips", c.name, reads, writes)
		if reads != c.reads || writes != c.writes {
			t.Errorf("%s: %d read and %d write round trips; want %d and %d", c.name, reads, writes, c.reads, c.writes)
		}
	}
	if rec := mustGet(t, s, keyA); rec.Requests != 4 {
		t.Fatalf("requests = %d, want 4", rec.Requests)
	}
}

// A Redis restarted (or failed over) has lost the scripts the store loaded:
// writes load them again instead of failing.
func TestRedisThatLostItsScriptsStillWrites(t *testing.T) {
	r := needRedis(t)
	s := openTestRedis(t, r, RedisOptions{SweepInterval: -1})
	mustUpdate(t, s, keyA, func(r *Record) error { r.Requests++; return nil })
	if err := rawClient(t, r).ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if rec := mustUpdate(t, s, keyA, func(r *Record) error { r.Requests++; return nil }); rec.Requests != 2 {
		t.Fatalf("requests = %d, want 2", rec.Requests)
	}
	rawClient(t, r).ScriptFlush(context.Background())
	if n, err := s.Sweep(time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("Sweep after the flush = %d, %v; want the record deleted", n, err)
	}
}
