package rewrite

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/wire/responses"
	"github.com/tidwall/gjson"
)

// A Responses request that continues a response the provider stored
// (previous_response_id) carries only what is new: its outputs are
// squashed and it is counted, but no summary, history cap, instruction or
// /compact command touches it — each would rewrite, or pile up in, a
// history ctxpress cannot see.
func TestServerHistoryRequestIsSquashedOnly(t *testing.T) {
	log := strings.Repeat("building module x: ok\n", 200)
	out := `{"type":"function_call_output","call_id":"call_1","output":` + quote(log) + `}`
	body := []byte(`{"model":"gpt-5","previous_response_id":"resp_1","store":true,"input":[` +
		`{"type":"message","role":"developer","content":"be brief"},` + out + `,{"type":"message","role":"user","content":"/compact"}]}`)
	p := New(Config{Format: responses.Format{}, Squasher: squashWith(truncSquash)})
	res := p.RewriteWith(body, Options{ConciseOutput: true, ForceCommand: true, MaxHistoryMessages: 1,
		Branches: []history.Branch{{Summary: "s", Covered: 1}}, FitTokens: 10})
	if !res.Understood || !res.ServerHistory {
		t.Fatalf("understood %v, server history %v", res.Understood, res.ServerHistory)
	}
	if res.Squashed != 1 || res.TokensAfter >= res.TokensBefore {
		t.Errorf("squashed %d, tokens %d -> %d", res.Squashed, res.TokensBefore, res.TokensAfter)
	}
	if res.CompactCommand || res.Trimmed != 0 || res.FitDropped != 0 || res.Applied >= 0 {
		t.Errorf("command %v, trimmed %d, fit %d, applied %d", res.CompactCommand, res.Trimmed, res.FitDropped, res.Applied)
	}
	in := gjson.GetBytes(res.Body, "input").Array()
	if len(in) != 3 || strings.Contains(string(res.Body), ConciseInstruction) || gjson.GetBytes(res.Body, "previous_response_id").Str != "resp_1" {
		t.Errorf("forwarded %s", res.Body)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
