package main

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestHeapLimitIsTwiceTheCacheBoundPlusABase(t *testing.T) {
	tests := []struct {
		name       string
		cacheBytes int64
		want       int64
	}{
		{"the default 64 MiB cache: 160 MiB", 64 << 20, 160 << 20},
		{"a 256 MiB cache: 544 MiB", 256 << 20, 544 << 20},
		{"caching disabled: the base alone", -1, memoryBase},
		{"no cache bytes: the base alone", 0, memoryBase},
		{"a bound too large to double: no limit", math.MaxInt64 / 2, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := memoryLimit(tt.cacheBytes); got != tt.want {
				t.Errorf("memoryLimit(%d) = %d, want %d", tt.cacheBytes, got, tt.want)
			}
		})
	}
}

// ctxpress sets the heap limit from cache_bytes at start, so the GC works
// before RSS grows; a GOMEMLIMIT the user set (the runtime applied it
// before main) is left alone.
func TestHeapLimitFromCacheBytesUnlessGOMEMLIMITIsSet(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })

	debug.SetMemoryLimit(123 << 20) // as GOMEMLIMIT=123MiB would
	limit, fromEnv := applyMemoryLimit(64<<20, func(k string) string {
		if k == "GOMEMLIMIT" {
			return "123MiB"
		}
		return ""
	})
	if got := debug.SetMemoryLimit(-1); got != 123<<20 || limit != 123<<20 || !fromEnv {
		t.Errorf("with GOMEMLIMIT set: limit %d (reported %d, from env %v), want the user's %d", got, limit, fromEnv, 123<<20)
	}

	limit, fromEnv = applyMemoryLimit(64<<20, func(string) string { return "" })
	if got := debug.SetMemoryLimit(-1); got != 160<<20 || limit != got || fromEnv {
		t.Errorf("without GOMEMLIMIT: limit %d (reported %d, from env %v), want %d", got, limit, fromEnv, 160<<20)
	}
}
