package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// countingUpstream answers chat completions like the fake, but reports
// input tokens as count(body): an upstream whose tokenizer differs from
// ctxpress's.
func countingUpstream(t *testing.T, count func(body []byte) int) *openaitest.Server {
	up := openaitest.New(t)
	up.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if openaitest.IsSummaryRequest(body) {
			fmt.Fprintf(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, up.Summary)
			return
		}
		fmt.Fprintf(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":%d,"completion_tokens":1,"total_tokens":%d}}`, count(body), count(body)+1)
	})
	return up
}

// A user reads X-Ctxpress-Tokens-After as what the upstream will count: once
// the upstream has reported a turn, it is the calibrated estimate, not
// tiktoken's raw count (2.3x off for a small local model's tokenizer).
func TestTokensHeadersCarryTheCalibratedEstimate(t *testing.T) {
	up := countingUpstream(t, func(body []byte) int { return int(2.3 * float64(openaitest.PromptTokens(body))) })
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Enabled = false
	p, _ := startWithStore(t, cfg)
	a := newAgent(t, p.BaseURL(), "calibrated-headers")
	var h http.Header
	for range 4 {
		h = a.turn(false)
	}
	sent := up.Last(t).Body
	upstreamCount := 2.3 * float64(openaitest.PromptTokens(sent))
	after, _ := strconv.Atoi(h.Get(HeaderTokensAfter))
	before, _ := strconv.Atoi(h.Get(HeaderTokensBefore))
	if off := math.Abs(float64(after)-upstreamCount) / upstreamCount; off > 0.15 {
		t.Fatalf("X-Ctxpress-Tokens-After %d, the upstream counts %.0f: %.0f%% off", after, upstreamCount, 100*off)
	}
	if before < after {
		t.Fatalf("X-Ctxpress-Tokens-Before %d under -After %d", before, after)
	}
	if !strings.Contains(p.logs.String(), `"raw_tokens_after":`) {
		t.Error("the log line has no raw count")
	}
}

// A title or sub-agent request under the main line's session header (a
// different history, a smaller model, a very different token ratio) must
// not move the main line's numbers: otherwise the main line's next turn is
// judged by the side request's calibration and compacts for nothing.
func TestSideRequestDoesNotMoveTheMainLinesNumbers(t *testing.T) {
	up := countingUpstream(t, func(body []byte) int {
		var req struct{ Model string }
		_ = json.Unmarshal(body, &req)
		if req.Model == "gpt-4o-mini" {
			return 8 * openaitest.PromptTokens(body) // a title request that counts far more
		}
		return openaitest.PromptTokens(body)
	})
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Precompact = false
	p, st := startWithStore(t, cfg)
	a := newAgent(t, p.BaseURL(), "main-and-side")
	key := state.NewKey([]byte("Bearer sk-agent"), a.convID)
	// Main turns until the conversation is near (but under) the trigger.
	var after int
	for after < testTrigger*6/10 {
		h := a.turn(false)
		after, _ = strconv.Atoi(h.Get(HeaderTokensAfter))
		if a.turns > 30 {
			t.Fatal("the conversation never grew")
		}
	}
	waitFor(t, func() bool { rec, _, _ := st.Get(key); return rec.Requests == int64(a.turns) }, "the main turns recorded")
	rec, _, _ := st.Get(key)
	mainCal := rec.CurrentLine().Calibration.Ratio

	// Two side requests under the same header: a title, a classification.
	for i := range 2 {
		side := openai.NewClient(option.WithBaseURL(p.BaseURL()), option.WithAPIKey("sk-agent"), option.WithMaxRetries(0))
		_, err := side.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4o-mini",
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.SystemMessage("Write a 5-word title for this conversation."),
				openai.UserMessage(fmt.Sprintf("Conversation %d: the test TestParseDate fails on leap years.", i)),
			}}, option.WithHeader("X-Session-ID", a.convID))
		if err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { rec, _, _ := st.Get(key); return rec.Requests == int64(a.turns)+2 }, "the side requests recorded")

	h := a.turn(false)
	if h.Get(HeaderCompacted) == "true" {
		t.Fatal("the main line compacted at 60% of its trigger: a side request's numbers were used")
	}
	if _, summaries := up.ChatRequests(); len(summaries) != 0 {
		t.Fatalf("%d summary calls", len(summaries))
	}
	sent := up.Last(t).Body
	got, _ := strconv.Atoi(h.Get(HeaderTokensAfter))
	if want := float64(openaitest.PromptTokens(sent)); math.Abs(float64(got)-want)/want > 0.15 {
		t.Fatalf("main turn estimate %d, the upstream counts %.0f", got, want)
	}
	rec, _, _ = st.Get(key)
	for _, l := range rec.Lines {
		if l.Model == "gpt-4o" && l.Messages >= 2*a.turns-2 && l.Calibration.Ratio != mainCal {
			// One more main turn moves it only by what that turn observed.
			if math.Abs(l.Calibration.Ratio-mainCal) > 0.2 {
				t.Errorf("main line calibration %.2f -> %.2f", mainCal, l.Calibration.Ratio)
			}
		}
	}
	if len(rec.Lines) < 2 {
		t.Errorf("%d lines: the side requests were folded into the main one", len(rec.Lines))
	}
}

// Two runs of one agent under one conversation id (an app-wide header or
// prompt_cache_key, or the same fingerprint): B's compaction must not wait
// for A's summary call, and each summary applies only to its own history.
func TestHistoriesSharingAKeyDoNotWaitForEachOther(t *testing.T) {
	up := openaitest.New(t)
	aStarted, releaseA := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(releaseA) }) }
	t.Cleanup(release) // before the upstream's Close, which waits for its handlers
	up.Handle(openaitest.SummaryPath, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "history A") {
			close(aStarted)
			<-releaseA
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`,
			"## Active Task\nsummary of "+string(body[strings.Index(string(body), "history "):][:9]))
	})
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Precompact = false
	cfg.Compaction.Trigger.ThresholdTokens = 100000 // compacted only when forced
	hosted := false                                 // a local server's gate would (rightly) serialise the two summary calls
	cfg.LocalUpstream = &hosted
	p, st := startWithStore(t, cfg)
	runs := map[string]*agent{}
	for _, name := range []string{"A", "B"} {
		a := newAgent(t, p.BaseURL(), "app-wide-id")
		a.history[1] = openai.UserMessage("This is history " + name + ". The test TestParseDate fails on leap years.")
		for range 5 {
			a.turn(false)
		}
		runs[name] = a
	}

	aDone := make(chan http.Header, 1)
	go func() { aDone <- runs["A"].turn(false, option.WithHeader(HeaderCompact, "force")) }()
	<-aStarted
	// A's summary call is running (held until released, whatever the
	// summariser's timeout); B's forced compaction goes ahead. B waiting
	// for A would hang: the guard turns that into a failure.
	var hb http.Header
	within(t, 30*time.Second, "B's compaction while A's summary is written", func() {
		hb = runs["B"].turn(false, option.WithHeader(HeaderCompact, "force"))
	})
	select {
	case <-aDone:
		t.Fatal("A finished before its summary call was released")
	default:
	}
	if hb.Get(HeaderCompacted) != "true" {
		t.Fatal("B was not compacted while A's summary was being written")
	}
	release()
	if ha := <-aDone; ha.Get(HeaderCompacted) != "true" {
		t.Fatal("A was not compacted")
	}
	// Each history's next request carries its own summary.
	for name, a := range runs {
		a.turn(false)
		chats, _ := up.ChatRequests()
		body := string(chats[len(chats)-1].Body)
		if !strings.Contains(body, "summary of history "+name) || strings.Contains(body, "summary of history "+map[string]string{"A": "B", "B": "A"}[name]) {
			t.Fatalf("history %s got the wrong summary: %.400s", name, body)
		}
	}
	waitFor(t, p.recorderDrained, "the turns recorded")
	rec, _, _ := st.Get(state.NewKey([]byte("Bearer sk-agent"), "app-wide-id"))
	if len(rec.Lines) != 2 {
		t.Errorf("%d lines for two histories", len(rec.Lines))
	}
}

// A "/compact" turn is a turn: it counts as a request and a compaction, and
// its tokens saved count, although ctxpress answered it itself.
func TestCompactCommandTurnIsRecorded(t *testing.T) {
	up := openaitest.New(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Trigger.ThresholdTokens = 100000
	p, st := startWithStore(t, cfg)
	a := newAgent(t, p.BaseURL(), "compact-recorded")
	for range 8 {
		a.turn(false)
	}
	key := state.NewKey([]byte("Bearer sk-agent"), a.convID)
	waitFor(t, func() bool { rec, _, _ := st.Get(key); return rec.Requests == 8 }, "the turns recorded")
	a.history = append(a.history, openai.UserMessage("/compact"))
	if h := a.turn(false); h.Get(HeaderCompacted) != "true" {
		t.Fatal("/compact did not compact")
	}
	waitFor(t, func() bool { rec, _, _ := st.Get(key); return rec.Requests == 9 }, "the /compact turn recorded")
	rec, _, _ := st.Get(key)
	last := rec.Turns[len(rec.Turns)-1]
	if rec.Compactions != 1 || !last.Compacted || last.TokensAfter >= last.TokensBefore {
		t.Fatalf("compactions %d, last turn %+v", rec.Compactions, last)
	}
	if n := value(scrape(t, p.URL), "ctxpress_requests_total", "path", "/v1/chat/completions", "status", "200"); n != 9 {
		t.Fatalf("requests metric %v, want 9", n)
	}
}

// With namespace "none" a daemon whose client's credential rotates (Azure
// AD, Vertex, Copilot tokens change hourly) keeps its conversations: the
// summary written under one token applies under the next.
func TestRotatingCredentialKeepsTheConversation(t *testing.T) {
	for _, ns := range []string{"none", "header X-User"} {
		t.Run(ns, func(t *testing.T) {
			up := openaitest.New(t)
			cfg := compactionConfig(up.BaseURL())
			cfg.Compaction.Trigger.ThresholdTokens = 100000
			cfg.Namespace = ns
			p, st := startWithStore(t, cfg)
			a := newAgent(t, p.BaseURL(), "rotating")
			for i := range 8 {
				a.client = openai.NewClient(option.WithBaseURL(p.BaseURL()), option.WithAPIKey(fmt.Sprintf("token-hour-%d", i)),
					option.WithMaxRetries(0), option.WithHeader("X-User", "ada"))
				force := option.WithHeader("X-Ctxpress-Noop", "")
				if i == 6 {
					force = option.WithHeader(HeaderCompact, "force")
				}
				a.turn(false, force)
			}
			chats, _ := up.ChatRequests()
			if !strings.Contains(string(chats[len(chats)-1].Body), "<conversation_summary>") {
				t.Fatal("the summary written under one token did not apply under the next")
			}
			waitFor(t, func() bool { recs, _ := st.List(state.ListOptions{}); return len(recs) > 0 && recs[0].Requests == 8 }, "the turns recorded")
			recs, _ := st.List(state.ListOptions{})
			if len(recs) != 1 {
				t.Fatalf("%d records for one conversation", len(recs))
			}
		})
	}
}

// After one big dedup, a later small one (60 tokens) must not rewrite an
// old, cached message: the minimum applies to what a request adds over
// what its line's previous request deduped, and those stay deduped.
func TestSmallDedupAfterBigOneKeepsTheCachedPrefix(t *testing.T) {
	up := openaitest.New(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Enabled = false
	p, _ := startWithStore(t, cfg)
	msgs := []map[string]any{{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix the leap-year bug."}}
	read := func(path, content string) {
		id := fmt.Sprintf("call_%d", len(msgs))
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": "read", "arguments": fmt.Sprintf(`{"path":%q}`, path)}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": content})
	}
	send := func() []string {
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": msgs})
		if code, out, _ := send(t, http.MethodPost, p.BaseURL()+"/chat/completions", string(body),
			map[string]string{"Authorization": "Bearer sk-agent", "X-Session-ID": "dedup-prefix"}); code != 200 {
			t.Fatalf("%d %s", code, out)
		}
		return messagesOf(up.Last(t).Body)
	}
	big := strings.Repeat("func parse(year int) int { return days(year) } // dateparse/parse.go\n", 400)
	small := strings.Repeat("b.go: const leap = 29\n", 12)
	read("a.go", big)
	send()
	read("a.go", big) // the big dedup: thousands of tokens
	first := send()
	if !strings.Contains(strings.Join(first, ""), rewrite.DedupPlaceholder) {
		t.Fatal("the big duplicate was not deduped; the test proves nothing")
	}
	read("b.go", small)
	before := send()
	read("b.go", small) // a small dedup, far under min_tokens
	after := send()
	if !isPrefix(before, after) {
		t.Fatal("a 60-token dedup rewrote a message the previous request had sent: the cached prefix broke")
	}
	if !isPrefix(first, after) {
		t.Fatal("the big dedup was undone")
	}
}
