package rewrite

import "math"

// Calibration bounds. Tokenizers really differ by more than 2x from o200k
// (llama.cpp's stories260K counts 2.3x more), so the absolute bounds are
// wide; what keeps one odd turn (a server that counts a cached prefix
// differently, a truncated answer) from swinging the estimate wildly is
// the step bound: a turn moves a ratio at most 2x either way.
const (
	minCalibration     = 0.25
	maxCalibration     = 4.0
	maxCalibrationStep = 2.0
)

// minSlopeDelta is the least growth, in tiktoken's tokens, between two
// counted requests from which a marginal ratio is learnt: a smaller one is
// mostly noise (a reply's few tokens, rounding).
const minSlopeDelta = 32

// Calibration turns tiktoken's count of a request into what its upstream
// will count, from what the upstream reported for earlier requests of the
// same history. Tokenizers differ in two ways: per token (a small local
// model's counts 2-3x more) and per request (a chat template's markers,
// counted per message, can be dozens of tokens a message for a small
// vocabulary). So an estimate anchors on the last request the upstream
// counted and scales only the difference, by the marginal ratio learnt
// from consecutive requests (Slope); with no anchor, the whole is scaled
// by the average ratio (Ratio). The zero Calibration knows nothing:
// Upstream returns tiktoken's count.
type Calibration struct {
	// LastInput is the upstream's count of the last request it reported
	// on, LastEstimate tiktoken's count of that same request; 0 when
	// unknown.
	LastInput, LastEstimate int
	// Ratio is the upstream's count over tiktoken's, per request, and
	// Slope the same for the growth between two requests; 0 when unknown.
	Ratio, Slope float64
}

// Upstream is the estimate of what the upstream counts for a request that
// tiktoken counts raw: the upstream's own count when raw is exactly the
// request it counted last.
func (c Calibration) Upstream(raw int) int {
	if c.anchored() {
		v := float64(c.LastInput) + float64(raw-c.LastEstimate)*c.slope()
		return int(math.Round(max(v, float64(raw)*minCalibration)))
	}
	return int(math.Round(float64(raw) * c.ratio()))
}

// Raw is the inverse of Upstream: the tiktoken count of a request the
// upstream would count as upstream tokens.
func (c Calibration) Raw(upstream int) int {
	if c.anchored() {
		return max(int(float64(c.LastEstimate)+float64(upstream-c.LastInput)/c.slope()), 0)
	}
	return int(float64(upstream) / c.ratio())
}

// Observe returns c after the upstream reported input tokens for a request
// tiktoken counted raw: that request becomes the anchor, the ratio moves
// toward input/raw, and the slope toward the growth's ratio when the
// request grew (or shrank) enough since the last anchor for it to mean
// something. Each moves at most 2x a turn, within [0.25, 4].
func (c Calibration) Observe(raw, input int) Calibration {
	if raw <= 0 || input <= 0 {
		return c
	}
	if c.anchored() {
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

// Scale is the average ratio (upstream count over tiktoken's), 1 when
// unknown: for converting budgets and sizes between the two.
func (c Calibration) Scale() float64 { return c.ratio() }

func (c Calibration) anchored() bool { return c.LastInput > 0 && c.LastEstimate > 0 }

func (c Calibration) slope() float64 {
	if c.Slope > 0 {
		return c.Slope
	}
	return c.ratio()
}

func (c Calibration) ratio() float64 {
	if c.Ratio > 0 && !math.IsInf(c.Ratio, 0) {
		return c.Ratio
	}
	return 1
}

// nextRatio folds one observed ratio into the previous one (0 when none).
func nextRatio(prev, observed float64) float64 {
	r := observed
	if prev > 0 {
		r = min(max(r, prev/maxCalibrationStep), prev*maxCalibrationStep)
	}
	return min(max(r, minCalibration), maxCalibration)
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
