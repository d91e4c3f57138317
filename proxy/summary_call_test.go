package proxy

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/tidwall/gjson"
)

// compactOnce runs agent turns until one is compacted; it fails the test
// when none is within 30 turns.
func compactOnce(t *testing.T, a *agent) {
	t.Helper()
	for i := 0; i < 30; i++ {
		if a.turn(false).Get(HeaderCompacted) == "true" {
			return
		}
	}
	t.Fatalf("%s: no compaction in 30 turns", a.convID)
}

// llama-server with several slots sharing one KV cache answers a summary
// call that does not fit with a 500 "Context size has been exceeded.": it
// is an overflow like the 400, so the summary is asked again with half the
// transcript instead of failing the compaction.
func TestSummaryRefusedWith500OverflowIsRetriedSmaller(t *testing.T) {
	up := openaitest.New(t)
	var calls atomic.Int32
	up.Handle(openaitest.SummaryPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}`)
			return
		}
		fmt.Fprintf(w, `{"id":"s","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, up.Summary)
	})
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Precompact = false
	p, _ := startWithStore(t, cfg)
	compactOnce(t, newAgent(t, p.BaseURL(), "kv-cache-full"))
	_, summaries := up.ChatRequests()
	if len(summaries) != 2 {
		t.Fatalf("%d summary calls, want 2 (overflow, then smaller)", len(summaries))
	}
	first := len(gjson.GetBytes(summaries[0].Body, "messages.0.content").String())
	second := len(gjson.GetBytes(summaries[1].Body, "messages.0.content").String())
	if second >= first {
		t.Errorf("retry prompt %d bytes, first %d: not smaller", second, first)
	}
}
