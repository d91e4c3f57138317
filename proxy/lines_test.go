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

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/chat"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
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

// An active conversation's summary is used on every turn, so it is the
// most recently used branch however many other histories of the key
// compact after it: it must never be the one evicted.
func TestAppliedSummaryIsNotEvictedByOtherBranches(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var rec state.Record
	active := state.ChainHash{1}
	rec.PutBranch(state.Branch{Branch: history.Branch{Summary: "active", Covered: 10, Hash: active}}, t0)
	for i := range 2 * state.MaxBranches {
		// A turn of the active conversation applies its summary...
		applyTurn(&rec, turnRecord{turn: turn{applied: &active}}, t0.Add(time.Duration(2*i+1)*time.Minute))
		// ...and another history of the key compacts.
		rec.PutBranch(state.Branch{Branch: history.Branch{Summary: "other", Covered: 4, Hash: state.ChainHash{byte(2 + i)}}},
			t0.Add(time.Duration(2*i+2)*time.Minute))
	}
	found := false
	for _, b := range rec.Branches {
		found = found || b.Hash == active
	}
	if !found {
		t.Fatal("the summary the conversation uses every turn was evicted")
	}
}

// A background compaction that stores its summary between a turn's read of
// the record and the turn taking the line's lock: the turn must use that
// summary, not pay for a second summary of the same messages.
func TestPrecompactionLandingBeforeTheLockCausesNoSecondSummary(t *testing.T) {
	up := openaitest.New(t)
	cfg := compactionConfig(up.BaseURL())
	p, st := startWithStore(t, cfg)
	a := newAgent(t, p.BaseURL(), "stale-record")
	a.history = append(a.history, toolTurn()...)
	for range 8 {
		a.history = append(a.history,
			openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
				Content: openai.ChatCompletionAssistantMessageParamContentUnion{OfString: openai.String("Looking.")}}},
			openai.UserMessage(strings.Repeat("Here is more context about the leap-year bug. ", 60)))
	}
	body, err := json.Marshal(openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: a.history})
	if err != nil {
		t.Fatal(err)
	}
	key := state.NewKey([]byte("Bearer sk-agent"), a.convID)
	parsed := rewrite.Parse(chat.Format{}, body)
	turnAt := func(rec state.Record) turnInput {
		res := p.pipeline.RewriteParsed(parsed, p.comp.options(rec, state.ChainHash{}))
		line, nums := lineOf(&rec, res)
		return turnInput{api: chatAPI, key: key, rec: rec, line: line, nums: nums, parsed: parsed, res: res,
			trigger: p.comp.cfg.Trigger.Trigger(res.Model), creds: clientCreds{authorization: "Bearer sk-agent"}}
	}
	// The turn reads the record: nothing stored yet.
	stale := turnAt(state.Record{Key: key})
	if due, err := p.comp.due(&stale); !due {
		t.Fatalf("the request is not over its trigger (%d tokens): %v", stale.res.TokensAfter, err)
	}
	// A background compaction of the same line runs and stores its summary.
	bg := stale
	bg.body = body
	p.comp.precompact(bg)
	p.comp.wait()
	if _, summaries := up.ChatRequests(); len(summaries) != 1 {
		t.Fatalf("%d summary calls from the background compaction", len(summaries))
	}
	// Now the turn takes the lock, holding the record it read before.
	res, o := p.comp.maybeCompact(stale, kindAuto)
	if _, summaries := up.ChatRequests(); len(summaries) != 1 {
		t.Fatalf("a second summary call (%d in all) for messages just summarised", len(summaries))
	}
	if res.Applied < 0 || o.err != nil {
		t.Fatalf("the turn did not use the stored summary (applied %d, err %v)", res.Applied, o.err)
	}
	if rec, _, _ := st.Get(key); len(rec.Branches) != 1 {
		t.Fatalf("%d branches stored", len(rec.Branches))
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

// While the store is slow to write, the next request of each history
// under a key finds its line and the numbers its last turn reported. Only
// the key's latest queued turn was seen, so the other history's request,
// its turns not written yet, started a line of its own (from no
// calibration, without its breaker), and the record kept two lines for it.
func TestQueuedTurnsOfEveryHistoryAreSeenByTheNextRequest(t *testing.T) {
	r := stoppedRecorder(t, state.NewMemory()) // nothing is written
	key := state.NewKey([]byte("Bearer k"), "app-wide-id")
	lineA := lineRef{id: state.ChainHash{0xa}, tip: state.ChainHash{0xa, 9}, messages: 9}
	lineB := lineRef{id: state.ChainHash{0xb}, tip: state.ChainHash{0xb, 7}, messages: 7}
	r.record(turnRecord{turn: turn{key: key, line: lineA, model: "m", rawAfter: 1000},
		usage: wire.Usage{Found: true, InputTokens: 1500}})
	r.record(turnRecord{turn: turn{key: key, line: lineB, model: "m", rawAfter: 800},
		usage: wire.Usage{Found: true, InputTokens: 1000}})

	rec, err := r.read(key) // what the next request reads
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		ref   lineRef
		input int
	}{{lineA, 1500}, {lineB, 1000}} {
		l := rec.LineByID(want.ref.id)
		if l == nil {
			t.Errorf("line %x not seen while its turn is queued (lines %+v)", want.ref.id[:1], rec.Lines)
			continue
		}
		if l.Tip != want.ref.tip || l.Messages != want.ref.messages || l.Calibration.LastInput != want.input {
			t.Errorf("line %x: tip %x at %d, input %d; want the queued turn's %x at %d, %d",
				want.ref.id[:1], l.Tip[:2], l.Messages, l.Calibration.LastInput, want.ref.tip[:2], want.ref.messages, want.input)
		}
	}
}

// On replicas, a conversation's second turn can reach another replica
// before the first turn's record is written: it reads no line and starts
// one. When its own record is written after the first turn's, it must join
// the first turn's line, not leave the conversation with two.
func TestTurnThatReadBeforeThePreviousTurnsRecordJoinsItsLine(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	chain := [][32]byte{{1}, {2}, {3}, {4}}
	// Both turns were read against an empty record.
	var empty state.Record
	first, _ := lineOfChain(&empty, chain[:2], "m")
	second, _ := lineOfChain(&empty, chain, "m")
	var rec state.Record
	applyTurn(&rec, turnRecord{turn: turn{line: first, model: "m"}}, t0)
	applyTurn(&rec, turnRecord{turn: turn{line: second, model: "m"}}, t0.Add(time.Second))
	if len(rec.Lines) != 1 {
		t.Fatalf("%d lines for one conversation, want 1", len(rec.Lines))
	}
	if l := rec.Lines[0]; l.ID != state.ChainHash(chain[1]) || l.Tip != state.ChainHash(chain[3]) || l.Messages != 3 {
		t.Errorf("line %x tip %x at %d messages; want the first turn's line at the second's tip", l.ID[:2], l.Tip[:2], l.Messages)
	}
	// A different history read against the same empty record keeps its own.
	other, _ := lineOfChain(&empty, [][32]byte{{1}, {9}}, "m")
	applyTurn(&rec, turnRecord{turn: turn{line: other, model: "m"}}, t0.Add(2*time.Second))
	if len(rec.Lines) != 2 {
		t.Errorf("%d lines after another history's first turn, want 2", len(rec.Lines))
	}
}
