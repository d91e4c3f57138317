package rewrite

import (
	"testing"

	"github.com/ctxpress/ctxpress/internal/corpustest"
	"github.com/tidwall/gjson"
)

// corpusDir returns the shared corpus, skipping the test when it is absent.
func corpusDir(tb testing.TB) string { return corpustest.Dir(tb) }

// findCorpus returns the corpus directory, or "" and why it is missing.
func findCorpus() (dir, why string) { return corpustest.Find() }

// trace is one corpus request body.
type trace struct {
	name string
	body []byte
}

// loadTraces reads every corpus trace, sorted by name.
func loadTraces(tb testing.TB) []trace {
	tb.Helper()
	var ts []trace
	for _, c := range corpustest.Traces(tb) {
		ts = append(ts, trace{name: c.Name, body: c.Body})
	}
	return ts
}

// corpusOutput is one tool output text of the corpus with its call.
type corpusOutput struct {
	trace string
	call  ToolCall
	text  string
}

// corpusOutputs returns every tool output text (string contents and text
// parts) of the corpus over minBytes, with the call that produced it.
func corpusOutputs(tb testing.TB, minBytes int) []corpusOutput {
	tb.Helper()
	var outs []corpusOutput
	for _, tr := range loadTraces(tb) {
		req, _ := parseRequest(tr.body)
		calls := map[string]ToolCall{}
		for i := range req.messages {
			m := &req.messages[i]
			m.result(m.toolCalls).ForEach(func(_, tc gjson.Result) bool {
				calls[tc.Get("id").String()] = ToolCall{Name: tc.Get("function.name").String(), Arguments: tc.Get("function.arguments").String()}
				return true
			})
			if m.role != "tool" {
				continue
			}
			add := func(t gjson.Result) {
				if len(t.Str) > minBytes {
					outs = append(outs, corpusOutput{tr.name, calls[m.toolCallID], t.Str})
				}
			}
			content := m.result(m.content)
			if content.Type == gjson.String {
				add(content)
			}
			content.ForEach(func(_, part gjson.Result) bool {
				if t, ok := squashablePart(part); ok {
					add(t)
				}
				return true
			})
		}
	}
	return outs
}
