package squash_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/internal/corpustest"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/wire/chat"
	"github.com/tidwall/gjson"
)

// The fidelity benchmark as the proxy squashes: every corpus tool output of
// at least squash.DefaultMinBytes goes through the rewrite pipeline in the
// request that first shows it (the trace's messages up to the agent's next
// step, a chat-completions body as the agent sent it), so squash sees it
// with its call, under the production config; the output's text in the
// body the pipeline forwards is compared with the original, and a used
// token (TestCorpusFidelity's definition) is kept when it is still in it.
//
//	go test -run TestCorpusFidelityThroughPipeline -v ./squash/
//	go test -run TestCorpusFidelityThroughPipeline -v ./squash/ -fidelity.only=producer=test -fidelity.worst=40

// productionPipeline is the pipeline `ctxpress serve` runs on a chat
// completions route with no config file: config.go's pipelineConfig of
// the defaults (squash, dedup and prune on, their defaults).
func productionPipeline() *rewrite.Pipeline {
	return rewrite.New(rewrite.Config{
		Format: chat.Format{},
		Squash: &squash.Config{MinBytes: squash.DefaultMinBytes, ExemptTools: squash.DefaultExemptTools,
			ShellTools: squash.DefaultShellTools, ReadCommands: squash.DefaultReadCommands,
			ReadMaxBytes: squash.DefaultReadMaxBytes},
		Dedup: rewrite.DefaultDedupConfig(),
		Prune: rewrite.PruneConfig{Enabled: true, MinTokens: rewrite.DefaultPruneMinTokens},
		// What ctxpress on the agent's machine names by default.
		Expand: &expand.Ways{Dir: "/home/user/.cache/ctxpress/originals"},
	})
}

// firstRequest is the chat-completions body an agent sent with the first n
// messages of trace body: its model, those messages and its tools.
func firstRequest(body []byte, n int) []byte {
	msgs := gjson.GetBytes(body, "messages").Array()
	var b strings.Builder
	b.WriteString(`{"model":` + gjson.GetBytes(body, "model").Raw + `,"messages":[`)
	for i, m := range msgs[:n] {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(m.Raw)
	}
	b.WriteByte(']')
	if tools := gjson.GetBytes(body, "tools"); tools.Exists() {
		b.WriteString(`,"tools":` + tools.Raw)
	}
	b.WriteByte('}')
	return []byte(b.String())
}

// forwardedOutput is the text of c's output in a forwarded body.
func forwardedOutput(body []byte, c *squash.FidelityCase) string {
	content := gjson.GetBytes(body, "messages."+strconv.Itoa(c.Message)+".content")
	if c.Part < 0 {
		return content.String()
	}
	return content.Get(strconv.Itoa(c.Part) + ".text").String()
}

// measureThroughPipeline forwards every case's first request through p and
// measures what the output kept.
func measureThroughPipeline(t *testing.T, cases []squash.FidelityCase, p *rewrite.Pipeline) []squash.FidelityOutcome {
	t.Helper()
	bodies := map[string][]byte{}
	for _, tr := range corpustest.Traces(t) {
		bodies[tr.Name] = tr.Body
	}
	type request struct {
		trace string
		n     int
	}
	forwarded := map[request][]byte{}
	labels := squash.New(squash.Config{})
	return squash.MeasureForwarded(cases, labels, func(c *squash.FidelityCase) string {
		r := request{c.Trace, c.Request}
		fwd, ok := forwarded[r]
		if !ok {
			res := p.Rewrite(firstRequest(bodies[c.Trace], c.Request))
			if !res.Understood {
				t.Fatalf("%s: the first %d messages are not understood as a chat request", c.Trace, c.Request)
			}
			fwd = res.Body
			forwarded[r] = fwd
		}
		if orig := forwardedOutput(firstRequest(bodies[c.Trace], c.Request), c); orig != c.Output {
			t.Fatalf("%s #%d: message %d part %d is not the output", c.Trace, c.Index, c.Message, c.Part)
		}
		return forwardedOutput(fwd, c)
	})
}

// The first request of an output ends before the agent's next step, and
// the output is found in it by message and part.
func TestFirstRequest(t *testing.T) {
	trace := []byte(squash.FidelityTrace)
	cases := squash.FidelityTraceCases(t)
	wantRequest := []int{6, 6, 6, 8}
	for i, c := range cases {
		if c.Request != wantRequest[i] {
			t.Errorf("case %d: first request of %d messages, want %d", i, c.Request, wantRequest[i])
		}
		body := firstRequest(trace, c.Request)
		if !gjson.ValidBytes(body) || gjson.GetBytes(body, "messages.#").Int() != int64(c.Request) || gjson.GetBytes(body, "tools").Exists() {
			t.Errorf("case %d: first request %s", i, body)
		}
		if got := forwardedOutput(body, &c); got != c.Output {
			t.Errorf("case %d: output %q in the request, want %q", i, got, c.Output)
		}
	}
	if cases[1].Part != 0 || cases[2].Part != 2 || cases[0].Part != -1 {
		t.Errorf("parts %d %d %d, want -1 (a string), 0 and 2 (text parts around an image)", cases[0].Part, cases[1].Part, cases[2].Part)
	}
}

func TestCorpusFidelityThroughPipeline(t *testing.T) {
	cases, traces := squash.CorpusFidelityCases(t)
	outs := measureThroughPipeline(t, cases, productionPipeline())
	squash.CheckFidelityOutcomes(t, outs)
	kept, recoverable, saved := squash.FidelityAll(outs)
	if kept < 95 || saved < 55 {
		t.Errorf("through the pipeline squash keeps %.1f%% of used tokens and saves %.1f%% of bytes; want at least 95%% and 55%%", kept, saved)
	}
	t.Logf("\n%d traces' tool outputs of %d B or more, each in the request that first shows it: %.1f%% of used tokens kept, %.1f%% kept or one retrieval away, %.1f%% of bytes saved\n\n%s",
		traces, squash.DefaultMinBytes, kept, recoverable, saved, squash.FidelityTables(outs))
}
