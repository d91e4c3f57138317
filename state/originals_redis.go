package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/ctxpress/ctxpress/expand"
)

// On Redis each original is a string key, the prefix, "o:" and its
// originalKey, holding encodeOriginal's bytes with the retention as TTL.
// Beside them, for the cap and the sweep: a sorted set of their keys by
// put time (microseconds), a hash of their sizes, and the sum of the
// sizes. The scripts keep the four in step, so replicas sharing the Redis
// share one cap. A put first renews what is kept, sending references
// only, and sends the texts of the others alone.
func (s *redisStore) originalPrefix() string    { return s.prefix + "o:" }
func (s *redisStore) originalsIndexKey() string { return s.prefix + "originals" }
func (s *redisStore) originalsSizeKey() string  { return s.prefix + "originals:size" }
func (s *redisStore) originalsBytesKey() string { return s.prefix + "originals:bytes" }

func (s *redisStore) originalsKeys() []string {
	return []string{s.originalsIndexKey(), s.originalsSizeKey(), s.originalsBytesKey()}
}

// touchOriginalsScript renews the originals kept among the members given,
// each only when its put time is renewEvery old, and answers 1 for each
// one kept, 0 for each one not.
//
// KEYS: index, sizes, bytes. ARGV: the value keys' prefix, TTL in ms ("0":
// none), now and renewEvery in µs, then the members.
var touchOriginalsScript = redis.NewScript(`
local now, every = tonumber(ARGV[3]), tonumber(ARGV[4])
local out = {}
for i = 5, #ARGV do
  local m = ARGV[i]
  local k = ARGV[1] .. m
  if redis.call('EXISTS', k) == 1 and redis.call('HEXISTS', KEYS[2], m) == 1 then
    local at = tonumber(redis.call('ZSCORE', KEYS[1], m) or '0')
    if now - at >= every then
      redis.call('ZADD', KEYS[1], ARGV[3], m)
      if ARGV[2] ~= '0' then redis.call('PEXPIRE', k, ARGV[2]) end
    end
    out[#out+1] = 1
  else
    out[#out+1] = 0
  end
end
return out
`)

// putOriginalsScript keeps originals (one another replica kept meanwhile
// is renewed instead), then evicts the least recently put while the sum
// of sizes is over the cap, and answers how many it evicted.
//
// KEYS: index, sizes, bytes. ARGV: the value keys' prefix, TTL in ms ("0":
// none), now in µs, the cap, then per original its member, bytes and size.
var putOriginalsScript = redis.NewScript(`
local total = tonumber(redis.call('GET', KEYS[3]) or '0')
for i = 5, #ARGV, 3 do
  local m = ARGV[i]
  local k = ARGV[1] .. m
  local old = redis.call('HGET', KEYS[2], m)
  if old and redis.call('EXISTS', k) == 1 then
    if ARGV[2] ~= '0' then redis.call('PEXPIRE', k, ARGV[2]) end
  else
    if old then total = total - tonumber(old) end
    if ARGV[2] ~= '0' then
      redis.call('SET', k, ARGV[i+1], 'PX', ARGV[2])
    else
      redis.call('SET', k, ARGV[i+1])
    end
    redis.call('HSET', KEYS[2], m, ARGV[i+2])
    total = total + tonumber(ARGV[i+2])
  end
  redis.call('ZADD', KEYS[1], ARGV[3], m)
end
local cap, evicted = tonumber(ARGV[4]), 0
while total > cap do
  local first = redis.call('ZRANGE', KEYS[1], 0, 0)
  if #first == 0 then total = 0 break end
  local m = first[1]
  redis.call('DEL', ARGV[1] .. m)
  redis.call('ZREM', KEYS[1], m)
  total = total - tonumber(redis.call('HGET', KEYS[2], m) or '0')
  redis.call('HDEL', KEYS[2], m)
  evicted = evicted + 1
end
if total < 0 then total = 0 end
redis.call('SET', KEYS[3], string.format('%d', total))
return evicted
`)

// sweepOriginalsScript deletes up to a limit of the originals put before
// a bound and answers how many it deleted; those the TTL removed leave
// their index and size entries until then.
//
// KEYS: index, sizes, bytes. ARGV: the value keys' prefix, the bound in µs
// (exclusive), the limit.
var sweepOriginalsScript = redis.NewScript(`
local doomed = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2], 'LIMIT', 0, ARGV[3])
local total = tonumber(redis.call('GET', KEYS[3]) or '0')
for _, m in ipairs(doomed) do
  redis.call('DEL', ARGV[1] .. m)
  redis.call('ZREM', KEYS[1], m)
  total = total - tonumber(redis.call('HGET', KEYS[2], m) or '0')
  redis.call('HDEL', KEYS[2], m)
end
if total < 0 then total = 0 end
redis.call('SET', KEYS[3], string.format('%d', total))
return #doomed
`)

func (s *redisStore) ttlArg() string { return strconv.FormatInt(s.ttl.Milliseconds(), 10) }

func (s *redisStore) PutOriginals(ns string, os []expand.Original) error {
	if err := checkOriginals(ns, os); err != nil {
		return err
	}
	if s.closed.Load() {
		return errClosed("put originals")
	}
	seen := make(map[string]bool, len(os))
	var members []any
	var put []expand.Original
	for _, o := range os {
		if m := originalKey(ns, o.Ref); !seen[m] {
			seen[m] = true
			members = append(members, m)
			put = append(put, o)
		}
	}
	if len(put) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
	defer cancel()
	now := strconv.FormatInt(s.now().UnixMicro(), 10)
	args := append([]any{s.originalPrefix(), s.ttlArg(), now, renewEvery.Microseconds()}, members...)
	kept, err := touchOriginalsScript.Run(ctx, s.client, s.originalsKeys(), args...).Int64Slice()
	if err != nil {
		return s.fail("put originals", err)
	}
	args = []any{s.originalPrefix(), s.ttlArg(), now, s.originalsCap}
	for i, o := range put {
		size := originalSize(ns, o)
		if i < len(kept) && kept[i] == 1 || size > s.originalsCap {
			continue // kept already; or so big it would push out everything and still not fit
		}
		args = append(args, members[i], encodeOriginal(o), size)
	}
	if len(args) == 4 {
		return nil
	}
	if err := putOriginalsScript.Run(ctx, s.client, s.originalsKeys(), args...).Err(); err != nil {
		return s.fail("put originals", err)
	}
	return nil
}

func (s *redisStore) GetOriginal(ns, ref string) (expand.Original, bool, error) {
	if err := checkOriginal(ns, ref); err != nil {
		return expand.Original{}, false, err
	}
	if s.closed.Load() {
		return expand.Original{}, false, errClosed("get original")
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.readTimeout)
	defer cancel()
	return s.readOriginal(ctx, "get original", originalKey(ns, ref), ref)
}

// readOriginal reads the original kept under member.
func (s *redisStore) readOriginal(ctx context.Context, op, member, ref string) (expand.Original, bool, error) {
	data, err := s.client.Get(ctx, s.originalPrefix()+member).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return expand.Original{}, false, nil
	case err != nil:
		return expand.Original{}, false, s.fail(op, err)
	}
	o, err := decodeOriginal(ref, data)
	if err != nil {
		return expand.Original{}, false, err
	}
	return o, true, nil
}

// FindOriginal scans the index for the reference's members: the operator's
// lookup reads the originals' index, not the records' keys.
func (s *redisStore) FindOriginal(ref string) (expand.Original, bool, error) {
	if !expand.ValidRef(ref) {
		return expand.Original{}, false, ErrBadRef
	}
	if s.closed.Load() {
		return expand.Original{}, false, errClosed("find original")
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
	defer cancel()
	var cursor uint64
	for {
		members, next, err := s.client.ZScan(ctx, s.originalsIndexKey(), cursor, ref+"*", sweepBatch).Result()
		if err != nil {
			return expand.Original{}, false, s.fail("find original", err)
		}
		// ZSCAN answers member, score, member, score, ...
		for i := 0; i < len(members); i += 2 {
			if o, ok, err := s.readOriginal(ctx, "find original", members[i], ref); ok || err != nil {
				return o, ok, err
			}
		}
		if cursor = next; cursor == 0 {
			return expand.Original{}, false, nil
		}
	}
}

// sweepOriginals deletes the originals put before olderThan, a batch per
// round trip.
func (s *redisStore) sweepOriginals(olderThan int64) error {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
		n, err := sweepOriginalsScript.Run(ctx, s.client, s.originalsKeys(),
			s.originalPrefix(), olderThan, sweepBatch).Int()
		cancel()
		if err != nil {
			return fmt.Errorf("originals: %w", err)
		}
		if n < sweepBatch {
			return nil
		}
	}
}
