package state

import "github.com/redis/go-redis/v9"

// casScript writes a record only if the stored bytes are still the ones
// its caller read (compared by SHA-1, "" for none), refreshing the TTL and
// the List index in the same step. It answers {1} when written, else {0}
// or {0, current bytes}, so a conflicting writer retries on the current
// record without another read.
//
// KEYS: record, index. ARGV: expected sha1, new bytes, TTL in ms ("0":
// none), index score, index member.
var casScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
local h = ''
if cur then h = redis.sha1hex(cur) end
if h ~= ARGV[1] then
  if cur then return {0, cur} end
  return {0}
end
if ARGV[3] ~= '0' then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[2])
end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
return {1}
`)

// sweepScript deletes the records the sweep found idle or undecodable,
// each only if it is still the bytes the sweep read (a replica may have
// updated it since), and returns how many it deleted.
//
// KEYS: records..., index (last). ARGV: per record its sha1 then its index
// member.
var sweepScript = redis.NewScript(`
local idx = KEYS[#KEYS]
local n = 0
for i = 1, #KEYS - 1 do
  local cur = redis.call('GET', KEYS[i])
  if cur and redis.sha1hex(cur) == ARGV[2*i-1] then
    redis.call('DEL', KEYS[i])
    redis.call('ZREM', idx, ARGV[2*i])
    n = n + 1
  end
end
return n
`)
