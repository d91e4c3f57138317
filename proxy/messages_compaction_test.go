package proxy

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/compaction"
	"github.com/ctxpress/ctxpress/wire/messages"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/internal/messagestest"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// claudeCodeBeta is the capture's anthropic-beta list.
const claudeCodeBeta = "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,per-turn-control-2026-07-01,mid-conversation-tool-changes-2026-07-01,thinking-token-count-2026-05-13,advanced-tool-use-2025-11-20,effort-2025-11-24"

// checkMessagesSummaryCall fails unless the upstream got want summary
// calls (0: one at least), each in Messages form as Anthropic takes it:
// POST /v1/messages with the client's x-api-key, anthropic-version and
// anthropic-beta, accepted by the strict upstream (every thinking block
// as it signed it); the conversation's own request (system, tools,
// thinking as the turns send them, context_management left out) with the
// instruction as its last user text, max_tokens, not streamed; most of its prompt read from the cache
// the turns wrote.
func checkMessagesSummaryCall(t *testing.T, up *messagesUpstream, want int) {
	t.Helper()
	turns, summaries := up.turns()
	if len(summaries) == 0 || want > 0 && len(summaries) != want {
		t.Fatalf("%d summary calls, want %d", len(summaries), want)
	}
	// (Byte for byte the call extends this request as ctxpress would
	// forward it, which Claude Code's moving cache marker keeps from
	// being a byte prefix of the turn before: the wire tests check the
	// bytes; the cache read here, keyed without the markers, checks the
	// prefix.)
	for _, s := range summaries {
		b, h := s.body, s.header
		msgs := gjson.GetBytes(b, "messages").Array()
		if s.path != "/v1/messages" || s.status != http.StatusOK || gjson.GetBytes(b, "max_tokens").Int() <= 0 ||
			gjson.GetBytes(b, "stream").Exists() || !strings.Contains(openaitest.LastText(msgs[len(msgs)-1].Get("content")), compactor.HistoryLead) {
			t.Fatalf("summary call %s %d: %.300s", s.path, s.status, b)
		}
		if !gjson.GetBytes(b, "system").Exists() {
			t.Errorf("summary call without the conversation's system")
		}
		for _, k := range []string{"tools", "thinking", "metadata"} {
			if gjson.GetBytes(b, k).Raw != gjson.GetBytes(turns[0].body, k).Raw {
				t.Errorf("summary call's %s is not the turns'", k)
			}
		}
		if gjson.GetBytes(b, "context_management").Exists() {
			t.Errorf("summary call asks the provider to manage its context")
		}
		if h.Get("X-Api-Key") != testAnthropicKey || h.Get("Anthropic-Version") != "2023-06-01" || h.Get("Anthropic-Beta") != claudeCodeBeta {
			t.Fatalf("summary call headers: x-api-key %q, anthropic-version %q, anthropic-beta %q",
				h.Get("X-Api-Key"), h.Get("Anthropic-Version"), h.Get("Anthropic-Beta"))
		}
		if s.cacheRead*10 < s.prompt()*8 {
			t.Errorf("summary call read %d of its %d prompt tokens from the cache (wrote %d)", s.cacheRead, s.prompt(), s.cacheWrite)
		}
		t.Logf("summary call: %d of %d prompt tokens read from the cache, %d written", s.cacheRead, s.prompt(), s.cacheWrite)
	}
}

// systemSummary reports whether the request's top-level system ends with
// the summary block, the client's markers left where they were.
func systemSummary(body []byte) bool {
	sys := gjson.GetBytes(body, "system").Array()
	return len(sys) > 0 && strings.Contains(sys[len(sys)-1].Get("text").Str, "<conversation_summary>") &&
		strings.Count(gjson.GetBytes(body, "system").Raw, "cache_control") == 2
}

// claudeCodeCompaction is compaction on, with a trigger over Claude Code's
// ~12k-token system prompt and tools.
func claudeCodeCompaction(upstream string, trigger int) Config {
	cfg := compactionConfig(upstream)
	cfg.Compaction.Trigger.ThresholdTokens = trigger
	return cfg
}

// A Claude Code conversation over its trigger is compacted on the Messages
// path against an upstream that verifies every thinking signature: the
// summary call speaks Messages to the upstream with the client's
// credentials, the summary block ends the top-level system, the compacted
// request and every later one are accepted (no thinking block whose
// prefix changed is kept, or the request opts out with drop_block), and
// the next turns extend it.
func TestClaudeCodeConversationIsCompacted(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			up := newMessagesUpstream(t)
			deps, _ := responsesDeps(t)
			deps.Store = withOriginals(deps.Store)
			p := startProxyWith(t, claudeCodeCompaction(up.BaseURL(), 16000), deps)
			a := newMessagesAgent(t, p.URL, "auto-"+strconv.FormatBool(stream))
			compactedAt := a.untilCompacted(stream)
			for range 4 {
				a.turn(stream) // refused by the upstream if the compacted history broke a rule
			}
			checkMessagesSummaryCall(t, up, 0)
			turns, _ := up.turns()
			compacted := turns[compactedAt-1]
			if !systemSummary(compacted.body) {
				t.Fatalf("no summary block at the end of system: %.300s", gjson.GetBytes(compacted.body, "system").Raw)
			}
			if n := len(gjson.GetBytes(compacted.body, "messages").Array()); n >= len(a.msgs)-8 {
				t.Errorf("forwarded %d messages of the client's %d", n, len(a.msgs)-8)
			}
			if _, err := messagestest.Check(compacted.body, messagestest.Options{Header: compacted.header}); err != nil {
				t.Fatal(err.Message)
			}
			sys := gjson.GetBytes(compacted.body, "system").Array()
			checkKept(t, deps.Store, "auto-"+strconv.FormatBool(stream), sys[len(sys)-1].Get("text").Str, 0)
			t.Logf("compacted at turn %d: %d -> %d messages; thinking blocks dropped upstream: %v; %d verified",
				compactedAt, len(a.msgs)-8, len(gjson.GetBytes(compacted.body, "messages").Array()), compacted.dropped, up.ledger.Verified())
		})
	}
}

// A Claude conversation whose requests ask the provider to manage their
// context (context_management edits) is compacted by ctxpress all the
// same, in the form that continues the conversation: its summary call
// leaves context_management out, which the strict upstream refuses in a
// summary call (the provider would compact it instead of answering), and
// the summary applies.
func TestMessagesSummaryCallAsksNoContextManagement(t *testing.T) {
	up := newMessagesUpstream(t)
	deps, _ := responsesDeps(t)
	p := startProxyWith(t, claudeCodeCompaction(up.BaseURL(), 16000), deps)
	a := newMessagesAgent(t, p.URL, "context-management")
	for i, f := range a.top {
		if f.key == "context_management" {
			a.top[i].raw = `{"edits":[{"type":"clear_thinking_20251015","keep":"all"},{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":180000}}]}`
		}
	}
	compactedAt := a.untilCompacted(false)
	a.turn(false)
	checkMessagesSummaryCall(t, up, 1)
	turns, _ := up.turns()
	compacted := turns[compactedAt-1]
	if !systemSummary(compacted.body) || !strings.Contains(gjson.GetBytes(compacted.body, "context_management").Raw, "clear_tool_uses_20250919") {
		t.Fatalf("compacted turn: summary block %v, context_management %s", systemSummary(compacted.body), gjson.GetBytes(compacted.body, "context_management").Raw)
	}
}

// A compaction inside Claude Code's tool loop keeps the latest thinking
// block, whose prefix changed, and asks drop_block: the request carries
// the beta that opens it, after the client's own betas (sent as two
// anthropic-beta headers), once even when the client sent it already; the
// strict upstream refuses drop_block without it. The next turns, which
// keep asking, carry it too.
func TestClaudeToolLoopCompactionSendsTheDropBlockBeta(t *testing.T) {
	first, rest, _ := strings.Cut(claudeCodeBeta, ",")
	for _, r := range []struct {
		name, first, rest string
		want              string
	}{
		{"the client's betas and the beta", first, rest, claudeCodeBeta + "," + messages.BetaThinkingBinding},
		{"the client sent it already", first, rest + ", " + messages.BetaThinkingBinding, ""},
	} {
		t.Run(r.name, func(t *testing.T) {
			up := newMessagesUpstream(t)
			deps, _ := responsesDeps(t)
			p := startProxyWith(t, claudeCodeCompaction(up.BaseURL(), 16000), deps)
			a := newMessagesAgent(t, p.URL, "drop-block")
			a.header = slices.DeleteFunc(a.header, func(h [2]string) bool { return strings.EqualFold(h[0], messages.HeaderBeta) })
			a.header = append(a.header, [2]string{"anthropic-beta", r.first}, [2]string{"anthropic-beta", r.rest})
			compactedAt := 0
			for turn := 1; turn <= 40 && compactedAt == 0; turn++ {
				a.turn(false)
				if a.resp.Get(HeaderCompacted) == "true" {
					compactedAt = turn
				}
			}
			if compactedAt == 0 {
				t.Fatal("never compacted")
			}
			a.turn(false) // refused without the beta
			turns, _ := up.turns()
			for _, g := range turns[compactedAt-1:] {
				if !messages.AsksDropBlock(g.body) {
					t.Fatalf("a turn after the compaction inside the tool loop asks no drop_block: %s", gjson.GetBytes(g.body, "thinking").Raw)
				}
				want := []string{r.want}
				if r.want == "" {
					want = []string{r.first, r.rest}
				}
				if got := g.header.Values(messages.HeaderBeta); !slices.Equal(got, want) {
					t.Errorf("anthropic-beta %q, want %q", got, want)
				}
			}
		})
	}
}

// A compaction's branch keeps how many messages its request had (Since),
// across the store: without it a later user turn cannot tell which kept
// thinking blocks are bound to the replaced history, and every later
// request leans on the upstream dropping them.
func TestClaudeCodeBranchRemembersWhereItsThinkingEnds(t *testing.T) {
	up := newMessagesUpstream(t)
	deps, st := responsesDeps(t)
	p := startProxyWith(t, claudeCodeCompaction(up.BaseURL(), 1<<20), deps)
	a := newMessagesAgent(t, p.URL, "since")
	for range 8 {
		a.turn(false)
	}
	sent := len(a.msgs)
	a.turn(false, [2]string{HeaderCompact, "force"})
	if a.resp.Get(HeaderCompacted) != "true" {
		t.Fatalf("X-Ctxpress-Compacted %q", a.resp.Get(HeaderCompacted))
	}
	var branches []state.Branch
	waitFor(t, func() bool {
		recs, err := st.List(state.ListOptions{})
		if err != nil || len(recs) != 1 {
			return false
		}
		branches = recs[0].Branches
		return len(branches) == 1
	}, "the summary stored")
	if branches[0].Since != sent {
		t.Fatalf("branch Since %d, want the %d messages of the request it summarised", branches[0].Since, sent)
	}
}

// X-Ctxpress-Compact: force compacts a Claude Code conversation far under
// its trigger; the next turn carries the summary and is accepted.
func TestClaudeCodeCompactHeaderForces(t *testing.T) {
	up := newMessagesUpstream(t)
	deps, _ := responsesDeps(t)
	p := startProxyWith(t, claudeCodeCompaction(up.BaseURL(), 1<<20), deps)
	a := newMessagesAgent(t, p.URL, "manual")
	for range 10 {
		a.turn(false)
	}
	a.turn(true, [2]string{HeaderCompact, "force"})
	if a.resp.Get(HeaderCompacted) != "true" {
		t.Fatalf("X-Ctxpress-Compacted %q", a.resp.Get(HeaderCompacted))
	}
	checkMessagesSummaryCall(t, up, 1)
	a.turn(false)
	turns, _ := up.turns()
	if !systemSummary(turns[len(turns)-1].body) {
		t.Fatal("the next turn has no summary")
	}
}

// "/compact" typed as the last user message is answered by ctxpress in
// the Messages form, whole or as Anthropic's events, after compacting;
// the exchange is left out of what later turns forward. (Claude Code
// keeps "/compact" for its own command; an Anthropic SDK agent sends it.)
func TestClaudeCodeCompactCommand(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			up := newMessagesUpstream(t)
			up.toolTurns = 10
			deps, _ := responsesDeps(t)
			p := startProxyWith(t, claudeCodeCompaction(up.BaseURL(), 1<<20), deps)
			a := newMessagesAgent(t, p.URL, "command-"+strconv.FormatBool(stream))
			for range 11 {
				a.turn(false)
			}
			before, _ := up.turns()
			a.ask("/compact")
			r := a.turn(stream)
			after, _ := up.turns()
			if len(after) != len(before) || !strings.HasPrefix(r.text(), rewrite.CompactReplyPrefix+" compacted this conversation") || r.stop != "end_turn" {
				t.Fatalf("%d turns upstream (were %d); answer %q, stop %q", len(after), len(before), r.text(), r.stop)
			}
			if a.resp.Get(HeaderCompacted) != "true" || a.resp.Get(HeaderConversation) != "command-"+strconv.FormatBool(stream) {
				t.Errorf("headers %v", a.resp)
			}
			checkMessagesSummaryCall(t, up, 1)
			a.ask("Go on.")
			a.turn(stream)
			turns, _ := up.turns()
			last := turns[len(turns)-1].body
			if !systemSummary(last) || strings.Contains(string(last), `"/compact"`) || strings.Contains(string(last), rewrite.CompactReplyPrefix) {
				t.Fatalf("the turn after /compact: %.300s", last)
			}
		})
	}
}

// An Anthropic upstream refuses a request over its window with "prompt is
// too long", llama-server on /v1/messages with its 400
// exceed_context_size_error (in OpenAI's shape), both before any event:
// ctxpress compacts and sends it again, and Claude Code gets the answer.
func TestMessagesOverflowIsRescued(t *testing.T) {
	for _, llama := range []bool{false, true} {
		t.Run(map[bool]string{false: "anthropic", true: "llama-server"}[llama], func(t *testing.T) {
			up := newMessagesUpstream(t)
			up.llama = llama
			deps, _ := responsesDeps(t)
			cfg := claudeCodeCompaction(up.BaseURL(), 1<<20) // ctxpress does not know the real window
			cfg.Compaction.Summarizer.MaxTokens = 300        // so a summary reclaims room
			p := startProxyWith(t, cfg, deps)
			a := newMessagesAgent(t, p.URL, "overflow")
			for range 12 {
				a.turn(false)
			}
			turns, _ := up.turns()
			up.mu.Lock()
			up.window = turns[len(turns)-1].prompt()
			up.mu.Unlock()
			a.turn(true)
			turns, _ = up.turns()
			n := len(turns)
			if turns[n-2].refusal != "overflow" || turns[n-1].status != http.StatusOK || !systemSummary(turns[n-1].body) {
				t.Fatalf("last two upstream answers: %d %q, %d", turns[n-2].status, turns[n-2].refusal, turns[n-1].status)
			}
			// Refused as too long, the history would be too: a transcript.
			if _, summaries := up.turns(); len(summaries) != 1 || len(gjson.GetBytes(summaries[0].body, "messages").Array()) != 1 ||
				gjson.GetBytes(summaries[0].body, "tools").Exists() || summaries[0].status != http.StatusOK {
				t.Fatalf("%d summary calls, want one transcript", len(summaries))
			}
		})
	}
}

// The summary call in Messages form carries anthropic-version (the API
// refuses a request without one) and follows the model's parameter rules
// as the other forms do: a model that refuses temperature is asked again
// without it, and the next call to it goes right the first time.
func TestMessagesSummaryCallFollowsTheModelsRules(t *testing.T) {
	up := newMessagesUpstream(t)
	up.noTemperature = map[string]bool{"claude-opus-5-5": true}
	sum := compaction.NewSummarizer()
	summarize := func(model string) {
		t.Helper()
		res, err := sum.Summarize(t.Context(), compaction.SummaryRequest{BaseURL: up.BaseURL(), API: compaction.APIMessages, APIKey: testAnthropicKey, Model: model,
			Prompt: compactor.SummarizerLead + " Summarise this.", MaxTokens: 2000, Timeout: 10 * time.Second})
		if err != nil || res.Text != testSummary || res.PromptTokens == 0 {
			t.Fatalf("%s: %q, %v", model, res.Text, err)
		}
	}
	for _, model := range []string{"claude-haiku-4-5", "claude-opus-5-5", "claude-opus-5-5"} {
		summarize(model)
	}
	_, calls := up.turns()
	if len(calls) != 4 {
		t.Fatalf("%d calls, want 4: haiku 1, opus refused once then learned", len(calls))
	}
	for i, c := range calls {
		temp, capped := gjson.GetBytes(c.body, "temperature"), gjson.GetBytes(c.body, "max_tokens").Int()
		switch model := gjson.GetBytes(c.body, "model").Str; {
		case c.header.Get("Anthropic-Version") != "2023-06-01" || c.header.Get("Anthropic-Beta") != "":
			t.Errorf("call %d: anthropic-version %q, anthropic-beta %q", i, c.header.Get("Anthropic-Version"), c.header.Get("Anthropic-Beta"))
		case model == "claude-haiku-4-5" && (temp.Float() != 0.3 || capped != 2000):
			t.Errorf("haiku: temperature %s, max_tokens %d", temp.Raw, capped)
		case model == "claude-opus-5-5" && (i == 1) != (c.status == 400):
			t.Errorf("opus call %d: %d", i, c.status)
		case model == "claude-opus-5-5" && i > 1 && temp.Exists():
			t.Errorf("opus call %d still sends temperature", i)
		}
	}
}

// A summariser of its own in Messages form (compaction.summarizer with
// api: messages) gets the summary call with its own key as x-api-key and
// the default anthropic-version, none of the client's credentials or
// betas; the conversation's upstream gets no summary call.
func TestMessagesSummarizerOfItsOwn(t *testing.T) {
	up, sum := newMessagesUpstream(t), newMessagesUpstream(t)
	sum.key = "sk-ant-summariser-key"
	deps, _ := responsesDeps(t)
	cfg := claudeCodeCompaction(up.BaseURL(), 1<<20)
	cfg.Compaction.Summarizer = compaction.SummarizerConfig{BaseURL: sum.BaseURL(), API: compaction.APIMessages, APIKey: sum.key, Model: "claude-haiku-4-5"}
	p := startProxyWith(t, cfg, deps)
	a := newMessagesAgent(t, p.URL, "own-summariser")
	for range 10 {
		a.turn(false)
	}
	a.turn(false, [2]string{HeaderCompact, "force"})
	if a.resp.Get(HeaderCompacted) != "true" {
		t.Fatalf("X-Ctxpress-Compacted %q", a.resp.Get(HeaderCompacted))
	}
	if _, s := up.turns(); len(s) != 0 {
		t.Fatalf("%d summary calls to the conversation's upstream", len(s))
	}
	_, calls := sum.turns()
	if len(calls) != 1 {
		t.Fatalf("%d summary calls to the summariser", len(calls))
	}
	h := calls[0].header
	if h.Get("X-Api-Key") != sum.key || h.Get("Anthropic-Version") != "2023-06-01" || h.Get("Anthropic-Beta") != "" || h.Get("Authorization") != "" ||
		gjson.GetBytes(calls[0].body, "model").Str != "claude-haiku-4-5" {
		t.Fatalf("summary call: x-api-key %q, anthropic-version %q, anthropic-beta %q, Authorization %q: %.200s",
			h.Get("X-Api-Key"), h.Get("Anthropic-Version"), h.Get("Anthropic-Beta"), h.Get("Authorization"), calls[0].body)
	}
}

// compaction.summarizer.api takes the three forms, and only with a base_url.
func TestSummarizerAPIConfig(t *testing.T) {
	for _, tc := range []struct {
		api, base string
		ok        bool
	}{
		{"", "", true},
		{"chat", "http://127.0.0.1:1/v1", true},
		{"responses", "http://127.0.0.1:1/v1", true},
		{"messages", "http://127.0.0.1:1/v1", true},
		{"messages", "", false},
		{"anthropic", "http://127.0.0.1:1/v1", false},
	} {
		err := compaction.Config{Summarizer: compaction.SummarizerConfig{API: tc.api, BaseURL: tc.base}}.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("api %q, base_url %q: %v", tc.api, tc.base, err)
		}
	}
}

// A conversation over its trigger whose compaction would reclaim too
// little is told once per turn, by the compaction event at info, not also
// by a warning on every turn (an operator reads warnings as faults).
func TestSkippedCompactionIsNoWarning(t *testing.T) {
	up := newMessagesUpstream(t)
	deps, _ := responsesDeps(t)
	cfg := claudeCodeCompaction(up.BaseURL(), 1000)
	cfg.Compaction.MinReclaimTokens = 1 << 30
	p := startProxyWith(t, cfg, deps)
	a := newMessagesAgent(t, p.URL, "skipped")
	for range 3 {
		a.turn(false)
	}
	logs := p.logs.String()
	if !strings.Contains(logs, `"result":"skipped"`) {
		t.Fatalf("no skipped compaction event:\n%.2000s", logs)
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"level":"warn"`) && strings.Contains(line, "compaction") {
			t.Errorf("a skipped compaction warned: %s", line)
		}
	}
}

// untilCompacted runs a's turns until ctxpress compacts one (at most 40),
// failing the test when none is, and returns that turn's number.
func (a *messagesAgent) untilCompacted(stream bool) int {
	a.t.Helper()
	for turn := 1; turn <= 40; turn++ {
		a.turn(stream)
		if a.resp.Get(HeaderCompacted) == "true" {
			return turn
		}
	}
	a.t.Fatal("never compacted")
	return 0
}
