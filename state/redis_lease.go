package state

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

var _ Leaser = (*redisStore)(nil)

// releaseScript deletes a lease only while it holds the caller's token, and
// renewScript extends it only then: a holder whose lease expired and was
// taken by another replica never touches that one's.
//
// KEYS: lease. ARGV: token (renew: and the TTL in ms).
var (
	releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)
	renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`)
)

func (s *redisStore) leaseKey(name string) string { return s.prefix + "lease:" + name }

// Acquire is SET key token NX PX ttl, bounded by the write timeout; the
// token is random, so only this holder's Renew and Release act on it.
func (s *redisStore) Acquire(name string, ttl time.Duration) (Lease, bool, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	l := &redisLease{s: s, key: s.leaseKey(name), token: hex.EncodeToString(b[:]), ttl: ttl, stop: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
	defer cancel()
	ok, err := s.client.SetNX(ctx, l.key, l.token, ttl).Result()
	if err != nil {
		return nil, false, s.fail("acquire lease", err)
	}
	if !ok {
		return nil, false, nil
	}
	l.renewing.Add(1)
	go l.renew()
	return l, true, nil
}

// redisLease is one held lease and its renewal.
type redisLease struct {
	s        *redisStore
	key      string
	token    string
	ttl      time.Duration
	stop     chan struct{} // closed by stopRenewing
	once     sync.Once
	renewing sync.WaitGroup
}

// renew extends the lease every ttl/3 until stopped or lost.
func (l *redisLease) renew() {
	defer l.renewing.Done()
	t := time.NewTicker(max(l.ttl/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			// A failed renewal is retried on the next tick: the lease still
			// has two thirds of its ttl.
			if held, err := l.Renew(); err == nil && !held {
				return
			}
		}
	}
}

func (l *redisLease) Renew() (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), l.s.writeTimeout)
	defer cancel()
	n, err := renewScript.Run(ctx, l.s.client, []string{l.key}, l.token, l.ttl.Milliseconds()).Int()
	if err != nil {
		return false, l.s.fail("renew lease", err)
	}
	return n == 1, nil
}

// stopRenewing ends the renewal and waits for it, so no renewal follows.
func (l *redisLease) stopRenewing() {
	l.once.Do(func() { close(l.stop) })
	l.renewing.Wait()
}

func (l *redisLease) Release() error {
	l.stopRenewing()
	ctx, cancel := context.WithTimeout(context.Background(), l.s.writeTimeout)
	defer cancel()
	if err := releaseScript.Run(ctx, l.s.client, []string{l.key}, l.token).Err(); err != nil {
		return l.s.fail("release lease", err)
	}
	return nil
}
