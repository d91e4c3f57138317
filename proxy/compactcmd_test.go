package proxy

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/openai/openai-go/v3"
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
		waitFor(t, func() bool { return len(started) > 0 || p.comp.running() == 0 }, "the precompaction to call the summariser or end")
		if len(started) > 0 {
			break
		}
	}
	a.history = append(a.history, openai.UserMessage("/compact"))
	answered := make(chan http.Header, 1)
	go func() { answered <- a.turn(false) }()
	waitFor(t, func() bool { return p.comp.waiting.Load() == 1 }, "/compact waiting on the running compaction")
	release()
	h := <-answered
	last := a.history[len(a.history)-2].OfAssistant.Content.OfString.Value
	if h.Get(HeaderCompacted) != "true" || !strings.Contains(last, "compacted this conversation") {
		t.Fatalf("/compact during a background compaction: %q (X-Ctxpress-Compacted %q)", last, h.Get(HeaderCompacted))
	}
}
