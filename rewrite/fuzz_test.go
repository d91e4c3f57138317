package rewrite

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/internal/chatcheck"
	wirechat "github.com/ctxpress/ctxpress/wire/chat"

	"github.com/tidwall/gjson"
)

var fuzzPipeline = sync.OnceValue(func() *Pipeline {
	return New(Config{Format: chatFormat, Squasher: squashWith(truncSquash), Dedup: DedupConfig{Enabled: true, MinTokens: -1}, CacheBytes: 8 << 20})
})

// FuzzRewrite: no body makes Rewrite (or EnsureStreamUsage, Identify)
// panic; a body that is not valid JSON passes through unchanged; a valid
// body gives a valid body that differs only inside tool results and is not
// more tokens. The seeds run in plain `go test`.
func FuzzRewrite(f *testing.F) {
	for _, s := range []string{
		``, `{`, `[]`, `null`, `{"messages":null}`, `{"messages":[]}`, `{"messages":[1,"a",null,{}]}`,
		`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		string(chat("gpt-4o", callMsg("c1", "read_file", `"{\"p\":1}"`), resultMsg("c1", longOutput+longOutput), callMsg("c2", "read_file", `{"p":1}`), resultMsg("c2", longOutput))),
		string(chat("qwen", `{"role":"tool","tool_call_id":"x","content":[{"type":"text","text":"\u00e9\ud83d\ude00\\n"},{"type":"text","text":1}]}`)),
		`{"messages":[{"role":"tool","content":"a\"b"}],"messages":[{"role":"user"}]}`,
		`  {"messages" : [ { "role" : "function" , "name" : "f" , "content" : "x" } ] }  `,
		`{"prompt\u005fcache_key":"k\u00e9","prompt_cache_key":"second","messages":[]}`,
	} {
		f.Add([]byte(s))
	}
	// Two small real traces, when the corpus is there.
	if dir, _ := findCorpus(); dir != "" {
		for _, name := range []string{"openhands-runtime-wrong_initial_state.json", "openhands-resolver-pr-viewer-issue5.json"} {
			if b, err := os.ReadFile(filepath.Join(dir, "traces", name)); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		orig := bytes.Clone(body)
		p := fuzzPipeline()
		res := p.Rewrite(body)
		if !bytes.Equal(body, orig) {
			t.Fatal("input modified")
		}
		if !gjson.ValidBytes(body) {
			if res.Understood || res.Changed || !bytes.Equal(res.Body, body) {
				t.Fatalf("invalid JSON not passed through: %+v", res)
			}
		}
		if json.Valid(body) && !json.Valid(res.Body) {
			t.Fatalf("valid input, invalid output:\n%s", res.Body)
		}
		if res.Understood {
			assertOnlyContentsChanged(t, body, res.Body)
			if res.TokensAfter > res.TokensBefore {
				t.Fatalf("tokens grew %d -> %d", res.TokensBefore, res.TokensAfter)
			}
		} else if !bytes.Equal(res.Body, body) {
			t.Fatal("not understood but changed")
		}
		checkFuzzSummary(t, p, body, res)
		out, _ := wirechat.EnsureStreamUsage(body)
		if json.Valid(body) && !json.Valid(out) {
			t.Fatalf("EnsureStreamUsage: invalid output %s", out)
		}
		id := Identify(IdentifyConfig{}, chatFormat, func(string) []byte { return nil }, body)
		if k := gjson.GetBytes(body, "prompt_cache_key"); gjson.ValidBytes(body) && k.Type == gjson.String && validID([]byte(k.Str)) {
			if id.ID != k.Str || id.Source != "body:prompt_cache_key" {
				t.Fatalf("prompt_cache_key %q, identified %+v", k.Str, id)
			}
		}
	})
}

// checkFuzzSummary applies a summary of the compaction the pipeline
// proposes for body (with concise output, alternately placed), and the
// history limit: the output is valid JSON, counted exactly, and valid for a
// strict server whenever the input is.
func checkFuzzSummary(t *testing.T, p *Pipeline, body []byte, res Result) {
	c, ok := res.Compaction(2, 0)
	if !ok {
		return
	}
	valid := chatcheck.ValidateChat(body) == nil
	b := history.Branch{Summary: "fuzz </conversation_summary> summary", Covered: c.Covered, Hash: c.Hash}
	for _, opts := range []Options{
		{Branches: []history.Branch{b}, ConciseOutput: true},
		{Branches: []history.Branch{b}, Placement: PlacementUser},
		{MaxHistoryMessages: 1},
	} {
		out := p.RewriteWith(body, opts)
		if opts.Branches != nil && out.Applied != 0 {
			t.Fatalf("proposed branch not applied: %+v", c)
		}
		if !json.Valid(out.Body) {
			t.Fatalf("invalid output with %+v:\n%s", opts, out.Body)
		}
		if n, err := p.Counter().CountRequest(chatFormat, out.Body); err != nil || n != out.TokensAfter {
			t.Fatalf("TokensAfter %d, counted %d (%v)", out.TokensAfter, n, err)
		}
		if err := chatcheck.ValidateChat(out.Body); valid && err != nil {
			t.Fatalf("valid input, invalid output with %+v: %v\n%s", opts, err, out.Body)
		}
	}
}
