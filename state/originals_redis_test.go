package state

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/expand"
)

// twoReplicas are two stores on one Redis under one prefix, as two
// ctxpress replicas behind a load balancer.
func twoReplicas(t *testing.T, opts RedisOptions) (a, b *redisStore) {
	t.Helper()
	r := sharedRedisServer(t)
	opts.Prefix = fmt.Sprintf("replicas%d:", redisPrefixes.Add(1))
	opts.SweepInterval = -1
	return openTestRedis(t, r, opts), openTestRedis(t, r, opts)
}

// What one replica kept, another returns byte-exact: an agent's retrieval
// may reach any of them.
func TestRedisOriginalsSeenByASecondReplica(t *testing.T) {
	a, b := twoReplicas(t, RedisOptions{})
	os := sampleOriginals()
	if err := a.PutOriginals(keyA.Namespace, os); err != nil {
		t.Fatal(err)
	}
	for _, want := range os {
		if got := mustGetOriginal(t, b, keyA.Namespace, want.Ref); got != want {
			t.Errorf("the second replica's %s differs (%d bytes, want %d)", want.Ref, len(got.Text), len(want.Text))
		}
		if got, ok, err := b.FindOriginal(want.Ref); !ok || err != nil || got != want {
			t.Errorf("the second replica's FindOriginal(%s) = %v, %v", want.Ref, ok, err)
		}
		if kept(t, b, keyB.Namespace, want.Ref) {
			t.Errorf("the second replica finds %s in another namespace", want.Ref)
		}
	}
}

// The replicas share one cap: what both put counts against it, and the
// least recently put by either goes first.
func TestRedisOriginalsCapSharedByReplicas(t *testing.T) {
	clock := newClock()
	var os []expand.Original
	for i := range 4 {
		os = append(os, expand.New(expand.KindSquash, "bash", fmt.Sprintf("%04d", i)+strings.Repeat("z", 996)))
	}
	size := originalSize(keyA.Namespace, os[0])
	a, b := twoReplicas(t, RedisOptions{Now: clock.Now, OriginalsMaxBytes: 3*size + size/2})
	for i, o := range os {
		clock.Advance(2 * renewEvery)
		s := a
		if i%2 == 1 {
			s = b
		}
		if err := s.PutOriginals(keyA.Namespace, []expand.Original{o}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*redisStore{a, b} {
		for i, o := range os {
			if got := kept(t, s, keyA.Namespace, o.Ref); got != (i > 0) {
				t.Errorf("original %d kept %v, want %v", i, got, i > 0)
			}
		}
	}
	if n, _ := a.client.Get(context.Background(), a.originalsBytesKey()).Int64(); n != 3*size {
		t.Errorf("bytes counted = %d, want %d", n, 3*size)
	}
}

// Each original's key has the retention as TTL, set again when it is put
// again (once its put time is stale), so Redis drops what no replica
// sweeps.
func TestRedisOriginalTTLIsRetention(t *testing.T) {
	clock := newClock()
	const retention = 2 * time.Hour
	a, _ := twoReplicas(t, RedisOptions{Now: clock.Now, Retention: retention})
	raw := rawClient(t, sharedRedisServer(t))
	ctx := context.Background()
	o := expand.New(expand.KindSquash, "bash", "output")
	k := a.originalPrefix() + originalKey(keyA.Namespace, o.Ref)
	if err := a.PutOriginals(keyA.Namespace, []expand.Original{o}); err != nil {
		t.Fatal(err)
	}
	if ttl, err := raw.PTTL(ctx, k).Result(); err != nil || ttl <= retention/2 || ttl > retention {
		t.Fatalf("TTL = %v, %v; want about %v", ttl, err, retention)
	}
	raw.PExpire(ctx, k, time.Minute)
	clock.Advance(2 * renewEvery)
	if err := a.PutOriginals(keyA.Namespace, []expand.Original{o}); err != nil {
		t.Fatal(err)
	}
	if ttl, _ := raw.PTTL(ctx, k).Result(); ttl <= time.Minute {
		t.Fatalf("TTL after putting it again = %v; want the retention again", ttl)
	}

	forever, _ := twoReplicas(t, RedisOptions{Retention: -1})
	if err := forever.PutOriginals(keyA.Namespace, []expand.Original{o}); err != nil {
		t.Fatal(err)
	}
	if ttl, _ := raw.PTTL(ctx, forever.originalPrefix()+originalKey(keyA.Namespace, o.Ref)).Result(); ttl != -1 {
		t.Fatalf("TTL with retention < 0 = %v; want none (-1)", ttl)
	}
}

// An original Redis dropped on its TTL is not found, is kept again when
// put again, and its bytes are not counted twice; the sweep clears what
// the TTL left in the index.
func TestRedisOriginalExpiredByTTL(t *testing.T) {
	clock := newClock()
	a, b := twoReplicas(t, RedisOptions{Now: clock.Now})
	raw := rawClient(t, sharedRedisServer(t))
	ctx := context.Background()
	o := expand.New(expand.KindSquash, "bash", "output")
	other := expand.New(expand.KindSquash, "bash", "another output")
	if err := a.PutOriginals(keyA.Namespace, []expand.Original{o, other}); err != nil {
		t.Fatal(err)
	}
	for _, x := range []expand.Original{o, other} {
		raw.Del(ctx, a.originalPrefix()+originalKey(keyA.Namespace, x.Ref)) // as its TTL would
	}
	if kept(t, b, keyA.Namespace, o.Ref) {
		t.Fatal("found after its key expired")
	}
	if err := b.PutOriginals(keyA.Namespace, []expand.Original{o}); err != nil {
		t.Fatal(err)
	}
	if got := mustGetOriginal(t, a, keyA.Namespace, o.Ref); got != o {
		t.Fatalf("put again after expiring: %+v", got)
	}
	size := originalSize(keyA.Namespace, o) + originalSize(keyA.Namespace, other)
	if n, _ := raw.Get(ctx, a.originalsBytesKey()).Int64(); n != size {
		t.Errorf("bytes counted = %d, want %d (other's until the sweep)", n, size)
	}
	if _, err := a.Sweep(clock.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]int64{a.originalsIndexKey(): 0, a.originalsSizeKey(): 0} {
		if n, _ := raw.Exists(ctx, key).Result(); n != want {
			t.Errorf("%s exists after the sweep", key)
		}
	}
	if n, _ := raw.Get(ctx, a.originalsBytesKey()).Int64(); n != 0 {
		t.Errorf("bytes counted after the sweep = %d, want 0", n)
	}
}

func TestRedisCorruptOriginal(t *testing.T) {
	a, b := twoReplicas(t, RedisOptions{})
	raw := rawClient(t, sharedRedisServer(t))
	o := expand.New(expand.KindSquash, "bash", "output")
	if err := a.PutOriginals(keyA.Namespace, []expand.Original{o}); err != nil {
		t.Fatal(err)
	}
	raw.Set(context.Background(), a.originalPrefix()+originalKey(keyA.Namespace, o.Ref), "{not an original}", 0)
	if _, ok, err := b.GetOriginal(keyA.Namespace, o.Ref); ok || !errors.Is(err, ErrCorrupt) {
		t.Errorf("GetOriginal(garbage) = %v, %v; want an error wrapping ErrCorrupt", ok, err)
	}
	if _, ok, err := b.FindOriginal(o.Ref); ok || !errors.Is(err, ErrCorrupt) {
		t.Errorf("FindOriginal(garbage) = %v, %v; want an error wrapping ErrCorrupt", ok, err)
	}
}
