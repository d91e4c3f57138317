package rewrite

import "testing"

// What a request would have used sent as the client wrote it: each rule a
// row.
func TestDirectUsage(t *testing.T) {
	caching := CacheSeen{Reads: true}
	anthropic := CacheSeen{Reads: true, Writes: true}
	for _, tc := range []struct {
		name  string
		turn  DirectTurn
		cache CacheSeen
		want  Usage
	}{
		{"the first request of a history has nothing cached",
			DirectTurn{Sent: 5000, After: 3000, Forwarded: Usage{Input: 3000, Output: 40}}, caching,
			Usage{Input: 5000, Output: 40}},
		{"a sticky client reads what its previous request sent from the cache",
			DirectTurn{Sent: 12000, After: 6000, PrevSent: 10000, Forwarded: Usage{Input: 6000, Cached: 5500, Output: 40}}, caching,
			Usage{Input: 12000, Cached: 10000, Output: 40}},
		{"the size is the reported one plus what ctxpress removed, so the estimate's error cancels",
			DirectTurn{Sent: 1200, After: 1000, PrevSent: 500, Forwarded: Usage{Input: 800}}, caching,
			Usage{Input: 1000, Cached: 500}},
		{"a request ctxpress left alone costs what it cost",
			DirectTurn{Sent: 651, After: 651, PrevSent: 51, Forwarded: Usage{Input: 418, Cached: 51, Output: 5}}, caching,
			Usage{Input: 418, Cached: 51, Output: 5}},
		{"a summary ctxpress added is not the client's",
			DirectTurn{Sent: 9000, After: 9400, PrevSent: 8000, Forwarded: Usage{Input: 9400}}, caching,
			Usage{Input: 9000, Cached: 8000}},
		{"the output is the forwarded request's",
			DirectTurn{Sent: 100, After: 100, PrevSent: 50, Forwarded: Usage{Input: 100, Output: 777}}, caching,
			Usage{Input: 100, Cached: 50, Output: 777}},
		{"an upstream that never showed a cache caches nothing",
			DirectTurn{Sent: 12000, After: 6000, PrevSent: 10000, Forwarded: Usage{Input: 6000, Output: 40}}, CacheSeen{},
			Usage{Input: 12000, Output: 40}},
		{"an upstream that bills writes writes the new part",
			DirectTurn{Sent: 12000, After: 6000, PrevSent: 10000, Forwarded: Usage{Input: 6000, Cached: 5000, CacheWrite: 1000}}, anthropic,
			Usage{Input: 12000, Cached: 10000, CacheWrite: 2000}},
		{"and all of a first request",
			DirectTurn{Sent: 8000, After: 8000, Forwarded: Usage{Input: 8000, CacheWrite: 8000}}, anthropic,
			Usage{Input: 8000, CacheWrite: 8000}},
		{"a previous request it does not know: at least what the forwarded one read",
			DirectTurn{Sent: 12000, After: 9000, Forwarded: Usage{Input: 9000, Cached: 8000}}, caching,
			Usage{Input: 12000, Cached: 8000}},
		{"an edited history shorter than its predecessor reads at most itself",
			DirectTurn{Sent: 4000, After: 4000, PrevSent: 9000, Forwarded: Usage{Input: 4000}}, caching,
			Usage{Input: 4000, Cached: 4000}},
		{"under server history the provider's part is in the reported size, cached as it was",
			DirectTurn{Sent: 3000, After: 1000, PrevSent: 50000, Forwarded: Usage{Input: 50000, Cached: 48000, Output: 30}}, caching,
			Usage{Input: 52000, Cached: 50000, Output: 30}},
		{"an estimate far off never makes a negative request",
			DirectTurn{Sent: 10, After: 5000, Forwarded: Usage{Input: 300}}, caching,
			Usage{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DirectUsage(tc.turn, tc.cache); got != tc.want {
				t.Errorf("DirectUsage(%+v, %+v) = %+v, want %+v", tc.turn, tc.cache, got, tc.want)
			}
		})
	}
}

// Over a run, the estimate is what the client's own requests cost with
// the cache a sticky client has: at gpt-5's prices, three growing turns
// that ctxpress forwarded at half their size.
func TestDirectUsageOverARun(t *testing.T) {
	gpt5 := Prices{1.25, 0.125, 1.25, 10}
	var direct float64
	prev := 0
	for _, sent := range []int{10_000, 20_000, 30_000} {
		d := DirectUsage(DirectTurn{Sent: sent, After: sent / 2, PrevSent: prev, Forwarded: Usage{Input: sent / 2, Output: 100}}, CacheSeen{Reads: true})
		direct += gpt5.Cost(d)
		prev = d.Input
	}
	// Fresh: 10k + 10k + 10k at 1.25; cached: 10k + 20k at 0.125; output 300 at 10.
	want := (30_000*1.25 + 30_000*0.125 + 300*10) / 1e6
	if direct < want-1e-12 || direct > want+1e-12 {
		t.Fatalf("direct cost %v, want %v", direct, want)
	}
}
