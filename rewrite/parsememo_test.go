package rewrite

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/messages"
	"github.com/ctxpress/ctxpress/wire/responses"
	"github.com/tidwall/gjson"
)

// TestRememberedParseIsTheBodysOwn runs bodies through one Pipeline's
// Parse, which continues remembered parses, and compares each with a
// fresh Parse of the same bytes: the conversation (messages, items, call
// ids, model, stream, counted spans, the state a later parse continues
// from), whether the body is valid JSON, and the rewrite of each (which
// reuses the analysis kept with the parse it continued). The bodies are what agents
// send: histories growing turn by turn past several prefix blocks, a
// retry, a rewound one, one with an earlier message edited, members after
// `messages` that change between turns (an SDK writes `messages` first),
// corrupted bytes after a shared prefix, and the corpus traces' turns.
func TestRememberedParseIsTheBodysOwn(t *testing.T) {
	sys := `{"role":"system","content":"You are a coding agent."}`
	msgs := []string{sys, `{"role":"user","content":"fix the bug"}`}
	for i := range 14 {
		id := fmt.Sprintf("c%d", i)
		out := strings.Repeat(fmt.Sprintf("line %d of the output\\n", i), 40+60*(i%3)) // 1-2.5 KB
		msgs = append(msgs, callMsg(id, "bash", jsonString(fmt.Sprintf(`{"command":"step %d"}`, i))), resultMsg(id, out))
	}
	edited := slices.Clone(msgs)
	edited[3] = resultMsg("c0", "output 0, edited")
	sdk := func(model string, ms ...string) []byte { // messages first, as openai-go writes them
		return []byte(`{"messages":[` + strings.Join(ms, ",") + `],"model":"` + model + `","stream":true,"tools":[{"type":"function","function":{"name":"bash"}}]}`)
	}
	var bodies [][]byte
	for _, n := range []int{2, 4, 6, 6, 8, 14, 22, 30, 12, 30, 30} { // growing, retries, rewound
		bodies = append(bodies, chat("gpt-4o", msgs[:n]...))
	}
	bodies = append(bodies, chat("gpt-4o", edited[:30]...), chat("gpt-4o", edited[:8]...), chat("gpt-4o", msgs[:30]...))
	for _, n := range []int{10, 12, 12, 20} { // the same messages counted in another encoding
		bodies = append(bodies, sdk("gpt-4o", msgs[:n]...), sdk("gpt-4", msgs[:n]...))
	}
	// The next turn with one byte after the shared prefix broken, each
	// kind of break once, then as sent.
	next := chat("gpt-4o", msgs[:24]...)
	for _, cut := range []func([]byte) []byte{
		func(b []byte) []byte { return b[:len(b)-1] },                            // the closing brace lost
		func(b []byte) []byte { return append(b, 'x') },                          // trailing bytes
		func(b []byte) []byte { b[len(b)-300] = '\n'; return b },                 // a raw newline in a string
		func(b []byte) []byte { return append(b[:len(b)-2:len(b)-2], ",]}"...) }, // a trailing comma
	} {
		bodies = append(bodies, cut(slices.Clone(next)))
	}
	bodies = append(bodies, next)
	for _, tr := range loadTraces(t) {
		req, _ := parseRequest(tr.body)
		n := len(req.messages)
		for _, k := range []int{n / 2, n/2 + 2, n, n} {
			bodies = append(bodies, prefixBody(t, tr.body, k))
		}
	}
	checkRememberedParses(t, chatFormat, newTestPipeline, bodies)
}

// checkRememberedParses parses bodies of format f in turn with one
// pipeline (newPipeline's) and compares each parse, and its rewrite with
// squash and dedup on, with a fresh pipeline's of the same bytes.
func checkRememberedParses(t *testing.T, f wire.Format, newPipeline func() *Pipeline, bodies [][]byte) {
	t.Helper()
	p := newPipeline()
	resumed := 0
	for i, body := range bodies {
		if from, same := p.parses.find(prefixKeys(nil, f, body), f, len(body)); from != nil && from.conv.MessagesWithin(same) > 0 {
			resumed++
		}
		got, want := p.Parse(f, body), Parse(f, body)
		if got.valid != want.valid || got.chat != want.chat {
			t.Fatalf("body %d: valid %v, understood %v; a fresh parse: %v, %v", i, got.valid, got.chat, want.valid, want.chat)
		}
		if !reflect.DeepEqual(got.conv, want.conv) {
			t.Fatalf("body %d: the remembered parse differs from a fresh one:\n%+v\nwant\n%+v", i, got.conv, want.conv)
		}
		// The rewrite, with the analysis kept with the parse continued,
		// is a fresh pipeline's.
		gotRes, wantRes := p.RewriteParsed(got, Options{}), newPipeline().RewriteParsed(want, Options{})
		gotRes.view, wantRes.view = nil, nil
		if !reflect.DeepEqual(gotRes, wantRes) {
			t.Fatalf("body %d: rewritten from remembered parses:\n%+v\nfresh:\n%+v", i, gotRes, wantRes)
		}
	}
	// Most bodies repeat an earlier one's prefix: if none was continued,
	// this test compared fresh parses with themselves.
	if resumed < len(bodies)/2 {
		t.Fatalf("%d of %d bodies continued a remembered parse", resumed, len(bodies))
	}
}

// arrayPrefix returns body with the array member named key cut to its
// first k elements: the same bytes up to the end of element k-1, then the
// original bytes from the array's closing bracket on, as a client
// replaying turn k would send.
func arrayPrefix(t *testing.T, body []byte, key string, k int) []byte {
	t.Helper()
	arr := gjson.GetBytes(body, key)
	if !arr.IsArray() {
		t.Fatalf("no %s array", key)
	}
	end := arr.Index + 1
	for i, e := range arr.Array() {
		if i == k {
			break
		}
		end = e.Index + len(e.Raw)
	}
	closing := arr.Index + len(arr.Raw) - 1
	return append(append([]byte(nil), body[:end]...), body[closing:]...)
}

// Claude Code's requests (Messages, captured byte-exact) continue
// remembered parses as chat's do: each capture's turns growing, retried
// and rewound, members after `messages` (metadata, thinking), a second
// `messages` member, and a broken byte after the shared prefix.
func TestRememberedMessagesParseIsTheBodysOwn(t *testing.T) {
	var bodies [][]byte
	for _, name := range []string{"turn1", "turn6", "persisted-output"} {
		body := messagesCapture(t, name)
		n := len(gjson.GetBytes(body, "messages").Array())
		for _, k := range []int{1, n / 2, n/2 + 1, n, n, n / 2} {
			bodies = append(bodies, arrayPrefix(t, body, "messages", k))
		}
	}
	turn6 := messagesCapture(t, "turn6")
	for _, tail := range []string{
		`,"metadata":{"user_id":"{\"session_id\":\"after\"}"}}`,
		`,"thinking":{"type":"enabled","budget_tokens":2048}}`,
		`,"messages":[{"role":"user","content":"replaced"}]}`,
		`,"messages":"not an array"}`,
		`,"stream":tru}`,
	} {
		b := bytes.TrimSpace(turn6)
		b = b[:len(b)-1] // its closing brace
		bodies = append(bodies, turn6, append(slices.Clone(b), tail...))
	}
	format := messages.Format{}
	checkRememberedParses(t, format, func() *Pipeline {
		return New(Config{Format: format, Squasher: squashWith(truncSquash), Dedup: DefaultDedupConfig()})
	}, bodies)
}

// The memo holds what its bound allows: many conversations' parses evict
// the least recently used, and every key of an evicted parse goes with it.
func TestParseMemoStaysWithinItsBound(t *testing.T) {
	p := New(Config{Format: chatFormat, CacheBytes: 1 << 20})
	for i := range 400 {
		body := chat("gpt-4o", fmt.Sprintf(`{"role":"user","content":"conversation %d %s"}`, i, strings.Repeat("x", 5000)),
			`{"role":"assistant","content":"ok"}`, `{"role":"user","content":"go on"}`)
		p.Parse(chatFormat, body)
	}
	entries, used := p.parses.stats()
	if used > p.parses.max || entries == 0 {
		t.Fatalf("%d parses, %d bytes; bound %d", entries, used, p.parses.max)
	}
	keys := 0
	for el := p.parses.order.Front(); el != nil; el = el.Next() {
		keys += len(el.Value.(*memoParse).keys)
	}
	if len(p.parses.byKey) > keys {
		t.Fatalf("%d keys find a parse, the %d remembered parses have %d", len(p.parses.byKey), entries, keys)
	}
}

// codex's requests (Responses, captured byte-exact) continue remembered
// parses too: each capture's input growing, retried and rewound, a turn
// ended by a reasoning item and continued (the reasoning item then goes
// with the item after it), members after `input`, a second `input`
// member, a plain-text input, and a broken byte after the shared prefix.
func TestRememberedResponsesParseIsTheBodysOwn(t *testing.T) {
	var bodies [][]byte
	files, err := filepath.Glob(filepath.Join("..", "internal", "responsestest", "testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatal("no captures", err)
	}
	for _, name := range files {
		body, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		n := len(gjson.GetBytes(body, "input").Array())
		for _, k := range []int{1, n / 2, n/2 + 1, n, n, n / 2} {
			bodies = append(bodies, arrayPrefix(t, body, "input", k))
		}
	}
	// Members after `input` on a capture (the bodies above end with the
	// same prefix).
	exec, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, tail := range []string{
		`,"store":false,"prompt_cache_key":"k"}`,
		`,"input":[{"role":"user","content":"replaced"}]}`,
		`,"input":"text now"}`,
		`,"previous_response_id":"resp_1"}`,
		`,"stream":tru}`,
	} {
		b := bytes.TrimSpace(exec)
		b = b[:len(b)-1] // its closing brace
		bodies = append(bodies, exec, append(slices.Clone(b), tail...))
	}
	user := `{"role":"user","content":[{"type":"input_text","text":"go on"}]}`
	reasoning := `{"type":"reasoning","summary":[],"encrypted_content":"gAAA"}`
	call := `{"type":"function_call","call_id":"c1","name":"shell","arguments":"{\"command\":[\"ls\"]}"}`
	out := `{"type":"function_call_output","call_id":"c1","output":"a.go\nb.go"}`
	resp := func(tail string, items ...string) []byte {
		return []byte(`{"model":"gpt-5","instructions":"be brief","input":[` + strings.Join(items, ",") + `]` + tail + `}`)
	}
	bodies = append(bodies,
		resp("", user, reasoning), resp("", user, reasoning, call, out), resp("", user, reasoning, call, out),
		resp(`,"store":false,"prompt_cache_key":"k"`, user, reasoning, call, out, user),
		resp(`,"input":[{"role":"user","content":"replaced"}]`, user, reasoning, call, out, user),
		resp(`,"input":"text now"`, user, reasoning, call, out, user),
		resp(`,"previous_response_id":"resp_1"`, user, reasoning, call, out, user),
		resp(`,"stream":tru`, user, reasoning, call, out, user, user))
	format := responses.Format{}
	checkRememberedParses(t, format, func() *Pipeline {
		return New(Config{Format: format, Squasher: squashWith(truncSquash), Dedup: DefaultDedupConfig()})
	}, bodies)
}

// A conversation growing turn by turn keeps one remembered parse once its
// body passes a prefix block, not one per turn: each longer body
// supersedes the one it continued. (Its first, shorter turns share no
// block with it and are kept apart until evicted: a repeat of a short
// request is found only by its whole body.)
func TestGrowingConversationKeepsOneParse(t *testing.T) {
	p := New(Config{Format: chatFormat})
	msgs := []string{`{"role":"system","content":"You are a coding agent."}`, `{"role":"user","content":"fix it"}`}
	settled := -1
	for i := range 30 {
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs, callMsg(id, "bash", jsonString(fmt.Sprintf(`{"command":"step %d"}`, i))),
			resultMsg(id, strings.Repeat(fmt.Sprintf("output line of step %d\n", i), 40)))
		body := chat("gpt-4o", msgs...)
		p.Parse(chatFormat, body)
		entries, _ := p.parses.stats()
		switch {
		case len(body) < 2*prefixBlock:
		case settled < 0:
			settled = entries
		case entries != settled:
			t.Fatalf("turn %d (%d bytes): %d parses kept, %d when the body passed two blocks", i, len(body), entries, settled)
		}
	}
	if settled < 0 {
		t.Fatal("the bodies never passed two blocks")
	}
}
