package main

import (
	"math"
	"runtime/debug"
)

// memoryBase is the heap ctxpress needs beyond its rewrite cache: requests
// in flight (bodies of up to max_body_bytes, their parse and rewrite), the
// conversation record cache, the tokenizers' tables and the runtime.
const memoryBase int64 = 32 << 20

// memoryLimit is the soft limit of the Go heap for a rewrite cache bound
// of cacheBytes: the cache, as much again for the garbage the collector
// has not reclaimed yet, and memoryBase. At the limit the collector runs
// more often instead of letting RSS grow, so a daemon's memory follows
// cache_bytes rather than the GOGC-doubled peak of its live heap.
func memoryLimit(cacheBytes int64) int64 {
	if cacheBytes < 0 { // caching disabled
		cacheBytes = 0
	}
	if cacheBytes > (math.MaxInt64-memoryBase)/2 {
		return math.MaxInt64
	}
	return 2*cacheBytes + memoryBase
}

// applyMemoryLimit sets the Go heap's soft limit from cacheBytes, unless
// the user chose one with GOMEMLIMIT (the runtime has then applied it,
// "off" included). It returns the limit in force and whether it came from
// GOMEMLIMIT.
func applyMemoryLimit(cacheBytes int64, getenv func(string) string) (limit int64, fromEnv bool) {
	if getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1), true
	}
	limit = memoryLimit(cacheBytes)
	debug.SetMemoryLimit(limit)
	return limit, false
}
