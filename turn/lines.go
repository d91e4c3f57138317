package turn

import (
	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// lineOf finds the line of rec that the request res extends and returns it
// with the numbers the request is judged by: the line's own, or, for a new
// line, none but the calibration of the model's other lines. A line whose
// model differs from the request's lends its breaker, not its numbers.
func lineOf(rec *state.Record, res rewrite.Result) (state.LineRef, state.Line) {
	return lineOfChain(rec, res.HistoryChain(), res.Model)
}

// lineOfChain is lineOf for a request of model whose history has chain.
func lineOfChain(rec *state.Record, chain [][32]byte, model string) (state.LineRef, state.Line) {
	if len(chain) == 0 {
		return state.LineRef{}, state.Line{}
	}
	n := len(chain) - 1
	ref := state.LineRef{Tip: chain[n], Messages: n}
	i := rec.MatchChain(chain)
	if i < 0 {
		ref.ID, ref.Chain = ref.Tip, chain
		cal := history.Calibration{Ratio: rec.CalibrationFor(model)}
		return ref, state.Line{ID: ref.ID, Numbers: history.Numbers{Model: model, Calibration: cal}}
	}
	l := rec.Lines[i]
	ref.ID = l.ID
	if l.Model != model {
		l.Numbers = rewrite.NumbersForModel(l.Numbers, model, rec.CalibrationFor(model))
	}
	return ref, l
}

// observeWindow gives l the window a refusal of one of its requests
// showed (rewrite.Observe's rule: a smaller one only).
func observeWindow(l *state.Line, window int) {
	l.Numbers, _ = rewrite.Observe(l.Numbers, rewrite.Observation{RefusedWindow: window})
}
