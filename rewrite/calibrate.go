package rewrite

import "github.com/ctxpress/ctxpress/history"

// maxCalibrationStep bounds a turn's move of a ratio, 2x either way: it
// keeps one odd turn (a server that counts a cached prefix differently, a
// truncated answer) from swinging the estimate wildly. The absolute bounds
// are history.MinRatio and MaxRatio.
const maxCalibrationStep = 2.0

// minSlopeDelta is the least growth, in tiktoken's tokens, between two
// counted requests from which a marginal ratio is learnt: a smaller one is
// mostly noise (a reply's few tokens, rounding).
const minSlopeDelta = 32

// nextCalibration returns c after the upstream reported input tokens for a
// request tiktoken counted raw: that request becomes the anchor, the ratio
// moves toward input/raw, and the slope toward the growth's ratio when the
// request grew (or shrank) enough since the last anchor for it to mean
// something. Each moves at most 2x a turn, within [MinRatio, MaxRatio].
func nextCalibration(c history.Calibration, raw, input int) history.Calibration {
	if raw <= 0 || input <= 0 {
		return c
	}
	if c.Anchored() {
		if d := raw - c.LastEstimate; abs(d) >= max(minSlopeDelta, raw/50) {
			if obs := float64(input-c.LastInput) / float64(d); obs > 0 {
				prev := c.Slope
				if prev == 0 {
					prev = c.Ratio
				}
				c.Slope = nextRatio(prev, obs)
			}
		}
	}
	c.Ratio = nextRatio(c.Ratio, float64(input)/float64(raw))
	c.LastInput, c.LastEstimate = input, raw
	return c
}

// nextRatio folds one observed ratio into the previous one (0 when none).
func nextRatio(prev, observed float64) float64 {
	r := observed
	if prev > 0 {
		r = min(max(r, prev/maxCalibrationStep), prev*maxCalibrationStep)
	}
	return min(max(r, history.MinRatio), history.MaxRatio)
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
