package state

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a real redis-server on 127.0.0.1, without persistence, in
// a temporary directory.
type redisServer struct {
	cmd  *exec.Cmd
	dir  string
	addr string
	done chan struct{} // closed when the process has exited
}

func (r *redisServer) url() string { return "redis://" + r.addr }

// startRedisServer starts redis-server on a free port and returns once it
// says it accepts connections. ok is false when the binary is missing.
func startRedisServer() (*redisServer, bool, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, false, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, true, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	dir, err := os.MkdirTemp("", "ctxpress-redis-")
	if err != nil {
		return nil, true, err
	}
	r := &redisServer{dir: dir, addr: fmt.Sprintf("127.0.0.1:%d", port), done: make(chan struct{})}
	r.cmd = exec.Command(bin, "--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--dir", dir,
		"--save", "", "--appendonly", "no", "--logfile", "")
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		return nil, true, err
	}
	if err := r.cmd.Start(); err != nil {
		return nil, true, err
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		said := false
		var log strings.Builder
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if !said && strings.Contains(sc.Text(), "Ready to accept connections") {
				said = true
				ready <- true
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = r.cmd.Wait()
		if !said {
			fmt.Fprint(os.Stderr, log.String())
			ready <- false
		}
		close(r.done)
	}()
	if !<-ready {
		return nil, true, fmt.Errorf("redis-server on port %d exited before it was ready", port)
	}
	return r, true, nil
}

// stop kills the server and waits for it.
func (r *redisServer) stop() {
	_ = r.cmd.Process.Kill()
	<-r.done
	_ = os.RemoveAll(r.dir)
}

// needRedis starts a redis-server of the test's own, stopped when it ends.
// It skips the test without the binary, unless CTXPRESS_REQUIRE_REDIS=1.
func needRedis(t testing.TB) *redisServer {
	t.Helper()
	r, ok, err := startRedisServer()
	if !ok {
		skipNoRedis(t)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	return r
}

func skipNoRedis(t testing.TB) {
	t.Helper()
	if os.Getenv("CTXPRESS_REQUIRE_REDIS") == "1" {
		t.Fatal("redis-server not found and CTXPRESS_REQUIRE_REDIS=1 (apt-get install redis-server)")
	}
	t.Skip("redis-server not found: the Redis store is not tested (apt-get install redis-server)")
}

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
		sharedRedis.stop()
	}
	os.Exit(code)
}

func sharedRedisServer(t testing.TB) *redisServer {
	t.Helper()
	sharedRedisOnce.Do(func() { sharedRedis, sharedRedisOK, sharedRedisErr = startRedisServer() })
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
	opts.URL = r.url()
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
	c := redis.NewClient(&redis.Options{Addr: r.addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
