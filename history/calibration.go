package history

import "math"

// The bounds of a calibration ratio (Ratio, Slope). Tokenizers really
// differ by more than 2x from o200k (llama.cpp's stories260K counts 2.3x
// more), so they are wide; rewrite keeps what it learns within them, and
// Upstream never estimates under MinRatio of tiktoken's count.
const (
	MinRatio = 0.25
	MaxRatio = 4.0
)

// Calibration turns tiktoken's count of a request into what its upstream
// will count, from what the upstream reported for earlier requests of the
// same history. Tokenizers differ in two ways: per token (a small local
// model's counts 2-3x more) and per request (a chat template's markers,
// counted per message, can be dozens of tokens a message for a small
// vocabulary). So an estimate anchors on the last request the upstream
// counted and scales only the difference, by the marginal ratio learnt
// from consecutive requests (Slope); with no anchor, the whole is scaled
// by the average ratio (Ratio). The zero Calibration knows nothing:
// Upstream returns tiktoken's count. What a reported usage teaches it is
// rewrite's (Observe).
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
	if c.Anchored() {
		v := float64(c.LastInput) + float64(raw-c.LastEstimate)*c.slope()
		return int(math.Round(max(v, float64(raw)*MinRatio)))
	}
	return int(math.Round(float64(raw) * c.ratio()))
}

// Raw is the inverse of Upstream: the tiktoken count of a request the
// upstream would count as upstream tokens.
func (c Calibration) Raw(upstream int) int {
	if c.Anchored() {
		return max(int(float64(c.LastEstimate)+float64(upstream-c.LastInput)/c.slope()), 0)
	}
	return int(float64(upstream) / c.ratio())
}

// Scale is the average ratio (upstream count over tiktoken's), 1 when
// unknown: for converting budgets and sizes between the two.
func (c Calibration) Scale() float64 { return c.ratio() }

// Anchored reports whether c knows a request both counted, which
// estimates then start from.
func (c Calibration) Anchored() bool { return c.LastInput > 0 && c.LastEstimate > 0 }

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
