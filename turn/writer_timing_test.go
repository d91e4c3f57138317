package turn

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/compaction"
	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/internal/corpustest"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/state/recorder"
	"github.com/ctxpress/ctxpress/wire/chat"
)

// writerTrace is a conversation of a corpus trace driven through a
// Server's chat turn (prepare, fit, finish) without the network, with a
// stopped recorder whose writer runs when a schedule says: after turn i
// when writeAfter(i). Each turn's answer reports usage as a caching
// upstream would: the prompt about 7% over ctxpress's estimate and, when
// caching, the part the previous forwarded request shares cached in
// 128-token blocks, now and then a miss.
type writerTrace struct {
	bodies  [][]byte
	caching bool
}

// turnSeen is what one request was judged by and sent.
type turnSeen struct {
	body    string
	plan    string
	numbers history.Numbers
	marks   string // the line's dedup and prune marks
}

// newWriterTrace makes up to n requests of the corpus trace name (the
// first trace when absent): its history up to each tool or user message.
func newWriterTrace(t *testing.T, name string, n int) writerTrace {
	t.Helper()
	traces := corpustest.Traces(t)
	tr := traces[0]
	for _, c := range traces {
		if c.Name == name {
			tr = c
		}
	}
	msgs := gjson.GetBytes(tr.Body, "messages").Array()
	tools := gjson.GetBytes(tr.Body, "tools").Raw
	w := writerTrace{}
	for k := 3; k <= len(msgs) && len(w.bodies) < n; k++ {
		if role := msgs[k-1].Get("role").String(); role != "tool" && role != "user" {
			continue
		}
		var b strings.Builder
		b.WriteString(`{"model":"gpt-4o","messages":[`)
		for i, m := range msgs[:k] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(m.Raw)
		}
		b.WriteString("]")
		if tools != "" {
			b.WriteString(`,"tools":` + tools)
		}
		b.WriteString("}")
		w.bodies = append(w.bodies, []byte(b.String()))
	}
	if len(w.bodies) < n {
		t.Fatalf("trace %s has %d requests, want %d", tr.Name, len(w.bodies), n)
	}
	return w
}

// testHeader is a request's headers as a turn reads them.
type testHeader map[string]string

func (h testHeader) Peek(name string) []byte {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return []byte(v)
		}
	}
	return nil
}

func (h testHeader) Creds() compaction.Creds {
	return compaction.Creds{Authorization: string(h.Peek("Authorization"))}
}

// testTurns are turns on store st with pipeline p, compaction on at the
// default trigger against an upstream that never answers, and rec as the
// recorder.
func testTurns(st state.Store, p *rewrite.Pipeline, rec *recorder.Recorder) *Turns {
	events := admin.NewBus(zerolog.Nop(), "", "")
	comp := compaction.NewEngine(compaction.Config{Enabled: true,
		Trigger:     rewrite.TriggerConfig{ThresholdRatio: rewrite.DefaultThresholdRatio, DefaultContextWindow: rewrite.DefaultContextWindow},
		TargetRatio: rewrite.DefaultTargetRatio, KeepRecent: rewrite.DefaultKeepRecent},
		compaction.Deps{Store: st, Pipeline: p, Events: events, Log: zerolog.Nop(), Routes: map[string]compaction.Route{compaction.APIChat: {Upstream: "http://127.0.0.1:1/v1"}}, Clock: time.Now})
	return &Turns{Pipeline: p, Store: st, Recorder: rec, Comp: comp, Events: events, Log: zerolog.Nop(),
		StoreFailed: func(string, string, error) {}, Paused: func(error) {}}
}

// chatAPI is chat completions as a turn needs it.
var chatAPI = &API{Name: compaction.APIChat, Format: chat.Format{}, OutputCaps: []string{"max_completion_tokens", "max_tokens"}}

// prunePipeline is a chat pipeline with squash, dedup and prune on.
func prunePipeline() *rewrite.Pipeline {
	return rewrite.New(rewrite.Config{
		Format: chat.Format{},
		Squash: &squash.Config{},
		Dedup:  rewrite.DefaultDedupConfig(),
		Prune:  rewrite.PruneConfig{Enabled: true, MinTokens: 200},
	})
}

// run sends w's requests as turns of a fresh bolt store with a stopped
// recorder, its writer running after turn i when writeAfter(i), and
// returns what each request was judged by and sent, the recorder and the
// conversation's key.
func (w writerTrace) run(t *testing.T, writeAfter func(i int) bool) ([]turnSeen, *recorder.Recorder, state.Key) {
	t.Helper()
	st, err := state.OpenBolt(filepath.Join(t.TempDir(), "ctxpress.db"), state.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rec := recorder.NewStopped(st, zerolog.Nop(), time.Now, nil)
	t.Cleanup(func() { rec.WriteQueued(-1) })
	ts := testTurns(st, prunePipeline(), rec)
	h := testHeader{"Authorization": "Bearer sk-writer", "X-Session-ID": "writer-timing"}
	var seen []turnSeen
	var prev []byte
	var key state.Key
	for i, body := range w.bodies {
		tn, ok := ts.Begin(chatAPI, body, h, "ns")
		if !ok {
			t.Fatalf("turn %d not understood", i)
		}
		key = tn.rt.Key
		sent := append([]byte(nil), tn.Body()...)
		var marks strings.Builder
		fmt.Fprintf(&marks, "%+v %+v", tn.nums.Dedups, tn.nums.Prunes)
		seen = append(seen, turnSeen{body: string(sent), plan: planText(tn.plan), numbers: tn.nums.Numbers, marks: marks.String()})

		prompt := tn.res.TokensAfter*107/100 + i%5
		cached := 0
		if n := commonPrefix(prev, sent); w.caching && n > 0 && i%7 != 3 { // a miss now and then
			cached = min(prompt, n/4) / 128 * 128
		}
		prev = sent
		answer := fmt.Appendf(nil, `{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":1,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`,
			prompt, prompt+1, cached)
		tn.Sent(sent)
		tn.Finish(true, chat.UsageFromJSON(answer))
		if writeAfter(i) {
			rec.WriteQueued(-1)
		}
	}
	return seen, rec, key
}

// planText is what of a plan the property compares (its economics by
// value, not pointer).
func planText(p rewrite.Plan) string {
	e := "none"
	if p.Economics != nil {
		e = fmt.Sprintf("%+v", *p.Economics)
	}
	return fmt.Sprintf("%v %s why=%v rewrite=%v compactable=%v trigger=%d window=%d effective=%d urgent=%v economics=%s",
		p.Action, p.Kind, p.Why, p.MayRewrite, p.Compactable, p.Trigger, p.Window, p.Effective, p.Urgent, e)
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// The line a request is judged by is the same whether the earlier turns
// are written or still queued for the store. The queue's view used to
// apply its cache evidence to a line with no model yet (so Observe saw a
// model change and dropped the evidence and the calibration) and observe
// only the latest queued turn (so the slope was learnt from the stored
// anchor to it): five queued turns of a trace, nothing written, read as
// uncached=1 slope=0, and written as uncached=4 slope=0.918. The
// upstream here caches nothing.
func TestQueuedTurnsReadAsWritten(t *testing.T) {
	w := newWriterTrace(t, "sweagent-ctf-crypto-katy.json", 6)
	w.bodies = w.bodies[:5]
	line := func(writeAfter func(int) bool) history.Numbers {
		_, r, key := w.run(t, writeAfter)
		rec, err := r.Read(key)
		if err != nil || len(rec.Lines) != 1 {
			t.Fatalf("read: %v, %d lines", err, len(rec.Lines))
		}
		return rec.Lines[0].Numbers
	}
	written := line(func(int) bool { return true })
	if written.Cache.Uncached < 2 || written.Calibration.Slope == 0 {
		t.Fatalf("written: %+v; the trace teaches too little to tell", written)
	}
	for _, row := range []struct {
		name       string
		writeAfter func(int) bool
	}{
		{"nothing written", func(int) bool { return false }},
		{"the first two written", func(i int) bool { return i == 1 }},
		{"all but the last written", func(i int) bool { return i == 3 }},
	} {
		t.Run(row.name, func(t *testing.T) {
			if got := line(row.writeAfter); got != written {
				t.Errorf("queued: uncached=%d slope=%.3f\n  %+v\nwritten: uncached=%d slope=%.3f\n  %+v",
					got.Cache.Uncached, got.Calibration.Slope, got, written.Cache.Uncached, written.Calibration.Slope, written)
			}
		})
	}
}

// Whatever the writer's timing (never, after every turn, at random
// points), every request of a real trace forwards the same bytes, under
// the same compaction plan, judged by the same line (numbers, dedup and
// prune marks) as with the writer keeping up.
func TestWriterTimingChangesNoRequest(t *testing.T) {
	w := newWriterTrace(t, "sweagent-ctf-web-i_got_id_demo.json", 20)
	w.caching = true
	want, _, _ := w.run(t, func(int) bool { return true })
	schedules := map[string]func(int) bool{"never": func(int) bool { return false }}
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 7))
		at := make([]bool, len(w.bodies))
		for i := range at {
			at[i] = rng.IntN(4) == 0
		}
		schedules[fmt.Sprintf("random-%d", seed)] = func(i int) bool { return at[i] }
	}
	for name, writeAfter := range schedules {
		t.Run(name, func(t *testing.T) {
			got, _, _ := w.run(t, writeAfter)
			for i := range want {
				g, x := got[i], want[i]
				switch {
				case g.body != x.body:
					t.Fatalf("turn %d forwards other bytes than with the writer keeping up (%d vs %d bytes)", i, len(g.body), len(x.body))
				case g.plan != x.plan:
					t.Fatalf("turn %d plan:\n  %s\nwith the writer keeping up:\n  %s", i, g.plan, x.plan)
				case g.numbers != x.numbers || g.marks != x.marks:
					t.Fatalf("turn %d judged by\n  %+v %s\nwith the writer keeping up:\n  %+v %s", i, g.numbers, g.marks, x.numbers, x.marks)
				}
			}
		})
	}
}
