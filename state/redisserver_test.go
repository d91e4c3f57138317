package state

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// redisServer is a real redis-server (internal/redistest).
type redisServer = redistest.Server

func needRedis(t testing.TB) *redisServer { return redistest.Need(t) }

func skipNoRedis(t testing.TB) { redistest.Skip(t) }

// contractWriteTimeout is the Redis store's write bound in the contract
// suite.
const contractWriteTimeout = 10 * time.Second

// The contract suite shares one server; each store gets its own prefix.
var (
	sharedRedisOnce sync.Once
	sharedRedis     *redisServer
	sharedRedisOK   bool
	sharedRedisErr  error
	redisPrefixes   atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedRedis != nil {
		sharedRedis.Stop()
	}
	os.Exit(code)
}

func sharedRedisServer(t testing.TB) *redisServer {
	t.Helper()
	sharedRedisOnce.Do(func() { sharedRedis, sharedRedisOK, sharedRedisErr = redistest.Start() })
	if !sharedRedisOK {
		skipNoRedis(t)
	}
	if sharedRedisErr != nil {
		t.Fatal(sharedRedisErr)
	}
	return sharedRedis
}

// openTestRedis opens a store on r under a prefix no other store of the
// run uses, closed when the test ends.
func openTestRedis(t testing.TB, r *redisServer, opts RedisOptions) *redisStore {
	t.Helper()
	opts.URL = r.URL()
	if opts.Prefix == "" {
		opts.Prefix = fmt.Sprintf("t%d:", redisPrefixes.Add(1))
	}
	s, err := OpenRedis(opts)
	if err != nil {
		t.Fatalf("OpenRedis: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s.(*redisStore)
}

// redisImpl is the Redis store under the contract suite.
func redisImpl() impl {
	return impl{
		name: "redis",
		open: func(t *testing.T, o testOptions) Store {
			return openTestRedis(t, sharedRedisServer(t), RedisOptions{
				// Generous: 32 writers on one key under -race on a busy machine.
				WriteTimeout: contractWriteTimeout,
				Now:          o.Now, Retention: o.Retention, SweepInterval: o.interval(), OnSweep: o.OnSweep,
				OriginalsMaxBytes: o.OriginalsMaxBytes,
			})
		},
		putRaw: func(t *testing.T, s Store, key Key, data []byte) {
			t.Helper()
			rs := s.(*redisStore)
			if err := rs.client.Set(context.Background(), rs.recordKey(key.encode()), data, 0).Err(); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// rawClient is a client of the test's own on r.
func rawClient(t testing.TB, r *redisServer) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
