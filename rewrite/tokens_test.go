package rewrite

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Reference counts, from OpenAI's tiktoken (the cookbook's "How to count
// tokens with tiktoken" examples) and checked by hand where the split is
// obvious: "hello world" = "hello" + " world"; "Hello, world!" = "Hello" +
// "," + " world" + "!"; "2 + 2 = 4" = "2"," +"," ","2"," ="," ","4" in both
// (digits and punctuation never merge across spaces).
func TestCountKnownValues(t *testing.T) {
	tests := []struct {
		text          string
		o200k, cl100k int
	}{
		{"", 0, 0},
		{"hello world", 2, 2},
		{"Hello, world!", 4, 4},
		{"tiktoken is great!", 6, 6},
		{"antidisestablishmentarianism", 6, 6},
		{"2 + 2 = 4", 7, 7},
		{"お誕生日おめでとう", 8, 9},
		// Special tokens in user text are ordinary text, never a panic.
		{"<|endoftext|>", 7, 7},
	}
	c := NewCounter(0)
	for _, tt := range tests {
		if got := c.Count(O200K, tt.text); got != tt.o200k {
			t.Errorf("o200k %q = %d, want %d", tt.text, got, tt.o200k)
		}
		if got := c.Count(CL100K, tt.text); got != tt.cl100k {
			t.Errorf("cl100k %q = %d, want %d", tt.text, got, tt.cl100k)
		}
		// Cached second time, same answer.
		if got := c.Count(CL100K, tt.text); got != tt.cl100k {
			t.Errorf("cl100k %q cached = %d", tt.text, got)
		}
	}
	if got := c.CountText("gpt-4o", ""); got != 0 {
		t.Errorf("empty = %d", got)
	}
	if got := c.CountText("unknown-model", "hello world"); got != 2 {
		t.Errorf("unknown model = %d", got)
	}
}

// The cookbook's num_tokens_from_messages example: 129 prompt tokens for
// gpt-3.5-turbo / gpt-4, 124 for gpt-4o / gpt-4o-mini, as reported by the
// API itself.
func TestCountRequestCookbook(t *testing.T) {
	msgs := []string{
		`{"role": "system","content": "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."}`,
		`{"role": "system","name": "example_user","content": "New synergies will help drive top-line growth."}`,
		`{"role": "system","name": "example_assistant","content": "Things working well together will increase revenue."}`,
		`{"role": "system","name": "example_user","content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."}`,
		`{"role": "system","name": "example_assistant","content": "Let's talk later when we're less busy about how to do better."}`,
		`{"role": "user","content": "This late pivot means we don't have time to boil the ocean for the client deliverable."}`,
	}
	c := NewCounter(0)
	for model, want := range map[string]int{"gpt-3.5-turbo-0125": 129, "gpt-4-0613": 129, "gpt-4": 129, "gpt-4o": 124, "gpt-4o-mini": 124} {
		got, err := c.CountRequest(chatFormat, chat(model, msgs...))
		if err != nil || got != want {
			t.Errorf("%s: %d, %v; want %d", model, got, err, want)
		}
	}
}

func TestCountRequestParts(t *testing.T) {
	c := NewCounter(0)
	base, _ := c.CountRequest(chatFormat, chat("gpt-4o", `{"role":"user","content":"hello world"}`))
	if base != replyPriming+tokensPerMessage+1+2 { // "user" is 1 token
		t.Errorf("base = %d", base)
	}
	parts, _ := c.CountRequest(chatFormat, chat("gpt-4o", `{"role":"user","content":[{"type":"text","text":"hello world"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}`))
	if parts != base+imagePartTokens {
		t.Errorf("parts = %d, want %d", parts, base+imagePartTokens)
	}
	tools := `[{"type":"function","function":{"name":"bash","parameters":{"type":"object","properties":{"command":{"type":"string"}}}}}]`
	withTools, _ := c.CountRequest(chatFormat, []byte(`{"model":"gpt-4o","tools":`+tools+`,"messages":[{"role":"user","content":"hello world"}]}`))
	if withTools != base+c.Count(O200K, tools) {
		t.Errorf("tools = %d, want %d", withTools, base+c.Count(O200K, tools))
	}
	call, _ := c.CountRequest(chatFormat, chat("gpt-4o", `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]}`))
	want := replyPriming + tokensPerMessage + c.Count(O200K, "assistant") + c.Count(O200K, "bash") + c.Count(O200K, `{"command":"ls"}`)
	if call != want {
		t.Errorf("tool call = %d, want %d", call, want)
	}
	if _, err := c.CountRequest(chatFormat, []byte(`{`)); err != ErrInvalidJSON {
		t.Errorf("invalid: %v", err)
	}
	if _, err := c.CountRequest(chatFormat, []byte(`{"prompt":"x"}`)); err != ErrNotChat {
		t.Errorf("not chat: %v", err)
	}
}

func TestEncodingForModel(t *testing.T) {
	for model, want := range map[string]Encoding{
		"gpt-4": CL100K, "gpt-4-0613": CL100K, "gpt-4-turbo": CL100K, "gpt-4-32k": CL100K, "openai/gpt-4": CL100K,
		"gpt-3.5-turbo": CL100K, "gpt-3.5-turbo-16k": CL100K, "gpt-35-turbo": CL100K, "GPT-4": CL100K,
		"text-embedding-3-small": CL100K, "text-embedding-ada-002": CL100K,
		"gpt-4o": O200K, "gpt-4o-mini": O200K, "gpt-4.1": O200K, "gpt-4.5-preview": O200K, "o3": O200K,
		"gpt-5": O200K, "claude-sonnet-4": O200K, "qwen3-coder": O200K, "": O200K, "unknown": O200K,
	} {
		if got := EncodingForModel(model); got != want {
			t.Errorf("%q: %s, want %s", model, got, want)
		}
	}
}

// Concurrent first use: every caller waits for the one load and gets the
// same counts (run with -race).
func TestCountConcurrent(t *testing.T) {
	c := NewCounter(1 << 20)
	text := strings.Repeat("concurrent callers share one encoder ", 20)
	want := NewCounter(-1).Count(CL100K, text)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				enc := []Encoding{O200K, CL100K}[(i+j)%2]
				n := c.Count(enc, text)
				if enc == CL100K && n != want {
					t.Errorf("count %d, want %d", n, want)
				}
			}
		}(i)
	}
	wg.Wait()
}

// Regression: a long unbroken run (a base64 blob, a minified line) is
// counted in pieces, so its count stays close to the whole-text count and
// the cost stays linear. 40 KB used to take ~0.9 s.
func TestCountLongRunIsBounded(t *testing.T) {
	c := NewCounter(-1)
	blob := strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo", 1200) // 42 KB, no spaces
	n := c.Count(O200K, blob)
	if n <= 0 {
		t.Fatalf("count %d", n)
	}
	// A piecewise count of the first 2 KB stays within 2% of the exact one.
	small := blob[:2048]
	tk := encoders[O200K].get(O200K)
	exact := tk.Count(small)
	if got := c.Count(O200K, small); got < exact || float64(got) > 1.02*float64(exact)+2 {
		t.Fatalf("piecewise count %d, exact %d", got, exact)
	}
}

// Regression: a long run of whitespace (padding, a fixed-width dump, a
// file of blank lines) is counted in pieces too: 160 KB of spaces took 16 s
// of CPU, and a few MB would have held a core for hours. Short runs count
// as they did; long ones stay within a few tokens per 256 bytes of exact.
func TestCountLongWhitespaceIsBounded(t *testing.T) {
	c := NewCounter(-1)
	tk := encoders[O200K].get(O200K)
	size := 1 << 20
	if raceEnabled {
		size = 1 << 17
	}
	for _, unit := range []string{" ", "\n", "\t", " \n", "\r\n"} {
		if n := c.Count(O200K, strings.Repeat(unit, size)+"x"); n <= 0 {
			t.Fatalf("%q x 1M: count %d", unit, n)
		}
		small := strings.Repeat(unit, 2048/len(unit)) + "x"
		exact := tk.Count(small)
		if got := c.Count(O200K, small); math.Abs(float64(got-exact)) > 2+float64(len(small))/256*2 {
			t.Fatalf("%q x %d: piecewise count %d, exact %d", unit, 2048/len(unit), got, exact)
		}
		short := "a" + strings.Repeat(unit, 200/len(unit)) + "b"
		if got, exact := c.Count(O200K, short), tk.Count(short); got != exact {
			t.Fatalf("a short run of %q: %d, exact %d", unit, got, exact)
		}
	}
}

// A big text squash replaces is never sent, so its count (the savings
// figure) is estimated from samples: on every corpus log and trace over
// 128 KB the estimate is within 5% of the exact count (worst seen: 2.7%).
func TestEstimateOnCorpus(t *testing.T) {
	dir := corpusDir(t)
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*"))
	traces, _ := filepath.Glob(filepath.Join(dir, "traces", "*"))
	files := append(logs, traces...)
	if raceEnabled {
		files = files[:len(files)/16]
	}
	c := NewCounter(-1)
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || len(b) <= sampleOver {
			continue
		}
		exact, est := c.Count(O200K, string(b)), c.Estimate(O200K, string(b))
		if off := math.Abs(float64(est-exact)) / float64(exact); off > 0.05 {
			t.Errorf("%s: estimate %d, exact %d (%.1f%% off)", filepath.Base(f), est, exact, 100*off)
		}
		checked++
	}
	if checked < 20 && !raceEnabled {
		t.Fatalf("only %d corpus files over %d bytes", checked, sampleOver)
	}
}

// A turn with a big new log (docker logs: a cat of the file would be a
// read, cut only at 64 KiB): the squashed output is counted exactly (it
// is sent), the original is estimated, and the request's tokens before
// stay within 3% of an exact count of the body.
func TestBigSquashedOutputIsEstimated(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(corpusDir(t), "logs", "OpenStack_2k.log"))
	if err != nil {
		t.Fatal(err)
	}
	body := chat("gpt-4o", `{"role":"user","content":"Why do the instances fail?"}`,
		callMsg("c1", "bash", `"{\"command\":\"docker logs nova-compute\"}"`), resultMsg("c1", string(b)))
	p := New(Config{Format: chatFormat, Squasher: corpusSquash})
	res := p.Rewrite(body)
	if res.Squashed != 1 || res.TokensAfter*10 > res.TokensBefore {
		t.Fatalf("the log was not squashed: %d squashed, %d -> %d tokens", res.Squashed, res.TokensBefore, res.TokensAfter)
	}
	exact, err := NewCounter(-1).CountRequest(chatFormat, body)
	if err != nil {
		t.Fatal(err)
	}
	if off := math.Abs(float64(res.TokensBefore-exact)) / float64(exact); off > 0.03 {
		t.Fatalf("tokens before %d, exact %d (%.1f%% off)", res.TokensBefore, exact, 100*off)
	}
	forwarded, _ := NewCounter(-1).CountRequest(chatFormat, res.Body)
	if forwarded != res.TokensAfter {
		t.Fatalf("tokens after %d, the forwarded body counts %d", res.TokensAfter, forwarded)
	}
}
