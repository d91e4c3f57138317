package rewrite

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/chatcheck"

	"github.com/tidwall/gjson"
)

// agentLoop is a chat body: a system prompt, one ask, then turns of an
// assistant tool call and a ~size-byte result.
func agentLoop(turns, size int) []byte {
	msgs := []map[string]any{{"role": "system", "content": "You are a coding agent."},
		{"role": "user", "content": "Fix the leap-year bug in dateparse."}}
	for i := range turns {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": "bash", "arguments": fmt.Sprintf(`{"command":"go test ./... # %d"}`, i)}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": strings.Repeat(fmt.Sprintf("turn %d: ok dateparse 0.01s\n", i), size/26)})
	}
	b, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": msgs})
	return b
}

// A request that cannot fit and cannot be compacted is cut to fit, not
// refused: the system prompt, the ask (re-sent), the newest whole turns
// and one line saying what was left out.
func TestRequestOverTheWindowIsCutToFit(t *testing.T) {
	p := New(Config{Format: chatFormat})
	body := agentLoop(30, 600)
	full := p.RewriteWith(body, Options{})
	for _, budget := range []int{full.TokensAfter / 2, full.TokensAfter / 5, 600} {
		res := p.RewriteWith(body, Options{FitTokens: budget})
		if res.TokensAfter > budget || res.FitDropped == 0 {
			t.Fatalf("budget %d: %d tokens after, %d messages left out", budget, res.TokensAfter, res.FitDropped)
		}
		if err := chatcheck.ValidateChat(res.Body); err != nil {
			t.Fatalf("budget %d: forwarded body is not a valid chat request: %v", budget, err)
		}
		if n, _ := p.Counter().CountRequest(chatFormat, res.Body); n != res.TokensAfter {
			t.Errorf("budget %d: TokensAfter %d, the body counts %d", budget, res.TokensAfter, n)
		}
		msgs := gjson.GetBytes(res.Body, "messages").Array()
		if msgs[0].Get("role").String() != "system" || !strings.Contains(msgs[0].Get("content").String(), fmt.Sprintf(FitNote, res.FitDropped)) {
			t.Errorf("budget %d: the system prompt does not say what was left out: %.200s", budget, msgs[0].Raw)
		}
		if msgs[1].Get("content").String() != "Fix the leap-year bug in dateparse." {
			t.Errorf("budget %d: the ask is not re-sent first: %.200s", budget, msgs[1].Raw)
		}
		last := gjson.GetBytes(body, "messages.@reverse.0").Raw
		if msgs[len(msgs)-1].Raw != last {
			t.Errorf("budget %d: the newest message is not kept as sent", budget)
		}
	}
	if res := p.RewriteWith(body, Options{FitTokens: full.TokensAfter}); res.FitDropped != 0 || string(res.Body) != string(full.Body) {
		t.Error("a request that fits was cut")
	}
}

// A request whose earlier tool results dedup replaced is still cut to fit
// its window: the savings are counted once, not once in the messages as
// forwarded and again off the rest (which made fit take a request over
// the budget for one that fits, and forward it whole).
func TestRequestWithDedupsOverTheWindowIsCutToFit(t *testing.T) {
	src := goSource(t)
	read := jsonString(`{"path":"reverseproxy.go"}`)
	msgs := []string{`{"role":"system","content":"You are a coding agent."}`, `{"role":"user","content":"Read the proxy twice."}`,
		callMsg("r1", "read_file", read), resultMsg("r1", src), callMsg("r2", "read_file", read), resultMsg("r2", src)}
	for i := range 12 {
		id := "t" + itoa(i)
		msgs = append(msgs, callMsg(id, "bash", jsonString(`{"command":"go test ./... # `+itoa(i)+`"}`)),
			resultMsg(id, strings.Repeat("turn "+itoa(i)+": ok dateparse 0.01s\n", 20)))
	}
	p := New(Config{Format: chatFormat, Dedup: DefaultDedupConfig()})
	body := chat("gpt-4o", msgs...)
	full := p.RewriteWith(body, Options{})
	if full.Deduped != 1 || full.DedupSavedTokens < 1000 {
		t.Fatalf("deduped %d saving %d: the test needs the first read replaced", full.Deduped, full.DedupSavedTokens)
	}
	budget := full.TokensAfter - 1
	res := p.RewriteWith(body, Options{FitTokens: budget})
	if res.TokensAfter > budget || res.FitDropped == 0 {
		t.Fatalf("budget %d: %d tokens forwarded, %d messages left out", budget, res.TokensAfter, res.FitDropped)
	}
}
