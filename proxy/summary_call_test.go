package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/internal/openaitest"
)

// reasoningUpstream answers summary calls as strictly as api.openai.com,
// treating the reasoning families and the names in extra as reasoning
// models; chat requests get the fake's usual answer.
func reasoningUpstream(t *testing.T, extra ...string) *openaitest.Server {
	up := openaitest.New(t)
	up.Handle(openaitest.SummaryPath, openaitest.StrictOpenAI(func(model string) bool {
		for _, e := range extra {
			if model == e {
				return true
			}
		}
		return strings.HasPrefix(model, "gpt-5") || strings.HasPrefix(model, "o3") || strings.HasPrefix(model, "o4")
	}, up.Summary))
	return up
}

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

// With a reasoning model as the summariser (gpt-5-mini refuses max_tokens
// and temperature 0.3), every compaction used to fail and back off; now the
// summary call is right the first time.
func TestReasoningSummarizerModelCompacts(t *testing.T) {
	up := reasoningUpstream(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Precompact = false // compact within the turn, so the turn says so
	cfg.Compaction.Summarizer.Model = "gpt-5-mini"
	p, _ := startWithStore(t, cfg)
	compactOnce(t, newAgent(t, p.BaseURL(), "reasoning-summarizer"))
	_, summaries := up.ChatRequests()
	if len(summaries) != 1 {
		t.Fatalf("%d summary calls, want 1", len(summaries))
	}
	body := summaries[0].Body
	if m := gjson.GetBytes(body, "model").String(); m != "gpt-5-mini" || gjson.GetBytes(body, "max_tokens").Exists() || gjson.GetBytes(body, "temperature").Exists() {
		t.Errorf("summary call: model %q, %s", m, body[len(body)-120:])
	}
}

// A summariser model the table does not know but the upstream treats as a
// reasoning model: the first summary call is refused and retried right, and
// the next compaction (another conversation) goes right the first time. Set
// as reasoning in the config, the first call is right too.
func TestUnknownReasoningSummarizerModelIsLearned(t *testing.T) {
	up := reasoningUpstream(t, "corp-reasoner")
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Precompact = false
	cfg.Compaction.Summarizer.Model = "corp-reasoner"
	p, _ := startWithStore(t, cfg)
	compactOnce(t, newAgent(t, p.BaseURL(), "first"))
	if _, summaries := up.ChatRequests(); len(summaries) != 2 {
		t.Fatalf("first compaction: %d summary calls, want 2 (refused, then right)", len(summaries))
	}
	compactOnce(t, newAgent(t, p.BaseURL(), "second"))
	if _, summaries := up.ChatRequests(); len(summaries) != 3 {
		t.Fatalf("second compaction: %d summary calls in all, want 3", len(summaries))
	}

	up2 := reasoningUpstream(t, "corp-reasoner")
	cfg = compactionConfig(up2.BaseURL())
	cfg.Compaction.Precompact = false
	cfg.Compaction.Summarizer.Model = "corp-reasoner"
	cfg.Compaction.Summarizer.Reasoning = map[string]bool{"corp-reasoner": true}
	p2, _ := startWithStore(t, cfg)
	compactOnce(t, newAgent(t, p2.BaseURL(), "configured"))
	if _, summaries := up2.ChatRequests(); len(summaries) != 1 {
		t.Fatalf("configured as reasoning: %d summary calls, want 1", len(summaries))
	}
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
	cfg.Compaction.Summarizer.Model = "gpt-4o-mini" // a transcript, to halve
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
