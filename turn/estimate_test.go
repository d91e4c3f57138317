package turn

import (
	"testing"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// The headers, the log line and the record read one estimator: a request
// the rewrite shrank reads smaller after than before, however the line's
// average ratio and marginal slope disagree (before: 19,200 / 25,000 on
// the line below, the before scaled by the ratio, the after by the anchor
// and slope).
func TestTokensAfterNeverExceedBeforeWhenNothingWasAdded(t *testing.T) {
	lines := []state.Line{
		{},
		{Numbers: history.Numbers{Calibration: history.Calibration{Ratio: 1.2}}},
		{Numbers: history.Numbers{Calibration: history.Calibration{LastInput: 20000, LastEstimate: 10000, Ratio: 1.2, Slope: 1}}},
		{Numbers: history.Numbers{Calibration: history.Calibration{LastInput: 5000, LastEstimate: 10000, Ratio: 2, Slope: 0.25}}},
		{Numbers: history.Numbers{Calibration: history.Calibration{LastInput: 9000, LastEstimate: 3000, Ratio: 1, Slope: 4}}},
	}
	for _, l := range lines {
		for _, raw := range [][2]int{{16000, 15000}, {5661, 5600}, {19387, 12000}, {800, 799}, {1000, 1000}} {
			tr := Turn{ts: &Turns{}, nums: l}
			tr.setResult(rewrite.Result{TokensBefore: raw[0], TokensAfter: raw[1]})
			if tr.TokensAfter() > tr.TokensBefore() || tr.TokensBefore() != l.Calibration.Upstream(raw[0]) {
				t.Errorf("line %+v, raw %v: before %d, after %d", l, raw, tr.TokensBefore(), tr.TokensAfter())
			}
		}
	}
}
