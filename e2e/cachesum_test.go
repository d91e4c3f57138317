//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

// tap is a reverse proxy between ctxpress and llama-server that keeps
// every request and answer, so a test reads the usage of the summary
// calls (which ctxpress does not hand to the client).
type tap struct {
	*httptest.Server
	mu    sync.Mutex
	calls []tapped // guarded by mu
}

type tapped struct{ path, req, resp string }

func newTap(t *testing.T, upstream string) *tap {
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	tp := &tap{}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	rp.ModifyResponse = func(r *http.Response) error {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		req, _ := r.Request.GetBody()
		sent, _ := io.ReadAll(req)
		tp.mu.Lock()
		tp.calls = append(tp.calls, tapped{path: r.Request.URL.Path, req: string(sent), resp: string(body)})
		tp.mu.Unlock()
		return nil
	}
	tp.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(tp.Close)
	return tp
}

// summaries are the summary calls the server answered, each with the
// conversation turn answered before it.
func (tp *tap) summaries(input string) (out, before []tapped) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var turn tapped
	for _, c := range tp.calls {
		items := gjson.Get(c.req, input).Array()
		if len(items) == 0 {
			continue
		}
		last := items[len(items)-1].Get("content")
		text := last.Str
		if last.IsArray() {
			parts := last.Array()
			text = parts[len(parts)-1].Get("text").Str
		}
		switch {
		case !gjson.Get(c.resp, "usage").Exists():
		case compactor.IsSummaryPrompt(text):
			out, before = append(out, c), append(before, turn)
		default:
			turn = c
		}
	}
	return out, before
}

// answered reports whether the tap saw a summary call answered.
func (tp *tap) answered(input string) bool {
	s, _ := tp.summaries(input)
	return len(s) > 0
}

// cacheFormat is one wire format as the test drives it.
type cacheFormat struct {
	name, api string // api: compaction.summarizer.api for a summariser at another URL
	input     string // the member holding the conversation
	// run plays the scripted conversation through ctxpress at base for
	// turns turns, or until a summary call was answered.
	run func(t *testing.T, base string, tp *tap) int
	// usage is a summary answer's prompt and cached tokens.
	usage func(resp string) (prompt, cached int)
}

var cacheFormats = []cacheFormat{
	{name: "chat", api: "chat", input: "messages",
		run: func(t *testing.T, base string, tp *tap) int {
			c := newConvo()
			tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash", "description": "Run a shell command.",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}}}}
			for turn := 1; turn <= 30; turn++ {
				a := post(t, base+"/v1", c.body(false, map[string]any{"tools": tools}), map[string]string{"X-Session-ID": "cache-chat"})
				if a.status != 200 {
					t.Fatalf("turn %d: %d %s", turn, a.status, a.body)
				}
				c.advance(a.reply)
				if tp.answered("messages") {
					return turn
				}
			}
			return 0
		},
		usage: func(r string) (int, int) {
			return int(gjson.Get(r, "usage.prompt_tokens").Int()), int(gjson.Get(r, "usage.prompt_tokens_details.cached_tokens").Int())
		}},
	{name: "messages", api: "messages", input: "messages",
		run: func(t *testing.T, base string, tp *tap) int {
			c := newMessagesConvo()
			for turn := 1; turn <= 30; turn++ {
				a := postMessages(t, base, c.body(false), "cache-messages")
				if a.status != 200 {
					t.Fatalf("turn %d: %d %s", turn, a.status, a.body)
				}
				c.advance(a.text)
				if tp.answered("messages") {
					return turn
				}
			}
			return 0
		},
		usage: func(r string) (int, int) {
			read := int(gjson.Get(r, "usage.cache_read_input_tokens").Int())
			return int(gjson.Get(r, "usage.input_tokens").Int()) + read, read
		}},
	{name: "responses", api: "responses", input: "input",
		run: func(t *testing.T, base string, tp *tap) int {
			client := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("sk-e2e"), option.WithMaxRetries(0))
			c := newResponsesConvo("cache-responses")
			for turn := 1; turn <= 30; turn++ {
				r, err := client.Responses.New(context.Background(), c.params(), option.WithHeader("X-Session-ID", "cache-responses"))
				if err != nil {
					t.Fatalf("turn %d: %s", turn, describe(err))
				}
				c.advance(r.OutputText())
				if tp.answered("input") {
					return turn
				}
			}
			return 0
		},
		usage: func(r string) (int, int) {
			return int(gjson.Get(r, "usage.input_tokens").Int()), int(gjson.Get(r, "usage.input_tokens_details.cached_tokens").Int())
		}},
}

// The acceptance: in front of the real llama-server, a summary
// call through the cache-reusing path reports most of its prompt as
// cached: the whole conversation as the turn before it sent it, all but
// the instruction. The same scripted conversation runs twice per format,
// each time on a fresh server: with the summariser at another URL of the
// same server (a transcript, as before), and as the conversation's own
// (the history continued); its first summary call's prompt and cached
// tokens are the server's own. (This model's 512-token vocabulary counts
// the instruction at about 1.5 characters a token, some 600 tokens of a
// 2048 window; a real model's tokenizer counts it at a quarter of that.)
func TestSummaryCallReusesTheServersCache(t *testing.T) {
	const cfg = "models: {" + modelName + ": {context_window: 2048}}\n" +
		"compaction: {threshold_tokens: 1400, precompact_ratio: 0.6, keep_recent: 4, summarizer: {max_tokens: 64%s}}\n"
	for _, f := range cacheFormats {
		t.Run(f.name, func(t *testing.T) {
			type measure struct{ turn, prompt, cached, sent int }
			var got [2]measure
			for i, summarizer := range []string{"transcript", "history"} {
				srv := startLlama(t)
				tp := newTap(t, srv.URL())
				extra := ""
				if summarizer == "transcript" { // the same server, named otherwise: not the conversation's own
					extra = ", api: " + f.api + ", base_url: " + strings.Replace(tp.URL, "127.0.0.1", "localhost", 1) + "/v1"
				}
				cp := startCtxpress(t, tp.URL+"/v1", filepath.Join(t.TempDir(), "ctxpress.db"), fmt.Sprintf(cfg, extra))
				turn := f.run(t, cp.URL, tp)
				if turn == 0 {
					t.Fatalf("%s: no summary call in 30 turns", summarizer)
				}
				calls, before := tp.summaries(f.input)
				s := calls[0]
				if continued := len(gjson.Get(s.req, f.input).Array()) > 1; continued != (summarizer == "history") {
					t.Fatalf("%s: the summary call continues the conversation: %v", summarizer, continued)
				}
				prompt, cached := f.usage(s.resp)
				sent, _ := f.usage(before[0].resp)
				got[i] = measure{turn, prompt, cached, sent}
				t.Logf("%s form, after turn %d (its prompt: %d tokens): the summary call's prompt %d tokens, %d cached, %d evaluated",
					summarizer, turn, sent, prompt, cached, prompt-cached)
			}
			before, after := got[0], got[1]
			if after.cached*2 <= after.prompt || after.cached*100 < after.sent*98 {
				t.Errorf("continuing the history, %d of the summary call's %d prompt tokens were cached (the turn before sent %d): want most, and all the turn sent",
					after.cached, after.prompt, after.sent)
			}
			if after.prompt-after.cached >= before.prompt-before.cached {
				t.Errorf("the server evaluated %d tokens for the history form's summary, %d for the transcript's", after.prompt-after.cached, before.prompt-before.cached)
			}
		})
	}
}
