package proxy

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/ctxpress/ctxpress/internal/openaitest"
)

// "/compact" as the last user message is answered by ctxpress itself, in
// the client's stream mode, after compacting; no completion call is made.
func TestCompactCommand(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			up := openaitest.New(t)
			cfg := compactionConfig(up.BaseURL())
			cfg.Compaction.Trigger.ThresholdTokens = 100000 // never on its own
			p, _ := startWithStore(t, cfg)
			a := newAgent(t, p.BaseURL(), "command")
			for i := 0; i < 10; i++ {
				a.turn(false)
			}
			chatsBefore, _ := up.ChatRequests()
			a.history = append(a.history, openai.UserMessage("/compact"))
			h := a.turn(stream)
			chats, summaries := up.ChatRequests()
			if len(chats) != len(chatsBefore) || len(summaries) != 1 {
				t.Fatalf("chat calls %d -> %d, summary calls %d", len(chatsBefore), len(chats), len(summaries))
			}
			if h.Get(HeaderCompacted) != "true" {
				t.Fatalf("X-Ctxpress-Compacted = %q", h.Get(HeaderCompacted))
			}
			last := a.history[len(a.history)-2].OfAssistant.Content.OfString.Value
			if !strings.Contains(last, "compacted this conversation") || !strings.Contains(last, "tokens") {
				t.Fatalf("answer: %q", last)
			}
			a.history = append(a.history, openai.UserMessage("continue"))
			a.turn(false)
			chats, _ = up.ChatRequests()
			if !strings.Contains(string(chats[len(chats)-1].Body), "<conversation_summary>") {
				t.Fatal("the turn after /compact has no summary")
			}
		})
	}
}

// ctxpress's own answer to "/compact" said only X-Ctxpress-Compacted: the
// token headers (what the conversation counts now) and the conversation id
// a client or a recording proxy reads on every other answer were missing.
func TestCompactCommandAnswerCarriesTheTokenHeaders(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			up := openaitest.New(t)
			cfg := compactionConfig(up.BaseURL())
			cfg.Compaction.Trigger.ThresholdTokens = 100000
			p, _ := startWithStore(t, cfg)
			a := newAgent(t, p.BaseURL(), "command-headers")
			for range 10 {
				a.turn(false)
			}
			a.history = append(a.history, openai.UserMessage("/compact"))
			h := a.turn(stream)
			before, errB := strconv.Atoi(h.Get(HeaderTokensBefore))
			after, errA := strconv.Atoi(h.Get(HeaderTokensAfter))
			if errB != nil || errA != nil || after <= 0 || after >= before {
				t.Errorf("tokens before %q after %q", h.Get(HeaderTokensBefore), h.Get(HeaderTokensAfter))
			}
			if h.Get(HeaderConversation) != a.convID || h.Get(HeaderCompacted) != "true" {
				t.Errorf("conversation %q compacted %q", h.Get(HeaderConversation), h.Get(HeaderCompacted))
			}
		})
	}
}

// "/compact" typed in qwen-code arrives as the last text part of a user
// message whose first parts are qwen's own <system-reminder> blocks; it
// went upstream as a prompt. It is answered by ctxpress like a bare one,
// and the turns after it do not forward the command or the answer.
func TestCompactCommandAfterClientRemindersIsAnswered(t *testing.T) {
	up := openaitest.New(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Trigger.ThresholdTokens = 100000 // never on its own
	p, _ := startWithStore(t, cfg)
	a := newAgent(t, p.BaseURL(), "qwen-command")
	for range 10 {
		a.turn(false)
	}
	chatsBefore, _ := up.ChatRequests()
	a.history = append(a.history, openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
		openai.TextContentPart("<system-reminder>\nThe following skills are available for use with the Skill tool: " + strings.Repeat("batch, review, ", 80) + "\n</system-reminder>"),
		openai.TextContentPart("<system-reminder>\nThe current date is: Tuesday, December 1, 2026.\n</system-reminder>"),
		openai.TextContentPart("/compact"),
	}))
	h := a.turn(true)
	chats, summaries := up.ChatRequests()
	if len(chats) != len(chatsBefore) || len(summaries) != 1 || h.Get(HeaderCompacted) != "true" {
		t.Fatalf("chat calls %d -> %d, summary calls %d, compacted %q", len(chatsBefore), len(chats), len(summaries), h.Get(HeaderCompacted))
	}
	// The client keeps ctxpress's answer as a plain assistant message (the
	// helper adds a tool call to every answer).
	answer := a.history[len(a.history)-2].OfAssistant.Content.OfString.Value
	a.history = append(a.history[:len(a.history)-2], openai.AssistantMessage(answer), openai.UserMessage("continue"))
	a.turn(false)
	chats, _ = up.ChatRequests()
	last := string(chats[len(chats)-1].Body)
	if !strings.Contains(last, "<conversation_summary>") || strings.Contains(last, "/compact") || strings.Contains(last, "[ctxpress]") {
		t.Fatalf("the turn after /compact: summary %v, command or answer forwarded %v",
			strings.Contains(last, "<conversation_summary>"), strings.Contains(last, "/compact"))
	}
}

// "/compact" sent while a background compaction of the same conversation is
// writing its summary waits for it and still answers "compacted": the user
// asked for it, and the request carries a summary either way.
func TestCompactCommandDuringBackgroundCompaction(t *testing.T) {
	up := openaitest.New(t)
	started, held := make(chan struct{}, 8), make(chan struct{})
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(held) }) }
	up.Handle(openaitest.SummaryPath, func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-held
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"## Active Task\nFix the parser."},"finish_reason":"stop"}]}`)
	})
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Precompact = true
	p, _ := startWithStore(t, cfg)
	// A failed test still ends: released before the proxy's Shutdown and
	// the upstream's Close, which wait for the summary call.
	t.Cleanup(release)
	a := newAgent(t, p.BaseURL(), "joined")
	for i := 0; ; i++ {
		if i == 40 {
			t.Fatal("no background compaction started in 40 turns")
		}
		// A precompaction is started before the turn's answer is sent; it
		// either calls the summariser (which holds it) or gives up.
		a.turn(false)
		waitFor(t, func() bool { return len(started) > 0 || p.comp.Running() == 0 }, "the precompaction to call the summariser or end")
		if len(started) > 0 {
			break
		}
	}
	a.history = append(a.history, openai.UserMessage("/compact"))
	answered := make(chan http.Header, 1)
	go func() { answered <- a.turn(false) }()
	waitFor(t, func() bool { return p.comp.Waiting() == 1 }, "/compact waiting on the running compaction")
	release()
	h := <-answered
	last := a.history[len(a.history)-2].OfAssistant.Content.OfString.Value
	if h.Get(HeaderCompacted) != "true" || !strings.Contains(last, "compacted this conversation") {
		t.Fatalf("/compact during a background compaction: %q (X-Ctxpress-Compacted %q)", last, h.Get(HeaderCompacted))
	}
}
