package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/state"
)

// observedConversation is a chat conversation of n requests, each the
// last plus a tool call whose output is a long failing test run: big
// enough to squash, and over a 4,000-token trigger after a few turns.
func observedConversation(n int) [][]byte {
	msgs := []map[string]any{{"role": "system", "content": "You are a coding agent."},
		{"role": "user", "content": "Make the test suite pass."}}
	var bodies [][]byte
	for i := range n {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": id, "type": "function",
			"function": map[string]any{"name": "bash", "arguments": fmt.Sprintf(`{"cmd":"pytest -q tests/test_%d.py"}`, i)}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": failingTests(300 + i)})
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": msgs})
		bodies = append(bodies, body)
	}
	return bodies
}

// post sends body as a chat completion of conversation conv.
func post(t *testing.T, url, conv string, body []byte) http.Header {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-agent")
	req.Header.Set("X-Session-ID", conv)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	return resp.Header
}

// In observe mode every request reaches the upstream byte for byte as
// the client sent it and no summary call is made, while the record,
// the headers and the stats show what ctxpress would have done: tokens
// and money saved, the compactions it would have made. Switched to normal
// mode on the same db, it rewrites as it would have from the start, the
// observe mode's stand-ins never sent.
func TestObserveModeForwardsAsSentAndShowsWhatItWouldHaveDone(t *testing.T) {
	up := openaitest.New(t)
	db := filepath.Join(t.TempDir(), "ctxpress.db")
	st := openStoreAt(t, db)
	cfg := compactionConfig(up.BaseURL())
	cfg.Mode = ModeObserve
	cfg.Compaction.Trigger.ThresholdTokens = 2000
	p := startProxyWith(t, cfg, Deps{Pipeline: pipelineForTest(), Store: st})
	bodies := observedConversation(12)
	for i, body := range bodies[:10] {
		h := post(t, p.URL, "observed", body)
		before, _ := strconv.Atoi(h.Get(HeaderTokensBefore))
		after, _ := strconv.Atoi(h.Get(HeaderTokensAfter))
		if after >= before {
			t.Errorf("turn %d: tokens %s -> %s: the headers do not show what ctxpress would have taken out", i, h.Get(HeaderTokensBefore), h.Get(HeaderTokensAfter))
		}
	}
	chats, summaries := up.ChatRequests()
	if len(summaries) != 0 {
		t.Fatalf("%d summary calls in observe mode", len(summaries))
	}
	if len(chats) != 10 {
		t.Fatalf("the upstream got %d requests, want 10", len(chats))
	}
	for i, r := range chats {
		if !bytes.Equal(r.Body, bodies[i]) {
			t.Fatalf("request %d reached the upstream changed (%d bytes, sent %d)", i, len(r.Body), len(bodies[i]))
		}
	}
	key := state.NewKey([]byte("Bearer sk-agent"), "observed")
	rec := recordOf(t, p, st, key, 10)
	if rec.TokensSaved <= 0 || rec.Compactions == 0 {
		t.Errorf("record: %d tokens saved, %d compactions; want what ctxpress would have done", rec.TokensSaved, rec.Compactions)
	}
	var stats admin.Stats
	getJSON(t, p.URL+"/ctxpress/stats", &stats)
	if stats.Mode != ModeObserve || stats.MoneySaved <= 0 || stats.SummaryCost <= 0 {
		t.Errorf("stats: mode %q, money saved %v, summary calls %v; want observe mode's would-be saving, net of the summary calls it would have paid",
			stats.Mode, stats.MoneySaved, stats.SummaryCost)
	}
	observed := 0
	for _, b := range rec.Branches {
		if b.Observed {
			observed++
		}
	}
	if observed == 0 {
		t.Fatal("no stand-in kept for the compaction it would have made")
	}

	// The same db in normal mode: the stand-ins are not sent, and the
	// request is compacted for real.
	p.Shutdown(t.Context())
	st.Close()
	st = openStoreAt(t, db)
	cfg.Mode = ""
	p = startProxyWith(t, cfg, Deps{Pipeline: pipelineForTest(), Store: st})
	post(t, p.URL, "observed", bodies[10])
	chats, summaries = up.ChatRequests()
	last := chats[len(chats)-1].Body
	if strings.Contains(string(last), "(observe mode:") {
		t.Error("normal mode sent observe mode's stand-in")
	}
	if len(summaries) == 0 || bytes.Equal(last, bodies[10]) {
		t.Errorf("normal mode did not compact (%d summary calls, body unchanged %v)", len(summaries), bytes.Equal(last, bodies[10]))
	}
}

// The dashboard of a proxy in observe mode says so above its figures.
func TestObserveModeIsSaidOnTheDashboard(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("the dashboard browser test needs Debian's chromium at %s (run .ci/chromium.sh)", chromiumPath)
	}
	if testing.Short() {
		t.Skip("starts a browser")
	}
	up := openaitest.New(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Mode = ModeObserve
	p, _ := startWithStore(t, cfg)
	for _, body := range observedConversation(3) {
		post(t, p.URL, "observed", body)
	}
	ctx := newBrowser(t, 1000, 60*time.Second)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	if err := chromedp.Do(ctx, chromedp.Navigate(p.URL+"/ctxpress/ui"), chromedp.WaitVisible(css(`#conversations tbody tr`)),
		chromedp.WaitVisible(css(`#observe`))); err != nil {
		t.Fatal(err)
	}
	banner, err := chromedp.Run(ctx, chromedp.TextContent(css(`#observe`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(banner, "Observe mode") {
		t.Errorf("banner %q", banner)
	}
}
