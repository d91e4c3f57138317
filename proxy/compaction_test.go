package proxy

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/internal/chatcheck"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/state"
)

// The headline: a 60-turn tool-using conversation through ctxpress, in
// both stream modes. The upstream's input stays under the trigger after
// compactions, every request is valid for a strict server with at most one
// summary block, the forwarded prefix is stable between compactions, and
// after a restart on the same db the next turn still gets the summary.
func TestSixtyTurnAgentConversation(t *testing.T) {
	up := openaitest.New(t)
	dbPath := filepath.Join(t.TempDir(), "ctxpress.db")
	st := openStoreAt(t, dbPath)
	p := startProxyWith(t, compactionConfig(up.BaseURL()), Deps{Pipeline: pipelineForTest(), Store: st})
	a := newAgent(t, p.BaseURL(), "sixty")

	var prev []string
	compactions, stable := 0, 0
	for i := 0; i < 60; i++ {
		h := a.turn(i%2 == 1)
		chats, _ := up.ChatRequests()
		body := chats[len(chats)-1].Body
		if err := chatcheck.ValidateChat(body); err != nil {
			t.Fatalf("turn %d: request invalid for a strict server: %v", i+1, err)
		}
		if n := strings.Count(string(body), "<conversation_summary>"); n > 1 {
			t.Fatalf("turn %d: %d summary blocks", i+1, n)
		}
		msgs := messagesOf(body)
		if h.Get(HeaderCompacted) == "true" {
			compactions++
			if in := openaitest.PromptTokens(body); in >= testTrigger {
				t.Fatalf("turn %d: compacted request still has %d input tokens (trigger %d)", i+1, in, testTrigger)
			}
			if !strings.Contains(msgs[0], "<conversation_summary>") {
				t.Fatalf("turn %d: compacted but no summary in the system message: %.200s", i+1, msgs[0])
			}
		} else if prev != nil {
			if !isPrefix(prev, msgs) {
				t.Fatalf("turn %d: forwarded history is not an extension of the previous turn's (no compaction in between)", i+1)
			}
			stable++
		}
		prev = msgs
	}
	if compactions < 2 {
		t.Fatalf("only %d compactions in 60 turns", compactions)
	}
	_, summaries := up.ChatRequests()
	if len(summaries) != compactions {
		t.Fatalf("%d summary calls for %d compactions", len(summaries), compactions)
	}
	// The summary calls continue the conversation: its messages, then the
	// instruction, which says what to keep and, the second time, that the
	// earlier summary is to be folded in.
	first := lastUserText(summaries[0].Body)
	for _, want := range []string{compactor.HistoryLead, "the conversation above up to", "## Active Task"} {
		if !strings.Contains(first, want) {
			t.Errorf("first summary instruction lacks %q", want)
		}
	}
	if fm := messagesOf(summaries[0].Body); len(fm) < 10 || !strings.Contains(fm[1], "TestParseDate fails on leap years") {
		t.Errorf("the first summary call does not carry the conversation (%d messages)", len(fm))
	}
	if second := lastUserText(summaries[1].Body); !strings.Contains(second, "of turns compacted earlier") ||
		!strings.Contains(messagesOf(summaries[1].Body)[0], "Fix the build.") {
		t.Errorf("the second summary call does not fold the first summary in")
	}
	if gjson.GetBytes(summaries[0].Body, "temperature").Exists() || gjson.GetBytes(summaries[0].Body, "stream").Exists() {
		t.Errorf("summary call: temperature %s (the client sent none), stream %s",
			gjson.GetBytes(summaries[0].Body, "temperature").Raw, gjson.GetBytes(summaries[0].Body, "stream").Raw)
	}
	t.Logf("60 turns: %d compactions, %d turns with a stable prefix", compactions, stable)

	// Restart ctxpress on the same db: the next turn still gets the summary.
	p2 := restartOnSameDB(t, p, st, dbPath, compactionConfig(up.BaseURL()), pipelineForTest())
	a.client = openai.NewClient(option.WithBaseURL(p2.BaseURL()), option.WithAPIKey("sk-agent"), option.WithMaxRetries(0))
	before := len(up.Requests())
	h := a.turn(false)
	chats, _ := up.ChatRequests()
	body := chats[len(chats)-1].Body
	if !strings.Contains(string(body), "<conversation_summary>") || h.Get(HeaderCompacted) == "true" && len(up.Requests()) > before+2 {
		t.Fatalf("after a restart the summary was not applied")
	}
	if in := openaitest.PromptTokens(body); in >= testTrigger {
		t.Fatalf("after a restart the request has %d input tokens", in)
	}
}

// A client that edits an early message no longer matches the stored
// summary: it gets its own history, never a summary of another one.
func TestEditedHistoryGetsNoSummary(t *testing.T) {
	up := openaitest.New(t)
	p, _ := startWithStore(t, compactionConfig(up.BaseURL()))
	a := newAgent(t, p.BaseURL(), "edited")
	for i := 0; i < 30; i++ {
		a.turn(false)
	}
	chats, _ := up.ChatRequests()
	if !strings.Contains(string(chats[len(chats)-1].Body), "<conversation_summary>") {
		t.Fatal("no summary after 30 turns")
	}
	// Edit the first tool result (covered by the summary).
	a.history[3] = openai.ToolMessage("edited output", "call_1")
	a.history = a.history[:12] // and rewind
	a.turn(false)
	chats, _ = up.ChatRequests()
	if strings.Contains(string(chats[len(chats)-1].Body), "<conversation_summary>") {
		t.Fatal("an edited history got the summary of the original one")
	}
	waitFor(t, func() bool { return strings.Contains(p.logs.String(), "history differs from every stored summary") }, "the miss in the log")
}

// Ten concurrent requests of one conversation over the trigger make
// exactly one summary call, and every one is answered.
func TestConcurrentTurnsCompactOnce(t *testing.T) {
	up := openaitest.New(t)
	release := holdSummaries(up)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Trigger.ThresholdTokens = 2500
	p, _ := startWithStore(t, cfg)
	// A failed test still ends: released before the proxy's Shutdown and
	// the upstream's Close, which wait for the summary call.
	t.Cleanup(release)
	a := newAgent(t, p.BaseURL(), "concurrent")
	for i := 0; i < 12; i++ { // grow past the trigger without compacting yet
		a.history = append(a.history,
			openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: "c" + strconv.Itoa(i), Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "bash", Arguments: `{"command":"ls"}`}}}}}},
			openai.ToolMessage(toolOutput(i), "c"+strconv.Itoa(i)))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := a.client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: a.history},
				option.WithHeader("X-Session-ID", a.convID))
			errs <- err
		}()
	}
	waitFor(t, func() bool { _, s := up.ChatRequests(); return len(s) >= 1 }, "the summary call")
	// The other nine join the running compaction before it ends.
	waitFor(t, func() bool { return value(scrape(t, p.URL), "ctxpress_compaction_waiting") == 9 }, "nine requests waiting on the compaction")
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	chats, summaries := up.ChatRequests()
	if len(summaries) != 1 {
		t.Fatalf("%d summary calls, want 1", len(summaries))
	}
	if len(chats) != 10 {
		t.Fatalf("%d chat requests answered, want 10", len(chats))
	}
}

// Whatever the summariser does (down, garbage, empty, slow), every request
// is answered and forwarded uncompacted; a failure backs off for 60 s (no
// attempt before, one after), the next one for 300 s.
func TestSummariserFailuresNeverLoseARequest(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"500": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(500)
			fmt.Fprint(w, `{"error":{"message":"model overloaded"}}`)
		},
		"garbage": func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>oops") },
		"empty": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}]}`)
		},
		"slow": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			up := openaitest.New(t)
			up.Handle(openaitest.SummaryPath, h)
			cfg := compactionConfig(up.BaseURL())
			cfg.Compaction.Summarizer.Timeout = 300 * time.Millisecond
			clock := newTestClock()
			cfg.Clock = clock.Now
			p, st := startWithStore(t, cfg)
			a := newAgent(t, p.BaseURL(), "failing-"+name)
			key := state.NewKey([]byte("Bearer sk-agent"), a.convID)
			attempts := func() int { _, summaries := up.ChatRequests(); return len(summaries) }
			for i := 0; i < 25; i++ {
				if h := a.turn(i%2 == 0); h.Get(HeaderCompacted) == "true" {
					t.Fatalf("turn %d compacted with a broken summariser", i+1)
				}
			}
			if n := attempts(); n != 1 {
				t.Fatalf("%d summary attempts: a failure must back off", n)
			}
			failedAt := clock.Now()
			rec, _, _ := st.Get(key)
			if b := rec.CurrentLine().Breaker; b.FailureCount != 1 || !b.BackoffUntil.Equal(failedAt.Add(60*time.Second)) {
				t.Fatalf("breaker after a failure: %+v, want backoff until %v", b, failedAt.Add(60*time.Second))
			}
			clock.Advance(59 * time.Second)
			a.turn(false)
			if n := attempts(); n != 1 {
				t.Fatalf("%d summary attempts 59 s after the failure, want none during the 60 s backoff", n-1)
			}
			clock.Advance(2 * time.Second)
			if h := a.turn(false); h.Get(HeaderCompacted) == "true" {
				t.Fatal("compacted with a broken summariser")
			}
			if n := attempts(); n != 2 {
				t.Fatalf("%d summary attempts after the backoff ended, want 1", n-1)
			}
			rec, _, _ = st.Get(key)
			if b := rec.CurrentLine().Breaker; b.FailureCount != 2 || !b.BackoffUntil.Equal(clock.Now().Add(300*time.Second)) {
				t.Fatalf("breaker after a second failure: %+v, want backoff until %v", b, clock.Now().Add(300*time.Second))
			}
		})
	}
}

// The circuit breaker: when the upstream still reports input over the
// trigger after two compactions in a row, auto-compaction stops for the
// conversation; a manual compaction resets it.
func TestCircuitBreaker(t *testing.T) {
	up := openaitest.New(t)
	// An upstream that counts far more tokens than ctxpress can save.
	up.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body := make([]byte, r.ContentLength)
		r.Body.Read(body)
		if openaitest.IsSummaryRequest(body) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"## Active Task\nx"},"finish_reason":"stop"}]}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":1}}`, 50*testTrigger)
	})
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Precompact = false
	p, st := startWithStore(t, cfg)
	a := newAgent(t, p.BaseURL(), "breaker")
	key := state.NewKey([]byte("Bearer sk-agent"), a.convID)
	compacted := 0
	for i := 0; i < 12; i++ {
		if a.turn(false).Get(HeaderCompacted) == "true" {
			compacted++
		}
		waitFor(t, func() bool { rec, _, _ := st.Get(key); return rec.Requests == int64(a.turns) }, "the turn recorded")
	}
	rec, _, _ := st.Get(key)
	if b := rec.CurrentLine().Breaker; compacted != 2 || !b.Tripped || !strings.Contains(b.Reason, "over the trigger") {
		t.Fatalf("compactions %d, breaker %+v", compacted, b)
	}
	// A manual compaction still runs and resets the breaker.
	if h := a.turn(false, option.WithHeader(HeaderCompact, "force")); h.Get(HeaderCompacted) != "true" {
		t.Fatal("forced compaction refused by the breaker")
	}
	rec, _, _ = st.Get(key)
	if b := rec.CurrentLine().Breaker; b.Tripped {
		t.Fatalf("manual compaction did not reset the breaker: %+v", b)
	}
}

// The admin endpoint schedules a compaction for a conversation's next
// request; ephemeral requests are never compacted.
func TestAdminCompactAndEphemeral(t *testing.T) {
	up := openaitest.New(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Trigger.ThresholdTokens = 100000
	p, st := startWithStore(t, cfg)
	a := newAgent(t, p.BaseURL(), "admin")
	for i := 0; i < 10; i++ {
		a.turn(false)
	}
	key := state.NewKey([]byte("Bearer sk-agent"), a.convID)
	waitFor(t, func() bool { rec, _, _ := st.Get(key); return rec.Requests == 10 }, "turns recorded")
	resp, err := http.Post(p.URL+"/ctxpress/conversations/admin/compact", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("admin compact: %d", resp.StatusCode)
	}
	if h := a.turn(false, option.WithHeader(HeaderEphemeral, "1")); h.Get(HeaderCompacted) == "true" {
		t.Fatal("an ephemeral request was compacted")
	}
	if h := a.turn(false); h.Get(HeaderCompacted) != "true" {
		t.Fatal("the scheduled compaction did not run on the next request")
	}
	if h := a.turn(false); h.Get(HeaderCompacted) == "true" {
		t.Fatal("the schedule was not cleared")
	}
	resp, _ = http.Post(p.URL+"/ctxpress/conversations/nobody/compact", "application/json", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown conversation: %d", resp.StatusCode)
	}
}

// With precompact on, summaries are written in the background after a turn
// nears the trigger, so no turn waits for a summary call; the requests still
// stay under the trigger. Compaction events reach /ctxpress/events.
func TestPrecompactNoTurnWaits(t *testing.T) {
	up := openaitest.New(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Precompact = true
	p, st := startWithStore(t, cfg)

	events, err := http.Get(p.URL + "/ctxpress/events")
	if err != nil {
		t.Fatal(err)
	}
	defer events.Body.Close()
	got := make(chan string, 64)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := events.Body.Read(buf)
			if n > 0 {
				got <- string(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()

	a := newAgent(t, p.BaseURL(), "pre")
	key := state.NewKey([]byte("Bearer sk-agent"), a.convID)
	applied := 0
	for i := 0; i < 40; i++ {
		if h := a.turn(false); h.Get(HeaderCompacted) == "true" {
			t.Fatalf("turn %d waited for a summary call", i+1)
		}
		chats, _ := up.ChatRequests()
		body := chats[len(chats)-1].Body
		if strings.Contains(string(body), "<conversation_summary>") {
			applied++
		}
		if in := openaitest.PromptTokens(body); in >= testTrigger {
			t.Fatalf("turn %d: %d input tokens reached the upstream (trigger %d)", i+1, in, testTrigger)
		}
		// Let a background summary finish before the next turn, as an
		// agent's thinking time would.
		waitFor(t, func() bool { return p.comp.Running() == 0 }, "background compaction")
		waitFor(t, func() bool { rec, _, _ := st.Get(key); return rec.Requests == int64(a.turns) }, "the turn recorded")
	}
	_, summaries := up.ChatRequests()
	if len(summaries) == 0 || applied == 0 {
		t.Fatalf("%d background summaries, applied on %d turns", len(summaries), applied)
	}
	select {
	case s := <-got:
		for !strings.Contains(s, `"trigger":"precompact"`) {
			s += <-got
		}
		if !strings.Contains(s, `"result":"ok"`) || !strings.Contains(s, `"conversation":"pre"`) {
			t.Fatalf("event: %s", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no compaction event on /ctxpress/events")
	}
}

// Every compaction event is POSTed to the configured webhook.
func TestEventWebhook(t *testing.T) {
	up := openaitest.New(t)
	hook := openaitest.New(t) // any loopback HTTP server that records requests
	hook.Handle("/hook", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.WebhookURL = hook.URL + "/hook"
	p, _ := startWithStore(t, cfg)
	a := newAgent(t, p.BaseURL(), "hooked")
	for i := 0; i < 10; i++ {
		a.turn(false)
	}
	a.turn(false, option.WithHeader(HeaderCompact, "force"))
	waitFor(t, func() bool { return len(hook.Requests()) > 0 }, "the webhook POST")
	got := hook.Requests()[0]
	if got.Method != http.MethodPost || gjson.GetBytes(got.Body, "conversation").String() != "hooked" ||
		gjson.GetBytes(got.Body, "trigger").String() != "manual" || gjson.GetBytes(got.Body, "result").String() != "ok" {
		t.Fatalf("webhook got %s %s", got.Method, got.Body)
	}
}

// A summary prepared in the background applies from the turn that
// crosses the trigger, however late its call answers: a conversation whose
// summary calls answer at once (and whose agent waits for them) and one
// whose summary calls answer only when a turn waits on them forward the
// same bytes, turn by turn.
func TestPrecompactionForwardsTheSameBytesHoweverLate(t *testing.T) {
	run := func(late bool) [][]byte {
		up := openaitest.New(t)
		release := holdSummaries(up) // the same summary either way
		if !late {
			release()
		}
		cfg := compactionConfig(up.BaseURL())
		cfg.Compaction.Precompact = true
		p, st := startWithStore(t, cfg)
		a := newAgent(t, p.BaseURL(), "same-bytes")
		key := state.NewKey([]byte("Bearer sk-agent"), a.convID)
		for range 30 {
			done := make(chan struct{})
			go func() { defer close(done); a.turn(false) }()
			if late {
				waitFor(t, func() bool {
					select {
					case <-done:
						return true
					default:
					}
					if p.comp.Waiting() > 0 || p.gateWaiting() > 0 { // the turn waits on the held summary
						release()
					}
					return false
				}, "the turn")
			} else {
				<-done
				p.comp.Wait()
			}
			waitFor(t, func() bool { rec, _, _ := st.Get(key); return rec.Requests == int64(a.turns) }, "the turn recorded")
		}
		release()
		chats, summaries := up.ChatRequests()
		if len(summaries) == 0 {
			t.Fatalf("late %v: no summary call in 30 turns", late)
		}
		var bodies [][]byte
		for _, c := range chats {
			bodies = append(bodies, c.Body)
		}
		return bodies
	}
	early, late := run(false), run(true)
	if len(early) != len(late) {
		t.Fatalf("%d requests forwarded with summaries answering at once, %d with them late", len(early), len(late))
	}
	summarised := 0
	for i := range early {
		if !bytes.Equal(early[i], late[i]) {
			t.Fatalf("turn %d forwarded differently when its summary answered late:\n%s\n---\n%s", i+1, early[i], late[i])
		}
		if bytes.Contains(early[i], []byte("<conversation_summary>")) {
			summarised++
		}
	}
	if summarised == 0 {
		t.Fatal("no turn sent the prepared summary")
	}
}
