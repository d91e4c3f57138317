package rewrite_test

import (
	"fmt"
	"strings"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/wire/chat"
)

func ExamplePipeline_Rewrite() {
	p := rewrite.New(rewrite.Config{
		Format: chat.Format{}, // the proxy picks the adapter by path
		// The proxy sets Squash (a squash.Config); here, a toy squasher.
		Squasher: toySquasher{},
		Dedup:    rewrite.DefaultDedupConfig(),
	})
	body := []byte(`{"model":"gpt-4o","messages":[` +
		`{"role":"user","content":"build it"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"make\"}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"` + strings.Repeat("cc -c file.c\\n", 40) + `"}` +
		`],"tools":[{"type":"function","function":{"name":"bash"}}],"x_vendor":{"keep":"me"}}`)
	res := p.Rewrite(body)
	fmt.Println(res.Understood, res.Changed, res.Squashed, res.TokensBefore > res.TokensAfter)
	fmt.Println(string(res.Body))
	// Output:
	// true true 1 true
	// {"model":"gpt-4o","messages":[{"role":"user","content":"build it"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"make\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"cc -c file.c\ncc -c f [...]"}],"tools":[{"type":"function","function":{"name":"bash"}}],"x_vendor":{"keep":"me"}}
}

// toySquasher keeps the first 20 bytes of a long bash output.
type toySquasher struct{}

func (toySquasher) ApplyCall(call squash.Call, content string) squash.Result {
	if call.Tool == "bash" && len(content) > 100 {
		return squash.Result{Text: content[:20] + " [...]", Squashed: true}
	}
	return squash.Result{Text: content}
}

func ExampleIdentify() {
	header := func(name string) []byte {
		if strings.EqualFold(name, "X-Session-ID") {
			return []byte("ses_42")
		}
		return nil
	}
	id := rewrite.Identify(rewrite.IdentifyConfig{}, chat.Format{}, header, []byte(`{"messages":[]}`))
	fmt.Println(id.ID, id.Source)
	// Output: ses_42 header:X-Session-ID
}

func ExampleCounter_CountText() {
	c := rewrite.NewCounter(0)
	fmt.Println(c.CountText("gpt-4o", "hello world"), c.CountText("gpt-4", "hello world"))
	// Output: 2 2
}

func ExampleResult_Compaction() {
	p := rewrite.New(rewrite.Config{Format: chat.Format{}})
	body := []byte(`{"model":"gpt-4o","messages":[` +
		`{"role":"system","content":"You are a coding agent."},` +
		`{"role":"user","content":"Rename foo to bar."},` +
		`{"role":"assistant","content":"Done: 3 files changed."},` +
		`{"role":"user","content":"Now run the tests."},` +
		`{"role":"assistant","content":"All 12 pass."}]}`)

	// The proxy decides to compact: what would be summarised?
	c, ok := p.RewriteWith(body, rewrite.Options{}).Compaction(2, 0)
	fmt.Println(ok, c.From, c.Cut, c.Covered, c.LatestUserAsk)

	// It stores the summary as a branch; the next turn applies it.
	branch := history.Branch{Summary: "The user had foo renamed to bar.", Covered: c.Covered, Hash: c.Hash}
	next := append(body[:len(body)-2:len(body)-2], `,{"role":"user","content":"Thanks."}]}`...)
	res := p.RewriteWith(next, rewrite.Options{Branches: []history.Branch{branch}})
	fmt.Println(res.Applied, res.Covered, res.Messages, strings.Count(string(res.Body), `"role"`))
	// Output:
	// true 1 3 2 Now run the tests.
	// 0 2 6 4
}
