package main

import (
	"strconv"
	"testing"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/tidwall/gjson"
)

// The upstream counts ctxpress's summary calls in both forms: since
// summaries reuse the prompt cache, most are the conversation's own
// history with the instruction appended, which the tool used to count as
// agent turns (its runs reported 0 summary calls).
func TestSummaryCallsAreCountedInEitherForm(t *testing.T) {
	q := strconv.Quote
	for _, tc := range []struct {
		name, messages string
		summary        bool
	}{
		{"transcript", `[{"role":"user","content":` + q(compactor.SummarizerLead+" the transcript") + `}]`, true},
		{"history, instruction on its own", `[{"role":"user","content":"fix it"},{"role":"assistant","content":"ok"},{"role":"user","content":` + q(compactor.HistoryLead+" now") + `}]`, true},
		{"history, instruction joined to the ask", `[{"role":"user","content":` + q("fix the build\n\n"+compactor.HistoryLead+" now") + `}]`, true},
		{"agent turn", `[{"role":"user","content":"fix the build"}]`, false},
		{"agent turn after a tool result", `[{"role":"user","content":"fix"},{"role":"tool","tool_call_id":"c","content":` + q(compactor.HistoryLead) + `}]`, false},
	} {
		if got := isSummaryCall(gjson.Parse(tc.messages)); got != tc.summary {
			t.Errorf("%s: summary call %v, want %v", tc.name, got, tc.summary)
		}
	}
}
