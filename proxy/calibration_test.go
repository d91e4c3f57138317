package proxy

import "testing"

func TestNextCalibration(t *testing.T) {
	for _, tc := range []struct{ prev, observed, want float64 }{
		{0, 2.32, 2.32},  // a small model's tokenizer: taken as observed
		{0, 9, 4},        // absolute bound
		{0, 0.1, 0.25},   // absolute bound
		{1, 3, 2},        // one odd turn moves it at most 2x
		{1, 0.2, 0.5},    // either way
		{2.32, 2.2, 2.2}, // normal drift
	} {
		if got := nextCalibration(tc.prev, tc.observed); got != tc.want {
			t.Errorf("nextCalibration(%v, %v) = %v, want %v", tc.prev, tc.observed, got, tc.want)
		}
	}
}
