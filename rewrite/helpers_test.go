package rewrite

import (
	"crypto/sha256"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ctxpress/ctxpress/internal/chatcheck"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/wire"

	"github.com/tidwall/gjson"
)

// ToolCall is the call a stand-in squash function is given (the
// squash.Call the pipeline passes, in the tests' older names).
type ToolCall struct{ Name, Arguments string }

// squashWith makes a Squasher of a stand-in squash function: Squashed when
// the text changed, no shape.
func squashWith(f func(call ToolCall, content string) string) Squasher { return squashFunc(f) }

type squashFunc func(call ToolCall, content string) string

func (f squashFunc) ApplyCall(c squash.Call, content string) squash.Result {
	out := f(ToolCall{Name: c.Tool, Arguments: c.Args}, content)
	return squash.Result{Text: out, Squashed: out != content}
}

// truncSquash is a deterministic STAND-IN for squash.Apply, used only to
// test rewrite's plumbing (which texts reach the squasher, how results are
// spliced back, cached and counted). It is not a compressor: outputs over
// 1000 bytes keep their first 300 and last 200 bytes (cut on rune
// boundaries) around a marker.
func truncSquash(_ ToolCall, content string) string {
	if len(content) <= 1000 {
		return content
	}
	head, tail := 300, len(content)-200
	for head > 0 && !utf8.RuneStart(content[head]) {
		head--
	}
	for tail < len(content) && !utf8.RuneStart(content[tail]) {
		tail++
	}
	return content[:head] + "\n...[stand-in squash: truncated]...\n" + content[tail:]
}

// chat builds a request body from a model and raw JSON messages.
func chat(model string, msgs ...string) []byte {
	return []byte(`{"model":"` + model + `","messages":[` + strings.Join(msgs, ",") + `]}`)
}

// rawMessages returns the raw text of each message of body.
func rawMessages(tb testing.TB, body []byte) []string {
	tb.Helper()
	var out []string
	gjson.GetBytes(body, "messages").ForEach(func(_, v gjson.Result) bool {
		out = append(out, v.Raw)
		return true
	})
	return out
}

// assertOnlyContentsChanged fails unless out equals in except inside the
// `content` values of tool results: the bytes around the messages array,
// between messages, and of every message outside its content are compared
// exactly.
func assertOnlyContentsChanged(tb testing.TB, in, out []byte) {
	tb.Helper()
	if !gjson.ValidBytes(out) {
		tb.Fatalf("output is not valid JSON")
	}
	ri, ok1 := parseRequest(in)
	ro, ok2 := parseRequest(out)
	if !ok1 || !ok2 {
		tb.Fatalf("parse: in %v out %v", ok1, ok2)
	}
	if len(ri.messages) != len(ro.messages) {
		tb.Fatalf("messages: %d in, %d out", len(ri.messages), len(ro.messages))
	}
	if len(ri.messages) == 0 {
		if string(in) != string(out) {
			tb.Fatalf("body without messages changed")
		}
		return
	}
	// Everything before the first message and after the last one: the
	// other top-level fields, in their order and spelling.
	if string(in[:ri.messages[0].start]) != string(out[:ro.messages[0].start]) {
		tb.Fatalf("bytes before the first message differ")
	}
	if string(in[ri.messages[len(ri.messages)-1].end:]) != string(out[ro.messages[len(ro.messages)-1].end:]) {
		tb.Fatalf("bytes after the last message differ")
	}
	for i := range ri.messages {
		mi, mo := &ri.messages[i], &ro.messages[i]
		if i > 0 && string(in[ri.messages[i-1].end:mi.start]) != string(out[ro.messages[i-1].end:mo.start]) {
			tb.Fatalf("bytes between messages %d and %d differ", i-1, i)
		}
		if !mi.content.exists() || !mo.content.exists() {
			if string(mi.bytes()) != string(mo.bytes()) {
				tb.Fatalf("message %d changed without content:\n in %.200s\nout %.200s", i, mi.bytes(), mo.bytes())
			}
			continue
		}
		if string(in[mi.start:mi.content.start]) != string(out[mo.start:mo.content.start]) ||
			string(in[mi.content.end:mi.end]) != string(out[mo.content.end:mo.end]) {
			tb.Fatalf("message %d changed outside its content:\n in %.300s\nout %.300s", i, mi.bytes(), mo.bytes())
		}
		if string(in[mi.content.start:mi.content.end]) != string(out[mo.content.start:mo.content.end]) && !mi.isResult() {
			tb.Fatalf("message %d (role %q) is not a tool result but its content changed", i, mi.role)
		}
	}
}

// newTestPipeline returns a pipeline with the stand-in squasher and dedup
// on with its defaults.
func newTestPipeline() *Pipeline {
	return New(Config{Format: chatFormat, Squasher: squashWith(truncSquash), Dedup: DefaultDedupConfig()})
}

// prefixBody returns body with its messages cut to the first k: the same
// bytes up to the end of message k-1, then the original bytes from the
// closing bracket of the array on, as a client replaying turn k would send.
func prefixBody(tb testing.TB, body []byte, k int) []byte {
	tb.Helper()
	arr := gjson.GetBytes(body, "messages")
	req, ok := parseRequest(body)
	if !ok || !arr.IsArray() {
		tb.Fatal("not a chat body")
	}
	if k > len(req.messages) {
		k = len(req.messages)
	}
	end := arr.Index + 1 // just after '['
	if k > 0 {
		end = req.messages[k-1].end
	}
	closing := arr.Index + len(arr.Raw) - 1 // the ']'
	out := append([]byte(nil), body[:end]...)
	return append(out, body[closing:]...)
}

// turn is one request of a replayed conversation and what was forwarded.
type turn struct {
	k   int    // the client sent msgs[:k]
	in  []byte // the body it sent
	res Result
}

// replay sends msgs[:k] for each k of turns, with opts and the previous
// forwarded turn's Dedups as PrevDedups (as the proxy keeps them), and
// checks every forwarded body (checkForwarded).
func replay(tb testing.TB, p *Pipeline, msgs []string, turns []int, opts Options) []turn {
	tb.Helper()
	var out []turn
	for _, k := range turns {
		if len(out) > 0 {
			opts.PrevDedups = out[len(out)-1].res.Dedups
		}
		in := chat("gpt-4o", msgs[:k]...)
		res := p.RewriteWith(in, opts)
		checkForwarded(tb, p, "turn "+itoa(k), in, res)
		out = append(out, turn{k: k, in: in, res: res})
	}
	return out
}

// checkForwarded checks what an upstream gets: a valid chat request for a
// strict server, whose roles alternate where the client's did, counted as
// forwarded.
func checkForwarded(tb testing.TB, p *Pipeline, where string, in []byte, res Result) {
	tb.Helper()
	if err := chatcheck.ValidateChat(res.Body); err != nil {
		tb.Fatalf("%s: invalid forwarded body: %v\n%s", where, err, res.Body)
	}
	if chatcheck.ValidateAlternation(in) == nil {
		if err := chatcheck.ValidateAlternation(res.Body); err != nil {
			tb.Errorf("%s: the client's roles alternate, the forwarded ones do not: %v", where, err)
		}
	}
	if n, err := p.Counter().CountRequest(chatFormat, res.Body); err != nil || n != res.TokensAfter {
		tb.Fatalf("%s: TokensAfter %d, the forwarded body counts %d (%v)", where, res.TokensAfter, n, err)
	}
}

// extends reports whether cur starts with prev up to the end of prev's last
// message: the upstream's cached prefix of prev is still a prefix.
func extends(prev, cur []byte) bool {
	req, ok := parseRequest(prev)
	if !ok {
		return false
	}
	end := req.array.start + 1
	if n := len(req.messages); n > 0 {
		end = req.messages[n-1].end
	}
	return len(cur) >= end && string(cur[:end]) == string(prev[:end])
}

// breaks returns the turns (indexes into ts) whose forwarded body does not
// extend the previous turn's.
func breaks(ts []turn) []int {
	var out []int
	for i := 1; i < len(ts); i++ {
		if !extends(ts[i-1].res.Body, ts[i].res.Body) {
			out = append(out, i)
		}
	}
	return out
}

// everyTurn returns the k in [from, len(msgs)] a client sends: msgs[:k]
// ends after a user message or after the last result of a call.
func everyTurn(msgs []string, from int) []int {
	var ks []int
	for k := max(from, 1); k <= len(msgs); k++ {
		last := gjson.Parse(msgs[k-1])
		if last.Get("tool_calls").Exists() {
			continue
		}
		if k < len(msgs) && gjson.Get(msgs[k], "role").Str == "tool" {
			continue
		}
		ks = append(ks, k)
	}
	return ks
}

// chainHashOf returns the chain hash of msgs, the client's messages after the
// leading system messages, as sent: h_0 is zero and
// h_i = sha256(h_(i-1) || sha256(canonical(msgs[i-1]))), where canonical is
// the message's JSON compacted with its object keys sorted, so a client
// that re-serialises the same messages matches. Each element must be valid
// JSON. The pipeline computes the same value with per-message caching; this is
// the reference the tests hold it to.
func chainHashOf(msgs [][]byte) [sha256.Size]byte {
	var h [sha256.Size]byte
	for _, m := range msgs {
		h = chainStep(h, sha256.Sum256(wire.AppendCanonicalSkip(nil, gjson.ParseBytes(m), "cache_control")))
	}
	return h
}
