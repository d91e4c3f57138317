//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/state"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

// convo is a scripted tool-using agent conversation.
type convo struct {
	msgs []map[string]any
	turn int
}

func newConvo() *convo {
	return &convo{msgs: []map[string]any{
		{"role": "system", "content": "You are a coding agent. Use the bash tool to inspect the repository, then fix the failing test."},
		{"role": "user", "content": "The test TestParseDate fails on leap years. Find the bug in dateparse/parse.go and fix it."},
	}}
}

// toolOutput is a distinct ~200-byte result for a turn: the conversation
// outgrows the 2048-token window around turn 11 when sent directly.
func toolOutput(turn int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "$ sed -n %d,%dp dateparse/parse.go\n", turn*10, turn*10+8)
	for i := 0; b.Len() < 200; i++ {
		fmt.Fprintf(&b, "%d: if month == %d && day > daysIn(year, month) { return errDay%d }\n", turn*10+i, (turn+i)%12+1, turn)
	}
	return b.String()
}

func (c *convo) body(stream bool, extra map[string]any) []byte {
	req := map[string]any{"model": modelName, "messages": c.msgs, "max_tokens": 16, "temperature": 0, "stream": stream}
	for k, v := range extra {
		req[k] = v
	}
	b, _ := json.Marshal(req)
	return b
}

// advance appends the assistant's reply as a tool call and the tool's result.
func (c *convo) advance(reply string) {
	c.turn++
	id := "call_" + strconv.Itoa(c.turn)
	c.msgs = append(c.msgs,
		map[string]any{"role": "assistant", "content": reply, "tool_calls": []any{map[string]any{
			"id": id, "type": "function", "function": map[string]any{"name": "bash",
				"arguments": fmt.Sprintf(`{"command":"sed -n %d,%dp dateparse/parse.go"}`, c.turn*10, c.turn*10+8)}}}},
		map[string]any{"role": "tool", "tool_call_id": id, "content": toolOutput(c.turn)})
}

type answer struct {
	status  int
	body    string
	headers http.Header
	reply   string
	prompt  int // usage.prompt_tokens, -1 when absent
}

func post(t *testing.T, url string, body []byte, headers map[string]string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-e2e")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	a := answer{status: resp.StatusCode, headers: resp.Header, body: readAll(resp.Body), prompt: -1}
	if gjson.Get(a.body, "usage.prompt_tokens").Exists() {
		a.prompt = int(gjson.Get(a.body, "usage.prompt_tokens").Int())
	}
	a.reply = gjson.Get(a.body, "choices.0.message.content").String()
	return a
}

// Chat through ctxpress with the official client, streamed and not: the
// answers arrive, ctxpress records the server's own prompt_tokens, and a
// client that did not ask for usage sees no usage chunk.
func TestChatThroughCtxpress(t *testing.T) {
	srv := startLlama(t)
	cp := startCtxpress(t, srv.URL(), filepath.Join(t.TempDir(), "ctxpress.db"), "")
	client := openai.NewClient(option.WithBaseURL(cp.BaseURL()), option.WithAPIKey("sk-e2e"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{
		Model:     modelName,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Once upon a time")},
		MaxTokens: openai.Int(24),
	}
	got, err := client.Chat.Completions.New(context.Background(), params, option.WithHeader("X-Session-ID", "chat"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Message.Content == "" || got.Usage.PromptTokens == 0 {
		t.Fatalf("answer %+v", got)
	}
	logged := cp.waitLog("request", func(l map[string]any) bool { return l["input_tokens"] != nil && l["stream"] == nil })
	if num(logged["input_tokens"]) != int(got.Usage.PromptTokens) {
		t.Fatalf("ctxpress recorded %v input tokens, the server reported %d", logged["input_tokens"], got.Usage.PromptTokens)
	}

	s := client.Chat.Completions.NewStreaming(context.Background(), params, option.WithHeader("X-Session-ID", "chat"))
	acc := openai.ChatCompletionAccumulator{}
	chunks := 0
	for s.Next() {
		c := s.Current()
		chunks++
		if c.JSON.Usage.Valid() && c.Usage.PromptTokens > 0 {
			t.Fatalf("client got a usage chunk it did not ask for: %s", c.RawJSON())
		}
		acc.AddChunk(c)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content == "" || chunks < 3 {
		t.Fatalf("stream: %d chunks, %q", chunks, acc.Choices[0].Message.Content)
	}
	streamed := cp.waitLog("request", func(l map[string]any) bool { return l["stream"] == true && l["input_tokens"] != nil })
	if num(streamed["input_tokens"]) != int(got.Usage.PromptTokens) {
		t.Fatalf("stream: ctxpress recorded %v input tokens, the server counts %d for these messages", streamed["input_tokens"], got.Usage.PromptTokens)
	}
}

// This model's tokenizer counts very differently from o200k (about 2.3x
// more, and dozens of tokens per message for its chat template); once two
// turns were counted (from the third on), X-Ctxpress-Tokens-After, the
// calibrated estimate, is within 10% of the server's own count, and the
// record holds the calibration (server count / raw tiktoken count).
func TestCalibration(t *testing.T) {
	srv := startLlama(t)
	db := filepath.Join(t.TempDir(), "ctxpress.db")
	cp := startCtxpress(t, srv.URL(), db, "compaction: {enabled: false}\n")
	c := newConvo()
	hdr := map[string]string{"X-Session-ID": "calibration"}
	var cal float64
	for turn := 1; turn <= 4; turn++ {
		a := post(t, cp.BaseURL(), c.body(false, nil), hdr)
		if a.status != 200 || a.prompt <= 0 {
			t.Fatalf("turn %d: %d %s", turn, a.status, a.body)
		}
		est, _ := strconv.Atoi(a.headers.Get("X-Ctxpress-Tokens-After"))
		line := cp.waitLog("request", func(l map[string]any) bool { return l["input_tokens"] == float64(a.prompt) })
		raw, _ := line["raw_tokens_after"].(float64)
		off := math.Abs(float64(est)-float64(a.prompt)) / float64(a.prompt)
		t.Logf("turn %d: header estimate %d, server %d: %.1f%% off; raw tiktoken %.0f (ratio %.2f)", turn, est, a.prompt, 100*off, raw, float64(a.prompt)/raw)
		if turn >= 3 && off > 0.10 {
			t.Fatalf("turn %d: the calibrated estimate %d is %.1f%% off the server's %d", turn, est, 100*off, a.prompt)
		}
		cal = float64(a.prompt) / raw // what ctxpress records as calibration
		c.advance(a.reply)
	}
	// ctxpress's own record holds that calibration.
	cp.stop()
	st, err := state.OpenBolt(db, state.BoltOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, ok, err := st.Get(state.NewKey([]byte("Bearer sk-e2e"), "calibration"))
	if err != nil || !ok {
		t.Fatalf("no record: %v", err)
	}
	if l := rec.CurrentLine(); math.Abs(l.Calibration.Ratio-cal) > 0.05*cal || l.Calibration.LastInput == 0 {
		t.Fatalf("recorded calibration %.3f, observed %.3f (line %+v)", l.Calibration.Ratio, cal, l)
	}
}

// event returns the compaction events ctxpress logged.
func events(cp *ctxpress) []map[string]any {
	var out []map[string]any
	for _, l := range cp.Logs("compaction") {
		if e, ok := l["event"].(map[string]any); ok {
			out = append(out, e)
		}
	}
	return out
}

// The headline: 30 turns of a tool-using conversation that outgrows the
// model's 2048-token window. Sent directly, the server refuses it once it is
// too long; through ctxpress every turn is answered, the server writes the
// summaries itself, and no request exceeds the window.
func TestThirtyTurnsOutgrowTheWindow(t *testing.T) {
	srv := startLlama(t)

	direct := newConvo()
	refusedAt, directTokens := 0, 0
	for turn := 1; turn <= 30; turn++ {
		a := post(t, srv.URL(), direct.body(false, nil), nil)
		if a.status != 200 {
			if a.status != 400 || !strings.Contains(a.body, "exceed_context_size_error") {
				t.Fatalf("direct turn %d: unexpected %d %s", turn, a.status, a.body)
			}
			refusedAt = turn
			break
		}
		directTokens += a.prompt
		direct.advance(a.reply)
	}
	if refusedAt == 0 {
		t.Fatal("the conversation never outgrew the window when sent directly; make turns bigger")
	}

	cp := startCtxpress(t, srv.URL(), filepath.Join(t.TempDir(), "ctxpress.db"),
		"models: {"+modelName+": {context_window: 2048}}\n")
	c := newConvo()
	hdr := map[string]string{"X-Session-ID": "thirty"}
	maxPrompt, sent, compacted := 0, 0, 0
	worstOff, worstTurn := 0.0, 0
	start := time.Now()
	for turn := 1; turn <= 30; turn++ {
		a := post(t, cp.BaseURL(), c.body(turn%2 == 0, nil), hdr)
		if a.status != 200 {
			t.Fatalf("turn %d through ctxpress: %d %s", turn, a.status, a.body)
		}
		if turn%2 == 0 { // streamed: the usage is in the log
			l := cp.waitLog("request", func(l map[string]any) bool {
				return l["conversation"] == "thirty" && l["stream"] == true && num(l["tokens_after"]) == mustAtoi(a.headers.Get("X-Ctxpress-Tokens-After"))
			})
			a.prompt = num(l["input_tokens"])
			a.reply = "ok"
		}
		if a.headers.Get("X-Ctxpress-Compacted") == "true" {
			compacted++
		}
		maxPrompt = max(maxPrompt, a.prompt)
		sent += a.prompt
		// What a user reads as the upstream's count: from the third turn
		// (two counted to learn from), within 15% of the server's.
		if est := mustAtoi(a.headers.Get("X-Ctxpress-Tokens-After")); turn >= 3 && a.prompt > 0 {
			if off := math.Abs(float64(est-a.prompt)) / float64(a.prompt); off > worstOff {
				worstOff, worstTurn = off, turn
			}
		}
		c.advance(a.reply)
	}
	elapsed := time.Since(start)
	t.Logf("X-Ctxpress-Tokens-After vs the server's prompt_tokens: at most %.1f%% off (turn %d)", 100*worstOff, worstTurn)
	if worstOff > 0.15 {
		t.Errorf("turn %d: the header's estimate is %.1f%% off the server's count", worstTurn, 100*worstOff)
	}
	evs := events(cp)
	summarising := 0
	ok := 0
	for _, e := range evs {
		summarising += num(e["duration_ms"])
		if e["result"] == "ok" {
			ok++
		} else if e["result"] == "failed" {
			t.Errorf("a compaction failed: %v", e)
		}
	}
	if ok == 0 {
		t.Fatal("no compaction through ctxpress")
	}
	if maxPrompt >= 2048 {
		t.Fatalf("a request of %d tokens reached the 2048-token server", maxPrompt)
	}
	t.Logf("direct: refused at turn %d (%d prompt tokens sent before); through ctxpress: 30/30 turns, %d prompt tokens sent, largest request %d, %d compactions (%d waited on), %d ms summarising of %v",
		refusedAt, directTokens, sent, maxPrompt, ok, compacted, summarising, elapsed.Round(time.Millisecond))
}

func mustAtoi(s string) int { n, _ := strconv.Atoi(s); return n }

// Edited history gets no summary; /compact is answered by ctxpress after a
// real summary call; after a restart on the same db the summary still
// applies.
func TestEditedHistoryCompactCommandAndRestart(t *testing.T) {
	srv := startLlama(t)
	db := filepath.Join(t.TempDir(), "ctxpress.db")
	extra := "models: {" + modelName + ": {context_window: 2048}}\n"
	cp := startCtxpress(t, srv.URL(), db, extra)
	c := newConvo()
	hdr := map[string]string{"X-Session-ID": "restart"}
	for turn := 1; turn <= 6; turn++ {
		a := post(t, cp.BaseURL(), c.body(false, nil), hdr)
		if a.status != 200 {
			t.Fatalf("turn %d: %d %s", turn, a.status, a.body)
		}
		c.advance(a.reply)
	}
	// /compact, answered by ctxpress itself after a real summary call.
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": "/compact"})
	a := post(t, cp.BaseURL(), c.body(false, nil), hdr)
	if a.status != 200 || !strings.Contains(a.reply, "compacted this conversation") || a.headers.Get("X-Ctxpress-Compacted") != "true" {
		t.Fatalf("/compact: %d %s", a.status, a.body)
	}
	c.msgs = append(c.msgs, map[string]any{"role": "assistant", "content": a.reply},
		map[string]any{"role": "user", "content": "Go on."})
	compactionsSoFar := len(cp.Logs("compaction"))
	a = post(t, cp.BaseURL(), c.body(false, nil), hdr)
	before, after := mustAtoi(a.headers.Get("X-Ctxpress-Tokens-Before")), mustAtoi(a.headers.Get("X-Ctxpress-Tokens-After"))
	if a.status != 200 || after >= before {
		t.Fatalf("the turn after /compact: %d, tokens %d -> %d", a.status, before, after)
	}
	counted := a.prompt // the server's own count of that request, which ctxpress records

	// Restart on the same db: the stored summary still applies, with no new
	// summary call. The turn above may have started a background
	// precompaction (this model's tokenizer counts about twice o200k); stop
	// lets it finish, and then the newer summary, covering more, is the one
	// that applies.
	cp.stop()
	newer := false
	for _, l := range cp.Logs("compaction")[compactionsSoFar:] {
		ev, _ := l["event"].(map[string]any)
		newer = newer || ev["trigger"] == "precompact" && ev["result"] == "ok"
	}
	t.Logf("a background precompaction stored a newer summary before the restart: %v", newer)
	cp = startCtxpress(t, srv.URL(), db, extra)
	a = post(t, cp.BaseURL(), c.body(true, nil), hdr)
	if a.status != 200 {
		t.Fatalf("after restart: %d %s", a.status, a.body)
	}
	gotBefore, got := mustAtoi(a.headers.Get("X-Ctxpress-Tokens-Before")), mustAtoi(a.headers.Get("X-Ctxpress-Tokens-After"))
	switch {
	case a.headers.Get("X-Ctxpress-Compacted") != "false":
		t.Fatalf("after restart the request was compacted again (%s); the stored summary should have applied", a.headers.Get("X-Ctxpress-Compacted"))
	case got >= gotBefore || got > counted:
		t.Fatalf("after restart the request counts %d -> %d tokens, before it %d (the server counted %d): the summary was not applied", gotBefore, got, after, counted)
	case !newer && got != counted:
		// The same request with the same summary: the estimate is the
		// server's own count of it, recorded before the restart.
		t.Fatalf("after restart the request is estimated at %d tokens; the server counted %d for it before the restart", got, counted)
	}

	// Edit an early (covered) message: no summary for that history.
	edited := newConvo()
	edited.msgs = append(edited.msgs, c.msgs[2:]...)
	edited.msgs[3] = map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "an edited result"}
	a = post(t, cp.BaseURL(), edited.body(false, nil), hdr)
	if a.status != 200 {
		t.Fatalf("edited: %d %s", a.status, a.body)
	}
	cp.waitLog("history differs from every stored summary (edited, rewound, or compacted by the provider); no summary applied", func(map[string]any) bool { return true })
}

// A server killed mid-stream: the client's stream ends in an error (never a
// clean end), ctxpress answers the next request with a clean 502 while the
// server is down, and recovers when it is back.
func TestServerKilledMidStream(t *testing.T) {
	srv := startLlama(t)
	cp := startCtxpress(t, srv.URL(), filepath.Join(t.TempDir(), "ctxpress.db"), "")
	body := []byte(`{"model":"` + modelName + `","stream":true,"max_tokens":1500,"messages":[{"role":"user","content":"Once upon a time"}]}`)
	req, _ := http.NewRequest(http.MethodPost, cp.BaseURL()+"/chat/completions", bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q %v", line, err)
	}
	srv.kill()
	var rest bytes.Buffer
	_, err = rest.ReadFrom(br)
	resp.Body.Close()
	if err == nil && strings.Contains(rest.String(), "[DONE]") {
		t.Fatal("a stream cut by a dead server looked complete to the client")
	}

	a := post(t, cp.BaseURL(), []byte(`{"model":"`+modelName+`","max_tokens":8,"messages":[{"role":"user","content":"Hello"}]}`), nil)
	if a.status != http.StatusBadGateway || gjson.Get(a.body, "error.type").String() != "ctxpress_error" {
		t.Fatalf("server down: %d %s", a.status, a.body)
	}
	srv.start()
	a = post(t, cp.BaseURL(), []byte(`{"model":"`+modelName+`","max_tokens":8,"messages":[{"role":"user","content":"Hello"}]}`), nil)
	if a.status != 200 || a.reply == "" {
		t.Fatalf("server back: %d %s", a.status, a.body)
	}
}
