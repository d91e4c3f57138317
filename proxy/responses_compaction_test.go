package proxy

import (
	"fmt"
	"slices"
	"time"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/compaction"

	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/compactor"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/internal/responsestest"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// checkSummaryCall fails unless the upstream got want summary calls (0:
// one at least), each in Responses form as a strict Responses upstream
// takes it, continuing the conversation: the input of the turn before it
// byte for byte, then more, the instruction last; tools offered but
// tool_choice "none", store as the turns send it, max_output_tokens, not
// streamed, no chat fields; most of its input cached.
func checkSummaryCall(t *testing.T, up *responsesUpstream, want int) {
	t.Helper()
	_, summaries := up.turns()
	if len(summaries) == 0 || want > 0 && len(summaries) != want {
		t.Fatalf("%d summary calls, want %d", len(summaries), want)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	var prev []byte
	for _, g := range up.got {
		if strings.HasSuffix(g.path, "/chat/completions") {
			t.Fatalf("a chat completions call to a Responses upstream: %.200s", g.body)
		}
		if !g.summary {
			prev = g.body
			continue
		}
		b := g.body
		in := gjson.GetBytes(b, "input").Array()
		if g.path != "/v1/responses" || g.status != http.StatusOK || gjson.GetBytes(b, "store").Raw != gjson.GetBytes(prev, "store").Raw ||
			!gjson.GetBytes(b, "max_output_tokens").Exists() || gjson.GetBytes(b, "messages").Exists() || gjson.GetBytes(b, "max_tokens").Exists() ||
			gjson.GetBytes(b, "stream").Exists() || gjson.GetBytes(b, "tool_choice").Raw != `"none"` ||
			!strings.Contains(openaitest.LastText(in[len(in)-1].Get("content")), compactor.HistoryLead) {
			t.Fatalf("summary call %s %d: %.300s", g.path, g.status, b)
		}
		pi := gjson.GetBytes(prev, "input").Raw
		if !strings.HasPrefix(gjson.GetBytes(b, "input").Raw, pi[:len(pi)-1]) {
			t.Errorf("the summary call's input does not extend the turn before it")
		}
		if g.cached < (len(pi)-1)/4 {
			t.Errorf("summary call: %d of its %d input tokens cached, less than the turn before it", g.cached, g.input)
		}
		t.Logf("summary call: %d of %d input tokens cached", g.cached, g.input)
	}
}

// checkTranscriptCall fails unless the upstream's one summary call is a
// transcript in Responses form: one user message, store false,
// max_output_tokens, no tools.
func checkTranscriptCall(t *testing.T, up *responsesUpstream) {
	t.Helper()
	_, summaries := up.turns()
	if len(summaries) != 1 {
		t.Fatalf("%d summary calls, want 1", len(summaries))
	}
	b := summaries[0].body
	if summaries[0].status != http.StatusOK || len(gjson.GetBytes(b, "input").Array()) != 1 || gjson.GetBytes(b, "store").Type != gjson.False ||
		!gjson.GetBytes(b, "max_output_tokens").Exists() || gjson.GetBytes(b, "tools").Exists() {
		t.Fatalf("summary call %d: %.300s", summaries[0].status, b)
	}
}

// summaryItem returns the index of the input item that carries the
// summary block, -1 when none.
func summaryItem(body []byte) int {
	for i, it := range gjson.GetBytes(body, "input").Array() {
		if strings.Contains(it.Raw, "<conversation_summary>") {
			return i
		}
	}
	return -1
}

// A codex conversation over its trigger is compacted on the Responses
// path: the summary call speaks Responses to the upstream, the compacted
// request is one OpenAI accepts (every reasoning item with the item it
// preceded, every call with its output, parallel calls kept together), the
// summary is a developer message right after the leading ones, and the
// next turns extend it.
func TestResponsesConversationIsCompacted(t *testing.T) {
	for _, parallel := range []int{1, 3} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("parallel=%d/stream=%v", parallel, stream), func(t *testing.T) {
				up := newResponsesUpstream(t)
				up.parallel = parallel
				deps, _ := responsesDeps(t)
				deps.Store = withOriginals(deps.Store)
				p := startProxyWith(t, compactionConfig(up.BaseURL()), deps)
				a := newResponsesAgent(t, p.BaseURL(), "auto")
				compactedAt := 0
				for turn := 1; turn <= 40 && compactedAt == 0; turn++ {
					a.turn(stream)
					if a.header.Get(HeaderCompacted) == "true" {
						compactedAt = turn
					}
				}
				if compactedAt == 0 {
					t.Fatal("never compacted")
				}
				a.turn(stream) // refused by the upstream if the compacted history broke a rule
				next := a.header.Get(HeaderCompacted)
				for range 3 {
					a.turn(stream)
				}
				checkSummaryCall(t, up, 0)
				turns, _ := up.turns()
				last := turns[compactedAt-1].body
				items := gjson.GetBytes(last, "input").Array()
				if i := summaryItem(last); i != 1 || items[i].Get("role").Str != "developer" || items[i].Get("id").Exists() {
					t.Fatalf("summary item at %d: %.200s", i, items[max(i, 0)].Raw)
				}
				checkKept(t, deps.Store, "auto", openaitest.LastText(items[1].Get("content")), 1)
				if next == "false" && !isPrefix(inputItems(turns[compactedAt-1].body), inputItems(turns[compactedAt].body)) {
					t.Error("the turn after a compacted one does not extend it item for item")
				}
				if len(items) >= len(a.items) {
					t.Errorf("forwarded %d items of the client's %d", len(items), len(a.items))
				}
			})
		}
	}
}

// A codex conversation that asks the provider to compact past a threshold
// (context_management) is compacted by ctxpress all the same, in the form
// that continues the conversation: its summary call leaves
// context_management out, which the strict upstream refuses in a summary
// call (the provider would compact it instead of answering), and the
// summary applies.
func TestResponsesSummaryCallAsksNoContextManagement(t *testing.T) {
	up := newResponsesUpstream(t)
	deps, _ := responsesDeps(t)
	p := startProxyWith(t, compactionConfig(up.BaseURL()), deps)
	a := newResponsesAgent(t, p.BaseURL(), "context-management")
	a.opts = append(a.opts, option.WithJSONSet("context_management", []map[string]any{{"type": "compaction", "compact_threshold": 200000}}))
	compactedAt := 0
	for turn := 1; turn <= 40 && compactedAt == 0; turn++ {
		a.turn(false)
		if a.header.Get(HeaderCompacted) == "true" {
			compactedAt = turn
		}
	}
	if compactedAt == 0 {
		t.Fatal("never compacted")
	}
	a.turn(false)
	checkSummaryCall(t, up, 1)
	turns, summaries := up.turns()
	if gjson.GetBytes(summaries[0].body, "context_management").Exists() {
		t.Fatalf("summary call asks the provider to compact: %.300s", summaries[0].body)
	}
	compacted := turns[compactedAt-1].body
	if summaryItem(compacted) < 0 || !gjson.GetBytes(compacted, "context_management").Exists() {
		t.Fatalf("compacted turn: summary item %d, context_management %s", summaryItem(compacted), gjson.GetBytes(compacted, "context_management").Raw)
	}
}

// X-Ctxpress-Compact: force compacts a Responses conversation far under
// its trigger.
func TestResponsesCompactHeaderForces(t *testing.T) {
	up := newResponsesUpstream(t)
	deps, _ := responsesDeps(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Trigger.ThresholdTokens = 1 << 20
	p := startProxyWith(t, cfg, deps)
	a := newResponsesAgent(t, p.BaseURL(), "manual")
	for range 10 {
		a.turn(false)
	}
	a.turn(true, option.WithHeader(HeaderCompact, "force"))
	if a.header.Get(HeaderCompacted) != "true" {
		t.Fatalf("X-Ctxpress-Compacted %q", a.header.Get(HeaderCompacted))
	}
	checkSummaryCall(t, up, 1)
	a.turn(false)
	turns, _ := up.turns()
	if summaryItem(turns[len(turns)-1].body) < 0 {
		t.Fatal("the next turn has no summary")
	}
}

// "/compact" typed as the last user message is answered by ctxpress in
// the Responses form, whole or as OpenAI's events, after compacting; the
// exchange is left out of what later turns forward.
func TestResponsesCompactCommand(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			up := newResponsesUpstream(t)
			deps, _ := responsesDeps(t)
			cfg := compactionConfig(up.BaseURL())
			cfg.Compaction.Trigger.ThresholdTokens = 1 << 20
			p := startProxyWith(t, cfg, deps)
			a := newResponsesAgent(t, p.BaseURL(), "command")
			for range 10 {
				a.turn(false)
			}
			before, _ := up.turns()
			a.ask("/compact")
			r := a.turn(stream)
			after, _ := up.turns()
			if len(after) != len(before) || !strings.HasPrefix(r.OutputText(), rewrite.CompactReplyPrefix+" compacted this conversation") {
				t.Fatalf("%d turns upstream (were %d); answer %q", len(after), len(before), r.OutputText())
			}
			if a.header.Get(HeaderCompacted) != "true" || a.header.Get(HeaderConversation) != "command" {
				t.Errorf("headers %v", a.header)
			}
			checkSummaryCall(t, up, 1)
			a.ask("Go on.")
			a.turn(stream)
			turns, _ := up.turns()
			last := turns[len(turns)-1].body
			if summaryItem(last) < 0 || strings.Contains(string(last), "/compact") || strings.Contains(string(last), rewrite.CompactReplyPrefix) {
				t.Fatalf("the turn after /compact: %.300s", last)
			}
		})
	}
}

// A request that continues a response the provider stored
// (previous_response_id) has history ctxpress cannot see: it is squashed,
// counted and recorded, and never compacted, even when asked.
func TestResponsesPreviousResponseIsNeverCompacted(t *testing.T) {
	up := newResponsesUpstream(t)
	up.toolTurns = 0
	deps, st := responsesDeps(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Trigger.ThresholdTokens = 1000
	p := startProxyWith(t, cfg, deps)
	client := openai.NewClient(option.WithBaseURL(p.BaseURL()), option.WithAPIKey("sk-agent"), option.WithMaxRetries(0))
	first, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "gpt-5", Store: openai.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Build the project.")}}, option.WithHeader("session-id", "stored"))
	if err != nil {
		t.Fatal(err)
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput(bigBuildLog())
	out.OfFunctionCallOutput.CallID = openai.String("call_make")
	params := responses.ResponseNewParams{Model: "gpt-5", Store: openai.Bool(true), PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: []responses.ResponseInputItemUnionParam{
			responses.ResponseInputItemParamOfFunctionCall(`{"cmd":"make"}`, "call_make", "exec_command"), out,
			responsesMessage("Fix the error.", responses.EasyInputMessageRoleUser)}}}
	var header http.Header
	for _, stream := range []bool{false, true} {
		opts := []option.RequestOption{option.WithHeader("session-id", "stored"), option.WithHeader(HeaderCompact, "force"),
			option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
				resp, err := next(r)
				if resp != nil {
					header = resp.Header
				}
				return resp, err
			})}
		if stream {
			s := client.Responses.NewStreaming(t.Context(), params, opts...)
			for s.Next() {
			}
			err = s.Err()
		} else {
			_, err = client.Responses.New(t.Context(), params, opts...)
		}
		if err != nil {
			t.Fatal(err)
		}
		if header.Get(HeaderCompacted) != "false" {
			t.Errorf("stream %v: X-Ctxpress-Compacted %q", stream, header.Get(HeaderCompacted))
		}
	}
	turns, summaries := up.turns()
	if len(summaries) != 0 {
		t.Fatalf("%d summary calls for history the provider keeps", len(summaries))
	}
	fwd := turns[len(turns)-1].body
	if gjson.GetBytes(fwd, "previous_response_id").Str != first.ID || len(fwd) >= len(bigBuildLog()) || len(inputItems(fwd)) != 3 {
		t.Fatalf("forwarded %d bytes: %.300s", len(fwd), fwd)
	}
	recorded := turnsOf(t, p, st, "stored", 3)
	if recorded[2].InputTokens != turns[2].input {
		t.Errorf("recorded input %d, upstream reported %d", recorded[2].InputTokens, turns[2].input)
	}
	if !strings.Contains(p.logs.String(), "previous_response_id") {
		t.Errorf("the log does not say why the asked compaction was not done: %s", lastLines(p.logs.String(), 3))
	}
	rec, _, _ := st.Get(state.NewKey([]byte("Bearer sk-agent"), "stored"))
	if len(rec.Branches) != 0 {
		t.Errorf("%d summaries stored", len(rec.Branches))
	}
}

// An upstream refuses a Responses request over its window: llama-server
// with a 400 exceed_context_size_error before any event, OpenAI (to a
// streamed request) inside a 200 stream, response.failed with
// context_length_exceeded before any output, which codex reads as out of
// room. ctxpress (holding such a stream's start back until it knows)
// compacts and sends the request again, and the client gets the answer.
func TestResponsesOverflowIsRescued(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inStream bool
		refusal  string
	}{
		{"llama-server: a 400 before any event", false, "exceed_context_size_error"},
		{"OpenAI: response.failed in a 200 stream", true, "context_length_exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newResponsesUpstream(t)
			up.overflowInStream = tc.inStream
			deps, _ := responsesDeps(t)
			cfg := compactionConfig(up.BaseURL())
			cfg.Compaction.Trigger.ThresholdTokens = 1 << 20 // ctxpress does not know the real window
			cfg.Compaction.Summarizer.MaxTokens = 300        // so a summary reclaims room
			p := startProxyWith(t, cfg, deps)
			a := newResponsesAgent(t, p.BaseURL(), "overflow")
			for range 12 {
				a.turn(false)
			}
			refused, answered := refuseNextTurn(t, up, a)
			if refused.refusal != tc.refusal || answered.status != http.StatusOK || answered.refusal != "" || summaryItem(answered.body) < 0 {
				t.Fatalf("last two upstream answers: %d %q, %d %q", refused.status, refused.refusal, answered.status, answered.refusal)
			}
			checkTranscriptCall(t, up) // the request refused as too long: the history would be too
			if _, err := responsestest.Check(answered.body, responsestest.Options{}); err != nil {
				t.Fatal(err.Message)
			}
			if !strings.Contains(p.logs.String(), "refused the request as too long") {
				t.Errorf("the rescue is not in the log: %s", lastLines(p.logs.String(), 3))
			}
		})
	}
}

// A short tool loop (one task, a few large outputs: nothing a summary
// would reclaim) refused as too long by an upstream whose window is far
// below what ctxpress knows of the model, without saying how long a
// request may be: its one retry is cut to three quarters of the refused
// size, and the client gets the answer.
func TestStreamedOverflowOfAnUnknownWindowIsCutToFit(t *testing.T) {
	up := newResponsesUpstream(t)
	up.overflowInStream = true
	deps, _ := responsesDeps(t)
	p := startProxyWith(t, compactionConfig(up.BaseURL()), deps)
	a := newResponsesAgent(t, p.BaseURL(), "short-loop")
	a.output = func(n int) string {
		return strings.Repeat(fmt.Sprintf("build step %d: compiling package %d\n", n, n), 150)
	}
	for range 4 {
		a.turn(true)
	}
	refused, answered := refuseNextTurn(t, up, a)
	if refused.refusal != "context_length_exceeded" || answered.refusal != "" || answered.input > up.window {
		t.Fatalf("last two upstream answers: %q, %q with %d tokens (window %d)", refused.refusal, answered.refusal, answered.input, up.window)
	}
	if !strings.Contains(p.logs.String(), "left out to fit") {
		t.Errorf("the cut is not in the log: %s", lastLines(p.logs.String(), 3))
	}
}

// An upstream that refuses a request as too long and names its window
// (llama-server's n_ctx: a context ctxpress was not told of) teaches the
// line that window: the turns after the rescue are compacted before they
// reach it, and none is refused again, nor is a summary call (its
// transcript sized by that window too).
func TestRefusalTeachesTheLineItsWindow(t *testing.T) {
	up := newResponsesUpstream(t)
	deps, st := responsesDeps(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Trigger.ThresholdTokens = 0 // 80% of the window: gpt-5's 272k, as far as ctxpress knows
	cfg.Compaction.Summarizer.MaxTokens = 300
	p := startProxyWith(t, cfg, deps)
	a := newResponsesAgent(t, p.BaseURL(), "learns")
	for range 12 {
		a.turn(false)
	}
	refused, _ := refuseNextTurn(t, up, a)
	if refused.refusal != "exceed_context_size_error" {
		t.Fatalf("the turn was not refused: %q", refused.refusal)
	}
	for range 10 {
		a.turn(true)
	}
	turns, summaries := up.turns()
	refusals := 0
	for _, g := range append(turns, summaries...) {
		if g.refusal != "" {
			refusals++
		}
	}
	if refusals != 1 {
		for i, g := range turns {
			t.Logf("turn %d: input %d refusal %q summary %v", i, g.input, g.refusal, summaryItem(g.body) >= 0)
		}
		t.Errorf("%d refusals, want the first alone", refusals)
	}
	waitFor(t, p.recorderDrained, "the recorder to drain")
	rec, _, _ := st.Get(state.NewKey([]byte("Bearer sk-agent"), "learns"))
	windows := []int{}
	for _, l := range rec.Lines {
		windows = append(windows, l.Window)
	}
	if !slices.Contains(windows, up.window) {
		t.Errorf("the lines' windows are %v, want the upstream's %d", windows, up.window)
	}
}

// refuseNextTurn sets up's window to the last turn's input, so that the
// agent's next turn, streamed, is refused as too long, and sends it (the
// test fails unless its stream ends with response.completed). It returns
// the upstream's last two turns: the refused one and the one after.
func refuseNextTurn(t *testing.T, up *responsesUpstream, a *responsesAgent) (refused, answered upstreamTurn) {
	t.Helper()
	turns, _ := up.turns()
	up.mu.Lock()
	up.window = turns[len(turns)-1].input
	up.mu.Unlock()
	a.turn(true)
	turns, _ = up.turns()
	return turns[len(turns)-2], turns[len(turns)-1]
}

// The summary call in Responses form follows the model's parameter rules
// and learns from a refusal, as the chat call does: a reasoning model gets
// no temperature and room for its reasoning in max_output_tokens, a model
// the table does not know is asked again without the refused parameter,
// and the next call to it goes right the first time.
func TestResponsesSummaryCallFollowsTheModelsRules(t *testing.T) {
	up := newResponsesUpstream(t)
	up.reasoning = map[string]bool{"gpt-5-mini": true, "corp-reasoner": true}
	sum := compaction.NewSummarizer()
	summarize := func(model string) {
		t.Helper()
		res, err := sum.Summarize(t.Context(), compaction.SummaryRequest{BaseURL: up.BaseURL(), API: compaction.APIResponses, Model: model,
			Prompt: compactor.SummarizerLead + " Summarise this.", MaxTokens: 2000, Timeout: 10 * time.Second})
		if err != nil || res.Text != testSummary || res.PromptTokens == 0 {
			t.Fatalf("%s: %q, %v", model, res.Text, err)
		}
	}
	for _, model := range []string{"gpt-5-mini", "gpt-4o", "corp-reasoner", "corp-reasoner"} {
		summarize(model)
	}
	_, calls := up.turns()
	if len(calls) != 5 {
		t.Fatalf("%d calls, want 5: gpt-5-mini 1, gpt-4o 1, corp-reasoner refused once then learned", len(calls))
	}
	for i, c := range calls {
		temp, capped := gjson.GetBytes(c.body, "temperature"), gjson.GetBytes(c.body, "max_output_tokens").Int()
		model := gjson.GetBytes(c.body, "model").Str
		switch {
		case c.path != "/v1/responses":
			t.Errorf("call %d to %s", i, c.path)
		case model == "gpt-5-mini" && (temp.Exists() || capped < 2000+16000):
			t.Errorf("gpt-5-mini: temperature %s, max_output_tokens %d", temp.Raw, capped)
		case model == "gpt-4o" && (temp.Float() != 0.3 || capped != 2000):
			t.Errorf("gpt-4o: temperature %s, max_output_tokens %d", temp.Raw, capped)
		case model == "corp-reasoner" && (i == 2) != (c.status == 400):
			t.Errorf("corp-reasoner call %d: %d", i, c.status)
		}
	}
}

// With precompact on, a Responses conversation's summary is written in the
// background (parsed from the turn's copy as Responses) before a turn
// waits for one; the conversation shows on the admin API and in the
// metrics as a chat one does.
func TestResponsesPrecompactsAndShowsOnTheDashboard(t *testing.T) {
	up := newResponsesUpstream(t)
	deps, _ := responsesDeps(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Precompact = true
	p := startProxyWith(t, cfg, deps)
	a := newResponsesAgent(t, p.BaseURL(), "pre")
	started := 0 // the turn whose answer started the precompaction
	for turn := 1; turn <= 40; turn++ {
		started = turn
		a.turn(false)
		if a.header.Get(HeaderCompacted) == "true" {
			t.Fatalf("turn %d waited for a summary call", turn)
		}
		p.comp.Wait()
		if _, summaries := up.turns(); len(summaries) > 0 {
			break
		}
	}
	checkSummaryCall(t, up, 1)
	// The prepared summary is sent from the third turn after, or from the
	// one that crosses the trigger if sooner.
	for turn, applied := started+1, false; !applied; turn++ {
		a.turn(false)
		turns, _ := up.turns()
		applied = summaryItem(turns[len(turns)-1].body) >= 0
		before, _ := strconv.Atoi(a.header.Get(HeaderTokensBefore))
		if due := turn >= started+rewrite.PrecompactLagTurns || before > testTrigger; applied != due {
			t.Fatalf("turn %d (precompaction after turn %d) of %d tokens before (trigger %d): summary applied %v", turn, started, before, testTrigger, applied)
		}
	}
	if _, summaries := up.turns(); len(summaries) != 1 {
		t.Fatalf("%d summary calls, want the one prepared", len(summaries))
	}
	turns, _ := up.turns()
	var show admin.ConversationDetail
	waitFor(t, func() bool {
		var found struct {
			Data []admin.ConversationDetail `json:"data"`
		}
		getJSON(t, p.URL+"/ctxpress/conversations/pre", &found)
		if len(found.Data) == 1 {
			show = found.Data[0]
		}
		return show.Requests == int64(len(turns))
	}, "every turn on the admin API")
	if show.BranchCount != 1 || show.TokensSaved <= 0 || len(show.Turns) == 0 || show.Turns[len(show.Turns)-1].InputTokens != turns[len(turns)-1].input {
		t.Errorf("admin API: %+v", show.ConversationInfo)
	}
	fams := scrape(t, p.URL)
	if value(fams, "ctxpress_requests_total", "path", "/v1/responses", "status", "200") != float64(len(turns)) ||
		value(fams, "ctxpress_tokens_saved_total") <= 0 {
		t.Errorf("metrics: %v requests, %v tokens saved", value(fams, "ctxpress_requests_total", "path", "/v1/responses", "status", "200"),
			value(fams, "ctxpress_tokens_saved_total"))
	}
}
