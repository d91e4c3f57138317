package state

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// sweepBatch is how many keys a Sweep reads (and deletes) per round trip.
const sweepBatch = 500

// List reads the whole index (one round trip), orders and pages it, and
// reads the page's records (one more). A record the TTL removed but the
// index still names is skipped, like an undecodable one.
func (s *redisStore) List(opts ListOptions) ([]Record, error) {
	if s.closed.Load() {
		return nil, errClosed("list")
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
	defer cancel()
	members, err := s.client.ZRangeWithScores(ctx, s.indexKey(), 0, -1).Result()
	if err != nil {
		return nil, s.fail("list", err)
	}
	var entries []listEntry
	for _, m := range members {
		k, _ := m.Member.(string)
		if opts.Namespace != "" && !strings.HasPrefix(k, string(namespacePrefix(opts.Namespace))) || !opts.matches([]byte(k)) {
			continue
		}
		entries = append(entries, listEntry{key: []byte(k), updatedAt: time.UnixMicro(int64(m.Score))})
	}
	entries = opts.page(entries)
	if len(entries) == 0 {
		return nil, nil
	}
	keys := make([]string, len(entries))
	for i, e := range entries {
		keys[i] = s.recordKey(e.key)
	}
	vals, err := s.client.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, s.fail("list", err)
	}
	var out []Record
	for i, v := range vals {
		str, ok := v.(string)
		if !ok {
			continue
		}
		key, _ := decodeKey(entries[i].key)
		if rec, err := decodeRecord(key, []byte(str)); err == nil {
			out = append(out, rec)
		}
	}
	return out, nil
}

// Sweep scans every record (the TTL has removed most idle ones already;
// this finds the rest, those whose clock says so and the undecodable),
// deletes each unless it changed since it was read, and drops the index
// entries of records the TTL removed.
func (s *redisStore) Sweep(olderThan time.Time) (int, error) {
	if s.closed.Load() {
		return 0, errClosed("sweep")
	}
	n := 0
	var cursor uint64
	for {
		var keys []string
		var err error
		ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
		keys, cursor, err = s.client.Scan(ctx, cursor, s.prefix+"r:*", sweepBatch).Result()
		if err == nil && len(keys) > 0 {
			var d int
			d, err = s.sweepKeys(ctx, keys, olderThan)
			n += d
		}
		cancel()
		if err != nil {
			return n, s.fail("sweep", err)
		}
		if cursor == 0 {
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
	defer cancel()
	// Every record below the bound is gone now; what the index still has
	// there is the TTL's leftovers.
	bound := "(" + strconv.FormatInt(olderThan.UnixMicro(), 10)
	if err := s.client.ZRemRangeByScore(ctx, s.indexKey(), "-inf", bound).Err(); err != nil {
		return n, s.fail("sweep", err)
	}
	if err := s.sweepOriginals(olderThan.UnixMicro()); err != nil {
		return n, s.fail("sweep", err)
	}
	return n, nil
}

// sweepKeys deletes, among keys, the records idle since before olderThan
// or undecodable.
func (s *redisStore) sweepKeys(ctx context.Context, keys []string, olderThan time.Time) (int, error) {
	vals, err := s.client.MGet(ctx, keys...).Result()
	if err != nil {
		return 0, err
	}
	var doomed []string
	var args []any
	for i, v := range vals {
		str, ok := v.(string)
		if !ok {
			continue // expired since the scan
		}
		if at, ok := decodeStamp([]byte(str)); ok && !at.Before(olderThan) {
			continue
		}
		member := strings.TrimPrefix(keys[i], s.prefix+"r:")
		s.hints.drop(member)
		doomed = append(doomed, keys[i])
		args = append(args, digest([]byte(str)), member)
	}
	if len(doomed) == 0 {
		return 0, nil
	}
	d, err := sweepScript.Run(ctx, s.client, append(doomed, s.indexKey()), args...).Int()
	return d, err
}

func (s *redisStore) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.sweeper.Stop()
	s.broadcast.stopPublishing()
	s.hints.clear()
	if err := s.client.Close(); err != nil && err != redis.ErrClosed {
		return fmt.Errorf("state: close redis: %w", err)
	}
	return nil
}
