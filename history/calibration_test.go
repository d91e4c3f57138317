package history

import (
	"math"
	"testing"
)

func TestCalibrationUpstream(t *testing.T) {
	for _, tc := range []struct {
		what string
		c    Calibration
		raw  int
		want int
	}{
		{"nothing known: tiktoken's count", Calibration{}, 1000, 1000},
		{"no anchor: the average ratio", Calibration{Ratio: 2}, 1000, 2000},
		{"the very request the upstream counted", Calibration{LastInput: 1234, LastEstimate: 1000, Ratio: 2}, 1000, 1234},
		{"growth scaled by the ratio before a slope is known", Calibration{LastInput: 1800, LastEstimate: 900, Ratio: 2}, 1000, 2000},
		{"growth scaled by the slope", Calibration{LastInput: 174, LastEstimate: 55, Ratio: 3.16, Slope: 2.1}, 173, 422},
		{"a smaller request (compacted)", Calibration{LastInput: 450, LastEstimate: 900, Ratio: 0.5}, 1000, 500},
		{"never under the absolute bound", Calibration{LastInput: 100, LastEstimate: 5000, Ratio: 1}, 1000, 250},
	} {
		if got := tc.c.Upstream(tc.raw); got != tc.want {
			t.Errorf("%s: Upstream(%d) = %d, want %d", tc.what, tc.raw, got, tc.want)
		}
		if tc.want > 250 {
			if back := tc.c.Raw(tc.want); math.Abs(float64(back-tc.raw)) > 1 {
				t.Errorf("%s: Raw(%d) = %d, want %d", tc.what, tc.want, back, tc.raw)
			}
		}
	}
}

// Upstream is one estimator for every request of a line, monotone in the
// raw count: a request ctxpress shrank never reads as larger than the one
// the client sent, whatever the line's ratio, slope and anchor.
func TestUpstreamIsMonotone(t *testing.T) {
	cals := []Calibration{{}, {Ratio: 1.2}, {Ratio: 0.3}, {LastInput: 20000, LastEstimate: 10000, Ratio: 1.2, Slope: 1},
		{LastInput: 5000, LastEstimate: 10000, Ratio: 2, Slope: 0.25}, {LastInput: 9000, LastEstimate: 3000, Ratio: 1, Slope: 4},
		{LastInput: 100, LastEstimate: 50000, Ratio: 0.25}}
	for _, c := range cals {
		prev := c.Upstream(0)
		for raw := 1; raw <= 200000; raw += 97 {
			if got := c.Upstream(raw); got < prev {
				t.Fatalf("%+v: Upstream(%d) = %d < Upstream(%d) = %d", c, raw, got, raw-97, prev)
			} else {
				prev = got
			}
		}
	}
}
