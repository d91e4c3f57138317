package state

import (
	"context"
	"testing"
	"time"
)

// twoReplicaLeasers are two stores on one Redis and prefix, each with its
// own client: two replicas.
func twoReplicaLeasers(t *testing.T) (a, b *redisStore) {
	t.Helper()
	r := sharedRedisServer(t)
	a = openTestRedis(t, r, RedisOptions{})
	b = openTestRedis(t, r, RedisOptions{Prefix: a.prefix})
	return a, b
}

func mustAcquire(t *testing.T, s Leaser, name string, ttl time.Duration) (Lease, bool) {
	t.Helper()
	l, ok, err := s.Acquire(name, ttl)
	if err != nil {
		t.Fatalf("Acquire %q: %v", name, err)
	}
	return l, ok
}

func TestLeaseIsHeldByOneReplicaAtATime(t *testing.T) {
	a, b := twoReplicaLeasers(t)
	la, ok := mustAcquire(t, a, "branch", time.Minute)
	if !ok {
		t.Fatal("the first replica did not get a free lease")
	}
	if _, ok := mustAcquire(t, b, "branch", time.Minute); ok {
		t.Fatal("the second replica got a lease the first holds")
	}
	if _, ok := mustAcquire(t, a, "branch", time.Minute); ok {
		t.Fatal("the holder's own second Acquire got the lease again")
	}
	if _, ok := mustAcquire(t, b, "other branch", time.Minute); !ok {
		t.Fatal("a lease of another name is not free")
	}
	if err := la.Release(); err != nil {
		t.Fatal(err)
	}
	if _, ok := mustAcquire(t, b, "branch", time.Minute); !ok {
		t.Fatal("the lease is not free after its holder released it")
	}
}

func TestLeaseOutlivesItsTTLWhileHeld(t *testing.T) {
	a, b := twoReplicaLeasers(t)
	const ttl = 300 * time.Millisecond
	start := time.Now()
	la, ok := mustAcquire(t, a, "branch", ttl)
	if !ok {
		t.Fatal("no lease")
	}
	defer la.Release()
	// Wait for three times the ttl, checking all along that it is held.
	for time.Since(start) < 3*ttl {
		if _, ok := mustAcquire(t, b, "branch", ttl); ok {
			t.Fatalf("the lease went %v after it was taken, its holder renewing it", time.Since(start))
		}
		<-time.After(ttl / 10)
	}
	if held, err := la.Renew(); err != nil || !held {
		t.Fatalf("Renew of a held lease: held %v, %v", held, err)
	}
}

// waitFree polls until s gets the lease name (for ttl), which must happen
// long before the bound: the lease it waits for has a far shorter ttl.
func waitFree(t *testing.T, s Leaser, name string, ttl time.Duration) Lease {
	t.Helper()
	bound := time.After(30 * time.Second)
	for {
		if l, ok := mustAcquire(t, s, name, ttl); ok {
			return l
		}
		select {
		case <-bound:
			t.Fatal("the lease never expired")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestLeaseOfAReplicaThatStoppedExpires(t *testing.T) {
	a, b := twoReplicaLeasers(t)
	const ttl = 200 * time.Millisecond
	la, ok := mustAcquire(t, a, "branch", ttl)
	if !ok {
		t.Fatal("no lease")
	}
	la.(*redisLease).stopRenewing() // the replica died
	lb := waitFree(t, b, "branch", time.Minute)
	defer lb.Release()
	if held, err := la.Renew(); err != nil || held {
		t.Fatalf("Renew of an expired lease another took: held %v, %v", held, err)
	}
}

func TestLeaseReleaseByANonHolderLeavesItHeld(t *testing.T) {
	a, b := twoReplicaLeasers(t)
	const ttl = 200 * time.Millisecond
	la, ok := mustAcquire(t, a, "branch", ttl)
	if !ok {
		t.Fatal("no lease")
	}
	la.(*redisLease).stopRenewing()
	lb := waitFree(t, b, "branch", time.Minute)
	if err := la.Release(); err != nil { // a, whose lease expired, is no holder
		t.Fatal(err)
	}
	if _, ok := mustAcquire(t, a, "branch", time.Minute); ok {
		t.Fatal("the old holder's Release freed the new holder's lease")
	}
	pttl, err := b.client.PTTL(context.Background(), b.leaseKey("branch")).Result()
	if err != nil || pttl <= ttl {
		t.Fatalf("the new holder's lease: ttl %v, %v; want its own minute", pttl, err)
	}
	if err := lb.Release(); err != nil {
		t.Fatal(err)
	}
	if _, ok := mustAcquire(t, a, "branch", time.Minute); !ok {
		t.Fatal("the lease is not free after its holder released it")
	}
}
