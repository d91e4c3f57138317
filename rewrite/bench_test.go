package rewrite

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/history"
)

// benchConversation builds an agent conversation from corpus data: a real
// SWE-agent system prompt, a user task, then bash calls answered by real
// corpus tool outputs (3-11 KB each, in corpus order), 149 messages and
// about 130k tokens, ending with an assistant call whose result the
// benchmarks add as the 150th message. It returns the body without its
// closing "]}" so that message can be appended.
func benchConversation(b *testing.B) (open []byte, lastCallID string) {
	b.Helper()
	traces := loadTraces(b)
	var system string
	for _, tr := range traces {
		if req, ok := parseRequest(tr.body); ok && len(req.messages) > 0 && req.messages[0].role == "system" && len(req.messages[0].result(req.messages[0].content).Str) > 4000 {
			system = req.messages[0].result(req.messages[0].content).Str
			break
		}
	}
	var outs []string
	for _, o := range corpusToolOutputs(b) {
		if len(o) >= 3000 && len(o) <= 11000 {
			outs = append(outs, o)
		}
	}
	if len(outs) < 74 {
		b.Skip("not enough corpus tool outputs")
	}
	js := func(s string) string { v, _ := json.Marshal(s); return string(v) }
	msgs := []string{
		`{"role":"system","content":` + js(system) + `}`,
		`{"role":"user","content":"Fix the failing test in the repository."}`,
	}
	for i := 0; len(msgs) < 149; i++ {
		id := "call_" + strconv.Itoa(i)
		args := js(fmt.Sprintf(`{"command":"cat file_%d.py"}`, i))
		msgs = append(msgs, callMsg(id, "bash", args))
		if len(msgs) < 149 {
			msgs = append(msgs, resultMsg(id, outs[i%len(outs)]))
		}
		lastCallID = id
	}
	body := chat("gpt-4o", msgs...)
	return body[:len(body)-2], lastCallID
}

func closeBody(open []byte, extra string) []byte {
	out := append([]byte(nil), open...)
	if extra != "" {
		out = append(out, ',')
		out = append(out, extra...)
	}
	return append(out, "]}"...)
}

// BenchmarkRewriteCold: a fresh Pipeline sees the conversation for the
// first time: every message is parsed, squashed and tokenised.
func BenchmarkRewriteCold(b *testing.B) {
	open, id := benchConversation(b)
	body := closeBody(open, resultMsg(id, "exit code 0\nran file: 12 tests passed, 0 failed"))
	res := New(Config{Format: chatFormat}).Rewrite(body) // load the encoder outside the timing
	b.Logf("%d messages, %d tokens, %d bytes", res.Messages, res.TokensBefore, len(body))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		New(Config{Format: chatFormat, Squasher: corpusSquash, Dedup: DefaultDedupConfig()}).Rewrite(body)
	}
}

// BenchmarkRewriteWarm: the same Pipeline sees the next turn: the same
// conversation plus one new tool result (a different one each iteration,
// so it is new to the caches every time).
func BenchmarkRewriteWarm(b *testing.B) {
	open, id := benchConversation(b)
	p := New(Config{Format: chatFormat, Squasher: corpusSquash, Dedup: DefaultDedupConfig()})
	p.Rewrite(closeBody(open, ""))
	b.SetBytes(int64(len(open)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		body := closeBody(open, resultMsg(id, "exit code 0\nran file "+strconv.Itoa(i)+": 12 tests passed, 0 failed"))
		b.StartTimer()
		if res := p.Rewrite(body); !res.Understood {
			b.Fatal("not understood")
		}
	}
}

// BenchmarkRewriteWarmSummary: BenchmarkRewriteWarm with a stored summary
// applied, covering about 100 of the 150 messages: the chain hash of the
// covered messages comes from the per-message digest cache, the block is
// added to the system prompt, the covered messages are cut out.
func BenchmarkRewriteWarmSummary(b *testing.B) {
	open, id := benchConversation(b)
	p := New(Config{Format: chatFormat, Squasher: corpusSquash, Dedup: DefaultDedupConfig()})
	c, ok := p.RewriteWith(closeBody(open, ""), Options{}).Compaction(50, 0)
	if !ok {
		b.Fatal("no compaction proposed")
	}
	summary := strings.Repeat("- a line of a checkpoint summary, as a summariser writes them\n", 60)
	opts := Options{Branches: []history.Branch{{Summary: summary, Covered: c.Covered, Hash: c.Hash}}}
	res := p.RewriteWith(closeBody(open, resultMsg(id, "warm-up")), opts)
	b.Logf("branch covers %d messages; %d -> %d tokens", c.Covered, res.TokensBefore, res.TokensAfter)
	b.SetBytes(int64(len(open)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		body := closeBody(open, resultMsg(id, "exit code 0\nran file "+strconv.Itoa(i)+": 12 tests passed, 0 failed"))
		b.StartTimer()
		if res := p.RewriteWith(body, opts); res.Applied != 0 {
			b.Fatal("summary not applied")
		}
	}
}
