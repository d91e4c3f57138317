package state

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults for the zero values of RedisOptions.
const (
	DefaultRedisPrefix       = "ctxpress:"
	DefaultRedisReadTimeout  = 200 * time.Millisecond
	DefaultRedisWriteTimeout = time.Second
)

// maxCASAttempts bounds an Update's retries under contention; the write
// timeout bounds them in time.
const maxCASAttempts = 1000

// RedisOptions configures OpenRedis. URL is required; the rest has
// defaults and means what it means in BoltOptions.
type RedisOptions struct {
	// URL is redis://[user:password@]host:port[/db] (rediss:// for TLS).
	URL string
	// Prefix starts every key the store uses, so several deployments can
	// share one Redis; 0-9, a-z, A-Z and ":_.-" only. "" means
	// DefaultRedisPrefix.
	Prefix string
	// ReadTimeout bounds a Get (and List) whole; 0 means 200 ms.
	ReadTimeout time.Duration
	// WriteTimeout bounds an Update, UpdateMany or Delete whole, retries
	// included, and each batch of a Sweep; 0 means 1 s.
	WriteTimeout  time.Duration
	Retention     time.Duration // 0: DefaultRetention; <0: keep forever (no TTL)
	SweepInterval time.Duration // 0: DefaultSweepInterval; <0: no background sweep
	Now           func() time.Time
	OnSweep       func(removed int, err error)
	// OriginalsMaxBytes caps the originals kept (PutOriginals), shared by
	// every replica; 0 means DefaultOriginalsMaxBytes, a negative value
	// no cap.
	OriginalsMaxBytes int64
}

// redisStore is the Store on Redis, for replicas that share their state.
// Each record is a string key holding the bolt store's encoding, with a
// TTL of the retention; a sorted set by UpdatedAt indexes them for List.
// Writes are compare-and-set Lua scripts (casScript): optimistic like
// WATCH/MULTI, but one round trip per attempt instead of four, and the
// bytes the last Get saw (hints) make the usual attempt the only one.
type redisStore struct {
	client       *redis.Client
	prefix       string
	readTimeout  time.Duration
	writeTimeout time.Duration
	ttl          time.Duration // 0: none
	originalsCap int64
	now          func() time.Time
	sweeper      *sweeper
	hints        *hintCache
	broadcast    redisBroadcast
	closed       atomic.Bool
}

var _ Store = (*redisStore)(nil)

var prefixPattern = regexp.MustCompile(`^[0-9A-Za-z:_.-]*$`)

// OpenRedis connects to the Redis at opts.URL, checks (and on a new Redis
// writes) the schema version, and starts the background sweep unless
// disabled. Errors wrap ErrSchemaTooNew, ErrNotDatabase (a schema key that
// is not ours) or the connection's error.
func OpenRedis(opts RedisOptions) (Store, error) {
	prefix := cmp.Or(opts.Prefix, DefaultRedisPrefix)
	if !prefixPattern.MatchString(prefix) {
		return nil, fmt.Errorf("state: open redis: key prefix %q: only 0-9, a-z, A-Z and \":_.-\"", prefix)
	}
	ro, err := parseRedisURL(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("state: open redis: %w", err)
	}
	s := &redisStore{
		prefix:       prefix,
		readTimeout:  cmp.Or(opts.ReadTimeout, DefaultRedisReadTimeout),
		writeTimeout: cmp.Or(opts.WriteTimeout, DefaultRedisWriteTimeout),
		hints:        newHintCache(),
		originalsCap: originalsCap(opts.OriginalsMaxBytes),
	}
	// Every call carries a deadline; the socket timeouts only back it up.
	ro.ContextTimeoutEnabled = true
	ro.DialTimeout = s.writeTimeout
	ro.ReadTimeout, ro.WriteTimeout = s.writeTimeout, s.writeTimeout
	ro.PoolTimeout = s.writeTimeout
	// A dead Redis refuses at once: fail then, not after go-redis's five
	// dials 100 ms apart. One retry still covers a pooled connection that
	// a restarted Redis closed.
	ro.DialerRetries, ro.MaxRetries = 1, 1
	ro.DisableIdentity = true // no CLIENT SETINFO round trip per connection
	quietOnce.Do(func() { redis.SetLogger(quiet{}) })
	s.client = redis.NewClient(ro)
	if err := s.checkSchema(); err != nil {
		_ = s.client.Close()
		return nil, fmt.Errorf("state: open redis %s: %w", ro.Addr, err)
	}
	rs := resolveRetention(opts.Retention, opts.SweepInterval, opts.Now, opts.OnSweep)
	s.now = rs.now
	if rs.retention > 0 {
		s.ttl = rs.retention
	}
	s.sweeper = startSweeper(rs, s.Sweep)
	return s, nil
}

// checkSchema is bolt's meta check: the schema version sits beside the
// records and a newer one is refused. It also loads the scripts, so the
// first request does not pay for it.
func (s *redisStore) checkSchema() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
	defer cancel()
	k := s.prefix + "schema_version"
	if err := s.client.SetNX(ctx, k, SchemaVersion, 0).Err(); err != nil {
		return err
	}
	raw, err := s.client.Get(ctx, k).Result()
	if err != nil {
		return err
	}
	v, err := strconv.Atoi(raw)
	switch {
	case err != nil || v < 1:
		return fmt.Errorf("%w: bad schema version %q at %s", ErrNotDatabase, raw, k)
	case v > SchemaVersion:
		return fmt.Errorf("%w: schema version %d, this ctxpress reads up to %d", ErrSchemaTooNew, v, SchemaVersion)
	}
	for _, sc := range []*redis.Script{casScript, sweepScript} {
		if err := sc.Load(ctx, s.client).Err(); err != nil {
			return err
		}
	}
	return nil
}

// quiet drops go-redis's own log lines: it would print a dial failure per
// request while Redis is down, and the proxy already reports store
// failures once per interval.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var quietOnce sync.Once

func (s *redisStore) recordKey(k []byte) string { return s.prefix + "r:" + string(k) }
func (s *redisStore) indexKey() string          { return s.prefix + "updated" }

// score is a record's place in the index: UpdatedAt in microseconds, exact
// in a float64 for the next 200 years.
func score(t time.Time) float64 { return float64(t.UnixMicro()) }

// fail wraps a failure of op; a closed client is ErrClosed.
func (s *redisStore) fail(op string, err error) error {
	if errors.Is(err, redis.ErrClosed) || s.closed.Load() {
		err = ErrClosed
	}
	return fmt.Errorf("state: %s: %w", op, err)
}

func (s *redisStore) Get(key Key) (Record, bool, error) {
	if err := key.Validate(); err != nil {
		return Record{}, false, err
	}
	if s.closed.Load() {
		return Record{}, false, errClosed("get")
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.readTimeout)
	defer cancel()
	k := string(key.encode())
	data, err := s.client.Get(ctx, s.recordKey([]byte(k))).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		s.hints.put(k, nil)
		return Record{}, false, nil
	case err != nil:
		s.hints.drop(k)
		return Record{}, false, s.fail("get", err)
	}
	rec, err := decodeRecord(key, data)
	if err != nil {
		return Record{}, false, fmt.Errorf("state: get: %w", err)
	}
	s.hints.put(k, data)
	return rec, true, nil
}

func (s *redisStore) Update(key Key, fn func(*Record) error) (Record, error) {
	recs, errs, err := s.UpdateMany([]Mutation{{Key: key, Fn: fn}})
	if err != nil {
		return Record{}, err
	}
	return recs[0], errs[0]
}

// pendingKey is one record of an UpdateMany: its mutations, in order, and
// the bytes they start from.
type pendingKey struct {
	key  Key
	k    string // storage key
	muts []int  // indexes into the batch
	old  []byte // nil: no record
	cmd  *redis.Cmd
}

// UpdateMany reads the records it has no hint for in one round trip,
// applies each record's mutations in order, and writes them all in one
// MULTI/EXEC of casScripts (one round trip, nothing written if it fails).
// The records another writer changed meanwhile are redone from the bytes
// the script returned, so fn may run more than once.
func (s *redisStore) UpdateMany(muts []Mutation) ([]Record, []error, error) {
	recs, errs := make([]Record, len(muts)), make([]error, len(muts))
	if s.closed.Load() {
		return recs, errs, errClosed("update")
	}
	var pending []*pendingKey
	byKey := map[string]*pendingKey{}
	for i, m := range muts {
		if err := m.Key.Validate(); err != nil {
			errs[i] = err
			continue
		}
		k := string(m.Key.encode())
		p := byKey[k]
		if p == nil {
			p = &pendingKey{key: m.Key, k: k}
			byKey[k] = p
			pending = append(pending, p)
		}
		p.muts = append(p.muts, i)
	}
	if len(pending) == 0 {
		return recs, errs, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
	defer cancel()
	if err := s.readMissing(ctx, pending); err != nil {
		return recs, errs, s.fail("update", err)
	}
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt == maxCASAttempts {
			return recs, errs, fmt.Errorf("state: update: %d conflicting writes in a row", attempt)
		}
		var err error
		if pending, err = s.writePending(ctx, pending, muts, recs, errs); err != nil {
			for _, p := range pending {
				s.hints.drop(p.k)
			}
			return recs, errs, s.fail("update", err)
		}
	}
	return recs, errs, nil
}

// readMissing fills in old for the keys without a hint, in one MGET.
func (s *redisStore) readMissing(ctx context.Context, pending []*pendingKey) error {
	var need []*pendingKey
	for _, p := range pending {
		if h, ok := s.hints.get(p.k); ok {
			p.old = h.data
		} else {
			need = append(need, p)
		}
	}
	if len(need) == 0 {
		return nil
	}
	keys := make([]string, len(need))
	for i, p := range need {
		keys[i] = s.recordKey([]byte(p.k))
	}
	vals, err := s.client.MGet(ctx, keys...).Result()
	if err != nil {
		return err
	}
	for i, v := range vals {
		if str, ok := v.(string); ok {
			need[i].old = []byte(str)
		}
	}
	return nil
}

// writePending runs every pending key's mutations on its old bytes and
// sends the writes in one transaction. It returns the keys to redo: those
// another writer changed, with old set to the bytes it left.
func (s *redisStore) writePending(ctx context.Context, pending []*pendingKey, muts []Mutation, recs []Record, errs []error) ([]*pendingKey, error) {
	now := s.now()
	ttl := strconv.FormatInt(s.ttl.Milliseconds(), 10)
	type write struct {
		p    *pendingKey
		data []byte
		recs map[int]Record
		at   time.Time // the written record's UpdatedAt: its index score
	}
	var writes []write
	for _, p := range pending {
		w := write{p: p, recs: map[int]Record{}}
		cur := p.old
		for _, i := range p.muts {
			errs[i] = nil
			// Each mutation decodes its own copy: fn may keep slices of
			// the record it was given.
			rec, data, err := applyUpdate(p.key, cur, muts[i].at(now), muts[i].Fn)
			var ue errUser
			if errors.As(err, &ue) {
				errs[i] = ue.err
				continue
			}
			if err != nil {
				return nil, err
			}
			w.recs[i], w.data, w.at, cur = rec, data, rec.UpdatedAt, data
		}
		if w.data != nil {
			writes = append(writes, w)
		}
	}
	if len(writes) == 0 {
		return nil, nil
	}
	_, err := s.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, w := range writes {
			w.p.cmd = casScript.EvalSha(ctx, pipe, []string{s.recordKey([]byte(w.p.k)), s.indexKey()},
				digest(w.p.old), w.data, ttl, score(w.at), w.p.k)
		}
		return nil
	})
	if err != nil && !redis.HasErrorPrefix(err, "NOSCRIPT") {
		return pending, err
	}
	noScript := false
	var redo []*pendingKey
	for _, w := range writes {
		res, cerr := w.p.cmd.Slice()
		switch {
		case cerr != nil && redis.HasErrorPrefix(cerr, "NOSCRIPT"):
			noScript = true // Redis restarted and lost it: load and redo
			redo = append(redo, w.p)
			continue
		case cerr != nil:
			return pending, cerr
		}
		if ok, _ := res[0].(int64); ok == 1 {
			for i, r := range w.recs {
				recs[i] = r
			}
			s.hints.put(w.p.k, w.data)
			continue
		}
		w.p.old = nil
		if len(res) > 1 {
			str, _ := res[1].(string)
			w.p.old = []byte(str)
		}
		redo = append(redo, w.p)
	}
	if noScript {
		if err := casScript.Load(ctx, s.client).Err(); err != nil {
			return redo, err
		}
	}
	return redo, nil
}

func (s *redisStore) Delete(key Key) (bool, error) {
	if err := key.Validate(); err != nil {
		return false, err
	}
	if s.closed.Load() {
		return false, errClosed("delete")
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
	defer cancel()
	k := string(key.encode())
	s.hints.drop(k)
	var del *redis.IntCmd
	_, err := s.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		del = pipe.Del(ctx, s.recordKey([]byte(k)))
		pipe.ZRem(ctx, s.indexKey(), k)
		return nil
	})
	if err != nil {
		return false, s.fail("delete", err)
	}
	return del.Val() == 1, nil
}

// CheckRedisURL reports whether OpenRedis can use u, for validating a
// config without connecting.
func CheckRedisURL(u string) error {
	_, err := parseRedisURL(u)
	return err
}

// parseRedisURL is redis.ParseURL whose errors never quote the URL: it may
// hold a password.
func parseRedisURL(u string) (*redis.Options, error) {
	o, err := redis.ParseURL(u)
	var ue *url.Error
	if errors.As(err, &ue) {
		err = fmt.Errorf("not a redis:// URL: %w", ue.Err)
	}
	return o, err
}
