package proxy

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/internal/messagestest"
	"github.com/ctxpress/ctxpress/state"
)

// messagesRecord waits for n turns of the Claude Code session to be
// recorded under the agent's x-api-key, and returns the record.
func messagesRecord(t *testing.T, p *testProxy, st state.Store, session string, n int) state.Record {
	t.Helper()
	var rec state.Record
	key := state.NewKey([]byte("x-api-key\x00"+testAnthropicKey), session)
	waitFor(t, func() bool {
		var ok bool
		rec, ok, _ = st.Get(key)
		return ok && len(rec.Turns) >= n && p.recorderDrained()
	}, strconv.Itoa(n)+" turns of "+session+" recorded")
	return rec
}

// Claude Code through ctxpress on the Messages API, streamed and not,
// against an upstream that verifies every thinking signature: its build
// log is squashed, a file it read twice is sent once, every request is one
// Anthropic accepts with every thinking block as it was issued, the headers say what ctxpress did, and
// each turn is recorded under its session with the usage the upstream
// reported: input, cache read and cache write.
func TestClaudeCodeTurnsAreSquashedDedupedAndRecorded(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			up := newMessagesUpstream(t)
			up.calls = [][2]string{{"Bash", `{"command":"make"}`}, {"Read", `{"file_path":"/repo/dateparse/parse.go"}`},
				{"Bash", `{"command":"go vet ./..."}`}, {"Read", `{"file_path":"/repo/dateparse/parse.go"}`}}
			deps, st := responsesDeps(t)
			p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
			session := "cc-" + strconv.FormatBool(stream)
			a := newMessagesAgent(t, p.URL, session)
			source, log := goSource(), bigBuildLog()
			a.output = func(n int) string {
				switch n {
				case 1:
					return log
				case 2, 4:
					return source
				}
				return toolOutput(n)
			}
			var answers []messagesAnswer
			for range 6 {
				answers = append(answers, a.turn(stream))
			}
			turns, _ := up.turns()
			if len(turns) != 6 {
				t.Fatalf("%d requests upstream", len(turns))
			}
			last := turns[5].body
			if !strings.Contains(string(last), "isLeap") || strings.Contains(string(last), strings.Split(log, "\n")[100]) {
				t.Errorf("the build log went unsquashed (or lost its error line)")
			}
			if strings.Count(string(last), "func daysIn7(") != 1 {
				t.Errorf("the file read twice was sent %d times", strings.Count(string(last), "func daysIn7("))
			}
			if v := up.ledger.Verified(); v < 5*4/2 {
				t.Errorf("%d thinking blocks verified upstream", v)
			}
			before, _ := strconv.Atoi(a.resp.Get(HeaderTokensBefore))
			after, _ := strconv.Atoi(a.resp.Get(HeaderTokensAfter))
			if after <= 0 || after >= before || a.resp.Get(HeaderConversation) != session || a.resp.Get(HeaderCompacted) != "false" {
				t.Errorf("headers: tokens %d -> %d, conversation %q, compacted %q", before, after, a.resp.Get(HeaderConversation), a.resp.Get(HeaderCompacted))
			}
			rec := messagesRecord(t, p, st, session, 6)
			for i, r := range rec.Turns {
				g := turns[i]
				if r.InputTokens != g.prompt() || r.CachedTokens != g.cacheRead || r.CacheWriteTokens != g.cacheWrite {
					t.Errorf("turn %d recorded input %d, cached %d, cache write %d; the upstream reported %d (%d + %d read + %d written)",
						i+1, r.InputTokens, r.CachedTokens, r.CacheWriteTokens, g.prompt(), g.input, g.cacheRead, g.cacheWrite)
				}
				if a := answers[i]; a.input != g.input || a.cacheRead != g.cacheRead || a.cacheWrite != g.cacheWrite {
					t.Errorf("turn %d: the client read usage %d/%d/%d", i+1, a.input, a.cacheRead, a.cacheWrite)
				}
			}
			if rec.Turns[5].CachedTokens == 0 {
				t.Error("no cache read recorded on the last turn")
			}
			fams := scrape(t, p.URL)
			if value(fams, "ctxpress_requests_total", "path", "/v1/messages", "status", "200") != 6 ||
				value(fams, "ctxpress_upstream_tokens_total", "kind", "cache_read") == 0 || value(fams, "ctxpress_squashed_outputs_total", "shape", "generic") == 0 {
				t.Errorf("metrics: %v requests, %v cache read, %v squashed logs", value(fams, "ctxpress_requests_total", "path", "/v1/messages", "status", "200"),
					value(fams, "ctxpress_upstream_tokens_total", "kind", "cache_read"), value(fams, "ctxpress_squashed_outputs_total", "shape", "generic"))
			}
			t.Logf("%d thinking blocks verified; deduped %s times; last turn %d -> %d tokens", up.ledger.Verified(),
				strconv.Itoa(int(value(fams, "ctxpress_dedup_hits_total"))), before, after)
		})
	}
}

// replayPrefix is the request Claude Code sent before the capture's
// message n (a user message): messages[:n], the newest block carrying the
// marker, the system message a block list only on the first turn.
func replayPrefix(t *testing.T, capture []byte, n int) []byte {
	t.Helper()
	msgs := gjson.GetBytes(capture, "messages").Array()[:n]
	var raws []string
	for i, m := range msgs {
		raw := m.Raw
		if i == n-1 {
			blocks := m.Get("content").Array()
			if len(blocks) == 0 {
				t.Fatalf("message %d has a string content", i)
			}
			lastBlock := blocks[len(blocks)-1].Raw
			if !strings.Contains(lastBlock, "cache_control") {
				raw = strings.Replace(raw, lastBlock, lastBlock[:len(lastBlock)-1]+`,"cache_control":{"type":"ephemeral"}}`, 1)
			}
		} else if m.Get("role").Str != "system" {
			raw = withoutMarker(raw)
		}
		raws = append(raws, raw)
	}
	all := gjson.GetBytes(capture, "messages")
	return []byte(string(capture[:all.Index]) + "[" + strings.Join(raws, ",") + "]" + string(capture[all.Index+len(all.Raw):]))
}

// Real Claude Code requests through ctxpress, replayed turn by turn (the
// sixth request's history cut before each of its user messages): each
// reaches a strict upstream as one Anthropic accepts, with every thinking
// block, marker count and tool pairing as the client sent them, under
// the session id Claude Code sends, counted and recorded. The counts are
// docs/clients.md's Claude Code figures.
func TestClaudeCodeCapturesThroughCtxpress(t *testing.T) {
	up := newMessagesUpstream(t)
	up.ledger = nil // the thinking blocks are another server's
	up.key = "sk-ant-local"
	deps, st := responsesDeps(t)
	p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
	var header = map[string]string{}
	for _, h := range claudeCodeHeaders(t) {
		header[h[0]] = h[1]
	}
	session := header["X-Claude-Code-Session-Id"]
	turn6 := claudeCodeCapture(t, "claude-code-2.1.332-turn6.json")
	type replay struct {
		name string
		body []byte
	}
	replays := []replay{{"turn1", claudeCodeCapture(t, "claude-code-2.1.332-turn1.json")}}
	for n := 4; n <= len(gjson.GetBytes(turn6, "messages").Array()); n += 2 {
		replays = append(replays, replay{"turn6 cut at " + strconv.Itoa(n), replayPrefix(t, turn6, n)})
	}
	for i, r := range replays {
		status, answer, h := send(t, http.MethodPost, p.URL+"/v1/messages?beta=true", string(r.body), header)
		if status != http.StatusOK {
			t.Fatalf("%s: %d %s", r.name, status, answer)
		}
		turns, _ := up.turns()
		fwd := turns[len(turns)-1].body
		if _, err := messagestest.Check(fwd, messagestest.Options{Header: turns[len(turns)-1].header}); err != nil {
			t.Fatalf("%s: forwarded a body Anthropic refuses: %s", r.name, err.Message)
		}
		for _, th := range thinkingBlocks(r.body) {
			if !strings.Contains(string(fwd), th) {
				t.Errorf("%s: thinking block %.80s changed or dropped", r.name, th)
			}
		}
		if h.Get(HeaderConversation) != session {
			t.Errorf("%s: conversation %q, want the session %q", r.name, h.Get(HeaderConversation), session)
		}
		t.Logf("%s: %d messages, tokens %s -> %s, %d -> %d bytes; upstream counted %d (%d read, %d written)", r.name,
			len(gjson.GetBytes(r.body, "messages").Array()), h.Get(HeaderTokensBefore), h.Get(HeaderTokensAfter), len(r.body), len(fwd),
			turns[len(turns)-1].prompt(), turns[len(turns)-1].cacheRead, turns[len(turns)-1].cacheWrite)
		waitFor(t, func() bool {
			rec, ok, _ := st.Get(state.NewKey([]byte("x-api-key\x00sk-ant-local"), session))
			return ok && len(rec.Turns) == i+1 && p.recorderDrained()
		}, "the turn recorded")
	}
	// Without the header, the session id in metadata.user_id names it.
	delete(header, "X-Claude-Code-Session-Id")
	body := claudeCodeCapture(t, "claude-code-2.1.332-persisted-output.json")
	status, answer, h := send(t, http.MethodPost, p.URL+"/v1/messages?beta=true", string(body), header)
	if want := "38ec0ce0-2d48-4c3b-ab37-e8a87c3b67b7"; status != http.StatusOK || h.Get(HeaderConversation) != want {
		t.Fatalf("persisted output: %d %s; conversation %q, want %q", status, answer, h.Get(HeaderConversation), want)
	}
}

// thinkingBlocks are the raw thinking and redacted_thinking blocks of body.
func thinkingBlocks(body []byte) []string {
	var out []string
	for _, m := range gjson.GetBytes(body, "messages").Array() {
		for _, b := range m.Get("content").Array() {
			if typ := b.Get("type").Str; typ == "thinking" || typ == "redacted_thinking" {
				out = append(out, b.Raw)
			}
		}
	}
	return out
}

// A Messages stream that ends without message_stop (cut short) reaches the
// client as the upstream ended it, and is no turn: nothing is recorded and
// the access log says why.
func TestMessagesStreamWithoutMessageStopIsNotRecorded(t *testing.T) {
	up := newMessagesUpstream(t)
	up.cut = true
	deps, st := responsesDeps(t)
	p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
	a := newMessagesAgent(t, p.URL, "cut")
	r := a.send(true)
	if r.status != http.StatusOK || r.stopped || r.stop != "tool_use" {
		t.Fatalf("the client got %d, stopped %v: %.300s", r.status, r.stopped, r.raw)
	}
	waitFor(t, func() bool { return strings.Contains(p.logs.String(), `"message":"request"`) }, "the access log line")
	if logs := p.logs.String(); !strings.Contains(logs, "without message_stop") || !strings.Contains(logs, `"level":"warn"`) {
		t.Errorf("the log does not say the stream was cut: %s", lastLines(logs, 2))
	}
	waitFor(t, p.recorderDrained, "the recorder to drain")
	if _, ok, _ := st.Get(state.NewKey([]byte("x-api-key\x00"+testAnthropicKey), "cut")); ok {
		t.Error("the cut stream was recorded as a turn")
	}
}
