package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// llamaServer is an upstream as strict as llama.cpp's llama-server about
// its window: a prompt over nCtx tokens (one per 4 bytes of messages, as
// the fake counts) gets its 400 exceed_context_size_error; and with
// sharedKV, a request that overlaps another gets the 500 "Context size has
// been exceeded." that its slots sharing one KV cache answer, as does the
// one it overlapped.
type llamaServer struct {
	*openaitest.Server
	nCtx     int
	sharedKV bool

	inFlight, overlaps atomic.Int64
	mu                 sync.Mutex
	refused            []int // prompt sizes refused as too long
	// onSummary, when set, runs before a summary request is answered.
	onSummary func()
}

const llamaOverflow = `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":%d,"n_ctx":%d}}`

func newLlamaServer(t *testing.T, nCtx int, sharedKV bool) *llamaServer {
	l := &llamaServer{Server: openaitest.New(t), nCtx: nCtx, sharedKV: sharedKV}
	l.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		overlapped := l.inFlight.Add(1) > 1
		// A request holds the KV cache until its answer is decided (the
		// fake generates at once), not while the bytes go out: a stream's
		// last bytes may still be on their way when the client, done with
		// it, sends its next request.
		generated := sync.OnceFunc(func() { l.inFlight.Add(-1) })
		defer generated()
		if overlapped {
			l.overlaps.Add(1)
		}
		if n := openaitest.PromptTokens(body); n > l.nCtx {
			l.mu.Lock()
			l.refused = append(l.refused, n)
			l.mu.Unlock()
			generated()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, llamaOverflow, n, l.nCtx)
			return
		}
		summary := openaitest.IsSummaryRequest(body)
		if summary && l.onSummary != nil {
			l.onSummary()
		}
		if l.sharedKV && (overlapped || l.inFlight.Load() > 1) {
			generated()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}`)
			return
		}
		generated()
		l.AnswerChat(w, r, body)
	})
	return l
}

// An upstream that refuses a request as too long (before any byte is
// relayed) gets it again compacted: the agent never sees the refusal, even
// when nobody told ctxpress the model's real window.
func TestContextOverflowAnswerIsRescuedByCompacting(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			up := newLlamaServer(t, 3000, false)
			cfg := compactionConfig(up.BaseURL())
			cfg.Compaction.Trigger.ThresholdTokens = 0 // 80% of the default window: ctxpress does not know this one
			cfg.Compaction.Precompact = false
			p, _ := startWithStore(t, cfg)
			a := newAgent(t, p.BaseURL(), "rescue")
			rescued := 0
			for range 25 {
				if a.turn(stream).Get(HeaderCompacted) == "true" {
					rescued++
				}
			}
			up.mu.Lock()
			refused := len(up.refused)
			up.mu.Unlock()
			if refused == 0 {
				t.Fatal("the conversation never reached the upstream's window; the test proves nothing")
			}
			if rescued == 0 || !strings.Contains(p.logs.String(), `"trigger":"rescue"`) {
				t.Fatalf("%d refusals, %d turns compacted: the refusal was not rescued", refused, rescued)
			}
		})
	}
}

// A request ctxpress knows will not fit while its summariser backs off is
// cut to fit, not forwarded to fail: the oldest turns go, the ask stays,
// and one line says so.
func TestRequestOverTheWindowWhileSummariserBacksOffIsCutToFit(t *testing.T) {
	up := newLlamaServer(t, 3000, false)
	up.Handle(openaitest.SummaryPath, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":{"message":"summariser down","type":"server_error"}}`)
	})
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Trigger.ThresholdTokens = 0
	cfg.Compaction.Trigger.Models = map[string]int{"gpt-4o": 3000}
	cfg.Compaction.Precompact = false
	p, _ := startWithStore(t, cfg)
	a := newAgent(t, p.BaseURL(), "cut-to-fit")
	for range 25 {
		a.turn(false)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.refused) > 0 {
		t.Fatalf("requests over the window were forwarded: %v tokens", up.refused)
	}
	chats, summaries := up.ChatRequests()
	if len(summaries) == 0 {
		t.Fatal("no compaction was attempted; the test proves nothing")
	}
	last := string(chats[len(chats)-1].Body)
	if !strings.Contains(last, "were left out to fit the model") || !strings.Contains(last, "TestParseDate fails on leap years") {
		t.Fatalf("the cut request does not say what was left out or lost the ask: %.300s", last)
	}
	if !strings.Contains(p.logs.String(), `"trigger":"fit"`) {
		t.Error("the cut is not an event")
	}
}

// In front of a local server whose slots share one KV cache, a background
// summary call and the agent's next turn never run at once: the turn waits
// for the summary (and gets it), instead of both failing with "Context
// size has been exceeded." and the summariser backing off for a minute.
func TestLocalServerSummaryCallNeverOverlapsALiveRequest(t *testing.T) {
	up := newLlamaServer(t, 100000, true)
	summaryStarted := make(chan struct{}, 8)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Precompact = true
	p, st := startWithStore(t, cfg)
	up.onSummary = func() {
		summaryStarted <- struct{}{}
		// Answer once the agent's next turn is waiting for this summary
		// call (or has overlapped it: the fake then answers 500).
		waitFor(t, func() bool { return p.gateWaiting() > 0 || up.inFlight.Load() > 1 || up.overlaps.Load() > 0 }, "the next turn to arrive")
	}
	a := newAgent(t, p.BaseURL(), "shared-kv")
	for i := 0; ; i++ {
		if i == 40 {
			t.Fatal("no background compaction in 40 turns")
		}
		// A precompaction is started before the turn's answer ends; it
		// either calls the summariser (which holds it) or gives up.
		a.turn(i%2 == 1)
		waitFor(t, func() bool { return len(summaryStarted) > 0 || p.comp.Running() == 0 }, "the precompaction to call the summariser or end")
		if len(summaryStarted) > 0 {
			break
		}
	}
	// The precompaction's summary call is running: the next turn arrives.
	h := a.turn(false)
	if n := up.overlaps.Load(); n > 0 {
		t.Fatalf("%d requests overlapped a summary call", n)
	}
	if h.Get(HeaderConversation) == "" {
		t.Fatal("the turn was not answered through the pipeline")
	}
	waitFor(t, func() bool {
		recs, _ := st.List(state.ListOptions{ID: a.convID})
		return len(recs) == 1 && len(recs[0].Branches) == 1
	}, "the summary stored")
	if _, summaries := up.ChatRequests(); len(summaries) != 1 {
		t.Fatalf("%d summary calls", len(summaries))
	}
	for _, r := range up.Requests() {
		if bytes.Contains(r.Body, []byte(rewrite.FitNote[:20])) {
			t.Fatal("a request was cut although it fitted")
		}
	}
}
