package rewrite

import (
	"math"
	"testing"

	"github.com/ctxpress/ctxpress/history"
)

func TestCalibrationObserve(t *testing.T) {
	// llama.cpp's stories260K: a chat template counted per message and a
	// tokenizer 2.1x o200k's. A 55-token first request reads 3.16x.
	var c history.Calibration
	c = nextCalibration(c, 55, 174)
	if c.Ratio != 174.0/55 || c.Slope != 0 || c.LastInput != 174 {
		t.Fatalf("after one turn: %+v", c)
	}
	c = nextCalibration(c, 173, 419) // grew by 118: slope 2.08
	if math.Abs(c.Slope-245.0/118) > 1e-9 {
		t.Fatalf("slope %v, want %v", c.Slope, 245.0/118)
	}
	if got, want := c.Upstream(290), 419+int(math.Round(117*245.0/118)); got != want {
		t.Errorf("third turn estimate %d, want %d", got, want)
	}
	// A reply of a few tokens says nothing about the slope.
	if d := nextCalibration(c, 180, 440); d.Slope != c.Slope {
		t.Errorf("a 7-token growth moved the slope to %v", d.Slope)
	}
	for _, tc := range []struct{ prev, observed, want float64 }{
		{0, 2.32, 2.32},  // a small model's tokenizer: taken as observed
		{0, 9, 4},        // absolute bound
		{0, 0.1, 0.25},   // absolute bound
		{1, 3, 2},        // one odd turn moves it at most 2x
		{1, 0.2, 0.5},    // either way
		{2.32, 2.2, 2.2}, // normal drift
	} {
		if got := nextRatio(tc.prev, tc.observed); got != tc.want {
			t.Errorf("nextRatio(%v, %v) = %v, want %v", tc.prev, tc.observed, got, tc.want)
		}
	}
}
