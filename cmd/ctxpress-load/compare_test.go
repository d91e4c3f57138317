package main

import (
	"testing"
	"time"
)

func TestMedianOf(t *testing.T) {
	for _, tt := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{0.7}, 0.7},
		{[]float64{0.70, 0.55, 0.60}, 0.60},
		{[]float64{0.70, 0.55, 0.58, 0.62}, 0.60},
	} {
		if got := medianOf(tt.xs); got != tt.want {
			t.Errorf("medianOf(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
}

// Rounds merged are one run: all their requests over all their time, the
// percentiles over every latency, the errors summed.
func TestMergedSummary(t *testing.T) {
	round := func(d time.Duration, lat ...time.Duration) *stats {
		s := &stats{start: time.Unix(0, 0)}
		s.stop = s.start.Add(d)
		s.add(lat)
		return s
	}
	a := round(time.Second, 1*time.Millisecond, 2*time.Millisecond)
	b := round(3*time.Second, 3*time.Millisecond, 4*time.Millisecond, 5*time.Millisecond, 6*time.Millisecond)
	b.fail("status %d", 502)
	got := mergedSummary([]*stats{a, b})
	if got.n != 6 || got.rps != 1.5 || got.p50 != 4*time.Millisecond || got.errs != 1 || got.firstErr != "status 502" {
		t.Errorf("merged %+v", got)
	}
	if r := roundRatios([]*stats{a, b}, []*stats{b, b}); len(r) != 2 || r[0] != 2/(4.0/3) || r[1] != 1 {
		t.Errorf("round ratios %v", r)
	}
}
