package proxy

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/internal/responsestest"
	"github.com/ctxpress/ctxpress/internal/upstreamerr"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// goSource is ~6 KB of a file's content, which an agent reads more than
// once.
func goSource() string {
	var b strings.Builder
	b.WriteString("package dateparse\n\n")
	for i := 0; b.Len() < 6000; i++ {
		fmt.Fprintf(&b, "// daysIn%d returns the days of month %d.\nfunc daysIn%d(year int) int {\n\tif year%%4 == 0 {\n\t\treturn %d\n\t}\n\treturn %d\n}\n\n", i, i%12+1, i, 29+i%3, 28+i%3)
	}
	return b.String()
}

// codex through ctxpress on the Responses API, streamed and not: its build
// log is squashed, a file it read twice is sent once, every request is
// one OpenAI accepts, the headers say what ctxpress did, and each turn is
// recorded with the input tokens the upstream reported.
func TestResponsesTurnsAreSquashedDedupedAndRecorded(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			up := newResponsesUpstream(t)
			// The re-read follows the first: deduping it rebuilds no
			// cached history (TestDedupOfAnOldReadWaitsWhileTheUpstreamCaches).
			up.cmds = []string{"make", "go vet ./...", "cat dateparse/parse.go", "cat dateparse/parse.go"}
			deps, st := responsesDeps(t)
			p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
			key := "codex-thread-" + strconv.FormatBool(stream)
			a := newResponsesAgent(t, p.BaseURL(), key)
			source, log := goSource(), bigBuildLog()
			a.output = func(n int) string {
				switch n {
				case 1:
					return log
				case 3, 4:
					return source
				}
				return toolOutput(n)
			}
			for range 5 {
				a.turn(stream)
			}
			turns, _ := up.turns()
			if len(turns) != 5 {
				t.Fatalf("%d requests upstream", len(turns))
			}
			items := inputItems(turns[4].body)
			if containsItem(items, "isLeap") == false || containsItem(items, strings.Split(log, "\n")[100]) {
				t.Errorf("the build log went unsquashed (or lost its error line)")
			}
			if !containsItem(items, rewrite.DedupPlaceholder) || strings.Count(string(turns[4].body), "func daysIn7(") != 1 {
				t.Errorf("the file read twice was sent %d times", strings.Count(string(turns[4].body), "func daysIn7("))
			}
			before, _ := strconv.Atoi(a.header.Get(HeaderTokensBefore))
			after, _ := strconv.Atoi(a.header.Get(HeaderTokensAfter))
			if after <= 0 || after >= before || a.header.Get(HeaderConversation) != key || a.header.Get(HeaderCompacted) != "false" {
				t.Errorf("headers: tokens %d -> %d, conversation %q, compacted %q", before, after, a.header.Get(HeaderConversation), a.header.Get(HeaderCompacted))
			}
			recorded := turnsOf(t, p, st, key, 5)
			for i, r := range recorded {
				if r.InputTokens != turns[i].input || r.TokensAfter >= r.TokensBefore && i == 4 {
					t.Errorf("turn %d recorded input %d (upstream reported %d), tokens %d -> %d", i+1, r.InputTokens, turns[i].input, r.TokensBefore, r.TokensAfter)
				}
			}
		})
	}
}

// codexCapture reads a request codex 0.171 sent (internal/responsestest's
// testdata), byte for byte.
func codexCapture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "responsestest", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// codexHeaders are the headers codex 0.171 sent with the exec-loop
// capture (its .headers.txt), but for the host and length.
func codexHeaders(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "internal", "responsestest", "testdata", "codex171-exec-loop.headers.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if ok && k != "host" && k != "content-length" && k != "accept-encoding" {
			h[k] = v
		}
	}
	return h
}

// Real codex requests through ctxpress: each reaches a strict upstream as
// one it accepts, with nothing changed that must never change, under the
// thread id codex sends, counted and recorded. The counts are docs/clients.md's
// codex figures.
func TestCodexRequestsThroughCtxpress(t *testing.T) {
	up := newResponsesUpstream(t)
	up.ledger = nil // the reasoning items are another server's
	deps, st := responsesDeps(t)
	p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
	h := codexHeaders(t)
	h["authorization"] = "Bearer sk-agent"
	for i, name := range []string{"codex171-exec-loop.json", "codex171-apply-patch-second-ask.json", "codex171-own-compaction.json", "codex171-after-own-compaction.json", "codex171-parallel-calls.json"} {
		body := codexCapture(t, name)
		status, answer, header := send(t, http.MethodPost, p.BaseURL()+"/responses", string(body), h)
		if status != http.StatusOK {
			t.Fatalf("%s: %d %s", name, status, answer)
		}
		turns, _ := up.turns()
		fwd := turns[len(turns)-1].body
		if _, err := responsestest.Check(fwd, responsestest.Options{Client: body}); err != nil {
			t.Fatalf("%s: forwarded a body OpenAI refuses: %s", name, err.Message)
		}
		if header.Get(HeaderConversation) != h["session-id"] {
			t.Errorf("%s: conversation %q, want the thread id %q", name, header.Get(HeaderConversation), h["session-id"])
		}
		if name == "codex171-parallel-calls.json" && len(fwd) >= len(body) {
			t.Errorf("%s: its 10 KB build log went unsquashed", name)
		}
		t.Logf("%s: %d items, tokens %s -> %s, %d -> %d bytes; upstream counted %d", name, len(gjson.GetBytes(body, "input").Array()),
			header.Get(HeaderTokensBefore), header.Get(HeaderTokensAfter), len(body), len(fwd), turns[len(turns)-1].input)
		turnsOf(t, p, st, h["session-id"], i+1)
	}
}

// Without a thread header, codex's prompt_cache_key names the
// conversation.
func TestResponsesConversationFromPromptCacheKey(t *testing.T) {
	up := newResponsesUpstream(t)
	up.ledger = nil
	deps, _ := responsesDeps(t)
	p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
	body := codexCapture(t, "codex171-exec-loop.json")
	status, answer, header := send(t, http.MethodPost, p.URL+"/responses", string(body), map[string]string{"Authorization": "Bearer sk-agent"})
	if want := gjson.GetBytes(body, "prompt_cache_key").Str; status != http.StatusOK || header.Get(HeaderConversation) != want {
		t.Fatalf("%d %s: conversation %q, want %q", status, answer, header.Get(HeaderConversation), want)
	}
}

// A stream that ends without response.completed (cut short, or failed)
// reaches the client as the upstream ended it, and is no turn: nothing is
// recorded and the access log says why.
func TestResponsesStreamWithoutCompletedIsNotRecorded(t *testing.T) {
	for name, end := range map[string]string{"cut": "", "failed": "response.failed"} {
		t.Run(name, func(t *testing.T) {
			up := newResponsesUpstream(t)
			up.end = &end
			deps, st := responsesDeps(t)
			p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
			a := newResponsesAgent(t, p.BaseURL(), "cut-"+name)
			if _, err := a.send(true); err != errNoCompleted {
				t.Fatalf("the client got %v, want the stream as the upstream ended it", err)
			}
			waitFor(t, func() bool { return strings.Contains(p.logs.String(), `"message":"request"`) }, "the access log line")
			logs := p.logs.String()
			if !strings.Contains(logs, "without response.completed") || !strings.Contains(logs, `"level":"warn"`) {
				t.Errorf("the log does not say the stream was cut: %s", lastLines(logs, 2))
			}
			if name == "failed" && !strings.Contains(logs, "ended with response.failed") {
				t.Errorf("the log does not say how it ended: %s", lastLines(logs, 2))
			}
			waitFor(t, p.recorderDrained, "the recorder to drain")
			if _, ok, _ := st.Get(state.NewKey([]byte("Bearer sk-agent"), "cut-"+name)); ok {
				t.Error("the cut stream was recorded as a turn")
			}
		})
	}
}

// ctxpress's own faults on the Responses path answer in the OpenAI error
// shape.
func TestResponsesUpstreamDownIsAnOpenAIError(t *testing.T) {
	up := newResponsesUpstream(t)
	base := up.BaseURL()
	up.Close()
	deps, _ := responsesDeps(t)
	p := startProxyWith(t, Config{Upstream: base}, deps)
	req, _ := http.NewRequest(http.MethodPost, p.BaseURL()+"/responses", strings.NewReader(string(codexCapture(t, "codex171-exec-loop.json"))))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if e := decodeError(t, resp); e.Error.Code != upstreamerr.CodeUnreachable {
		t.Fatalf("code %q", e.Error.Code)
	}
}

// /v1/responses/compact (the client's own compaction) and
// /v1/responses/input_tokens are not conversation turns: they pass through
// byte for byte, unrecorded and never compacted, far over the trigger.
func TestResponsesSubpathsPassThrough(t *testing.T) {
	up := newResponsesUpstream(t)
	deps, st := responsesDeps(t)
	p := startProxyWith(t, compactionConfig(up.BaseURL()), deps)
	body := string(codexCapture(t, "codex171-exec-loop.json"))
	for _, path := range []string{"/responses/compact", "/responses/input_tokens"} {
		_, _, header := send(t, http.MethodPost, p.BaseURL()+path, body, map[string]string{"session-id": "sub", "Authorization": "Bearer sk-agent"})
		_, _ = up.turns()
		up.mu.Lock()
		g := up.got[len(up.got)-1]
		up.mu.Unlock()
		if g.path != "/v1"+path || string(g.body) != body || header.Get(HeaderTokensAfter) != "" {
			t.Errorf("%s: upstream got %s (%d bytes, same %v); X-Ctxpress-Tokens-After %q", path, g.path, len(g.body), string(g.body) == body, header.Get(HeaderTokensAfter))
		}
	}
	if _, ok, _ := st.Get(state.NewKey([]byte("Bearer sk-agent"), "sub")); ok {
		t.Error("a pass-through request was recorded")
	}
	if _, summaries := up.turns(); len(summaries) != 0 || len(body) < 4*testTrigger {
		t.Errorf("%d summary calls for a %d-byte body", len(summaries), len(body))
	}
}
