package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/internal/chatcheck"
	"github.com/ctxpress/ctxpress/internal/messagestest"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/internal/responsestest"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire/chat"
)

// followFormat is one wire format as the marker-following agent speaks it:
// the path, a request with the history so far, and a tool exchange
// appended to that history.
type followFormat struct {
	name, path string
	request    func(history []any) map[string]any
	exchange   func(id, cmd, output string) []any
	check      func(body []byte) error
}

var followFormats = []followFormat{
	{
		name: "chat", path: "/v1/chat/completions",
		request: func(h []any) map[string]any {
			return map[string]any{"model": "gpt-4o", "messages": append([]any{map[string]any{"role": "user", "content": "Why do the tests fail?"}}, h...)}
		},
		exchange: func(id, cmd, out string) []any {
			args, _ := json.Marshal(map[string]string{"command": cmd})
			return []any{
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function",
					"function": map[string]any{"name": "bash", "arguments": string(args)}}}},
				map[string]any{"role": "tool", "tool_call_id": id, "content": out}}
		},
		check: chatcheck.ValidateChat,
	},
	{
		name: "responses", path: "/v1/responses",
		request: func(h []any) map[string]any {
			return map[string]any{"model": "gpt-4o", "input": append([]any{map[string]any{"role": "user", "content": "Why do the tests fail?"}}, h...)}
		},
		exchange: func(id, cmd, out string) []any {
			args, _ := json.Marshal(map[string]string{"command": cmd})
			return []any{
				map[string]any{"type": "function_call", "call_id": id, "name": "bash", "arguments": string(args)},
				map[string]any{"type": "function_call_output", "call_id": id, "output": out}}
		},
		check: func(b []byte) error {
			if _, e := responsestest.Check(b, responsestest.Options{}); e != nil {
				return fmt.Errorf("%s", e.Message)
			}
			return nil
		},
	},
	{
		name: "messages", path: "/v1/messages",
		request: func(h []any) map[string]any {
			return map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024,
				"messages": append([]any{map[string]any{"role": "user", "content": "Why do the tests fail?"}}, h...)}
		},
		exchange: func(id, cmd, out string) []any {
			return []any{
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Bash",
					"input": map[string]any{"command": cmd}}}},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": out}}}}
		},
		check: func(b []byte) error {
			if _, e := messagestest.Check(b, messagestest.Options{}); e != nil {
				return fmt.Errorf("%s", e.Message)
			}
			return nil
		},
	},
}

// sedMarker finds a gap marker's way back through a file.
var sedMarker = regexp.MustCompile(`\[lines (\d+)-(\d+) omitted; original intact: (sed -n '\d+,\d+p' \S+\.txt)\]`)

// A model that, seeing a marker, runs the command it gives: the agent's
// shell prints the lines squash left out of a test run, byte-exact, from
// the file ctxpress wrote before the answer reached the agent; the read
// goes upstream whole; and the store holds the same original in the
// client's namespace, not in another's. In every format.
func TestAgentFollowsAMarkerToTheOriginalsFile(t *testing.T) {
	for _, f := range followFormats {
		t.Run(f.name, func(t *testing.T) {
			dir := t.TempDir()
			files, err := state.OpenOriginalFiles(dir, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			up := formatUpstream(t, f)
			store := state.NewMemory()
			t.Cleanup(func() { store.Close() })
			ways := &expand.Ways{Dir: dir}
			pipeline := rewrite.New(rewrite.Config{Format: chat.Format{}, Squash: &squash.Config{}, Expand: ways})
			cfg := unprobed(Config{Upstream: up.BaseURL()})
			p := startProxyWith(t, cfg, Deps{Pipeline: pipeline, Store: store, Files: files})

			run := failingTests(400)
			history := f.exchange("call_1", "pytest -q", run)
			post := func() []byte {
				t.Helper()
				body, _ := json.Marshal(f.request(history))
				code, out, _ := send(t, http.MethodPost, p.URL+f.path, string(body), map[string]string{"Authorization": "Bearer sk-agent", "X-Api-Key": "sk-agent"})
				if code != 200 {
					t.Fatalf("%d %s", code, out)
				}
				return up.Requests()[len(up.Requests())-1].Body
			}
			fwd := post()
			m := sedMarker.FindStringSubmatch(gjson.ParseBytes(fwd).String())
			if m == nil {
				t.Fatalf("no marker with a file in the forwarded body:\n%s", fwd)
			}
			// The agent runs the marker's command, as its shell tool would.
			cmd := strings.ReplaceAll(m[3], `\u0027`, "'")
			printed, err := exec.Command("sh", "-c", cmd).Output()
			if err != nil {
				ents, _ := os.ReadDir(dir)
				t.Fatalf("%s: %v (dir has %v)", cmd, err, ents)
			}
			var from, to int
			fmt.Sscan(m[1], &from)
			fmt.Sscan(m[2], &to)
			if want := expand.Slice(run, expand.Lines{From: from, To: to}); string(printed) != want || want == "" {
				t.Fatalf("%s printed %q, want lines %d-%d of the run %q", cmd, printed, from, to, want)
			}
			missing := strings.Split(strings.TrimSpace(string(printed)), "\n")[0]
			if strings.Contains(string(fwd), missing) {
				t.Fatalf("line %q was not left out", missing)
			}
			history = append(history, f.exchange("call_2", cmd, string(printed))...)
			if fwd := post(); !strings.Contains(string(fwd), missing) {
				t.Fatalf("the agent read the lines back, and the model did not get them:\n%s", fwd)
			}
			tool := map[string]string{"chat": "bash", "responses": "bash", "messages": "Bash"}[f.name]
			if n := value(scrape(t, p.URL), "ctxpress_originals_retrieved_total", "kind", "squash", "tool", tool, "way", "file"); n != 1 {
				t.Fatalf("retrievals counted: %v, want 1", n)
			}
			var stats admin.Stats
			getJSON(t, p.URL+"/ctxpress/stats", &stats)
			if want := (admin.Retrieval{Kind: "squash", Tool: tool, Way: "file", Count: 1}); stats.Retrievals != 1 || len(stats.Retrieved) != 1 || stats.Retrieved[0] != want {
				t.Fatalf("the dashboard's stats: %d retrievals %+v, want %+v", stats.Retrievals, stats.Retrieved, want)
			}

			ref := strings.TrimSuffix(m[3][strings.LastIndex(m[3], "/")+1:], ".txt")
			ns := state.Namespace([]byte("Bearer sk-agent"))
			o, ok, err := originalsOf(store).GetOriginal(ns, ref)
			if err != nil || !ok || o.Text != run || o.Kind != expand.KindSquash {
				t.Fatalf("store: %v %v kind %q, text equal %v", ok, err, o.Kind, o.Text == run)
			}
			if _, ok, _ := originalsOf(store).GetOriginal(state.Namespace([]byte("Bearer someone-else")), ref); ok {
				t.Fatal("another namespace found the original")
			}
			if b, err := os.ReadFile(files.Dir + "/" + ref + ".txt"); err != nil || string(b) != run {
				t.Fatalf("file: %v, equal %v", err, string(b) == run)
			}
		})
	}
}

// formatUpstream is an upstream of f's format that refuses, as the
// provider does, a request its validator rejects, and answers the others
// with a short text.
func formatUpstream(t *testing.T, f followFormat) *openaitest.Server {
	up := openaitest.New(t)
	up.Handle(f.path, func(w http.ResponseWriter, r *http.Request) {
		if err := f.check(up.Requests()[len(up.Requests())-1].Body); err != nil {
			http.Error(w, `{"error":{"message":"`+err.Error()+`"}}`, http.StatusBadRequest)
			return
		}
		answerAny(w, f.path)
	})
	return up
}

// answerAny answers a conversation request of path's format with a short
// text.
func answerAny(w http.ResponseWriter, path string) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasSuffix(path, "/messages"):
		fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":100,"output_tokens":2}}`)
	case strings.HasSuffix(path, "/responses"):
		fmt.Fprint(w, `{"id":"resp_1","object":"response","status":"completed","model":"gpt-4o","output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"ok","annotations":[]}]}],"usage":{"input_tokens":100,"output_tokens":2,"total_tokens":102}}`)
	default:
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":2,"total_tokens":102}}`)
	}
}

// curlMarker finds a gap marker's way back through the URL.
var curlMarker = regexp.MustCompile(`\[lines (\d+)-(\d+) omitted; original intact: (curl -s -H '[^']*' '[^']*')\]`)

// An agent on another machine with a shell and its key follows a marker
// that names the URL (expand.url): its curl prints the lines left out,
// byte-exact, under its own key, in every format; the same curl with
// another key finds nothing.
func TestAgentFollowsAMarkerToTheURL(t *testing.T) {
	for _, f := range followFormats {
		t.Run(f.name, func(t *testing.T) {
			up := formatUpstream(t, f)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ways := &expand.Ways{URL: "http://" + ln.Addr().String(), URLHeader: "Authorization: Bearer <your API key>"}
			pipeline := rewrite.New(rewrite.Config{Format: chat.Format{}, Squash: &squash.Config{}, Expand: ways})
			store := state.NewMemory()
			t.Cleanup(func() { store.Close() })
			srv, err := New(unprobed(Config{Upstream: up.BaseURL()}), zerolog.Nop(), Deps{Pipeline: pipeline, Store: store})
			if err != nil {
				t.Fatal(err)
			}
			go srv.Serve(ln)
			t.Cleanup(func() { srv.Shutdown(context.Background()) })

			run := failingTests(400)
			body, _ := json.Marshal(f.request(f.exchange("call_1", "pytest -q", run)))
			if code, out, _ := send(t, http.MethodPost, ways.URL+f.path, string(body), map[string]string{"Authorization": "Bearer sk-agent"}); code != 200 {
				t.Fatalf("%d %s", code, out)
			}
			fwd := up.Requests()[len(up.Requests())-1].Body
			m := curlMarker.FindStringSubmatch(gjson.ParseBytes(fwd).String())
			if m == nil {
				t.Fatalf("no marker with the URL in the forwarded body:\n%s", fwd)
			}
			cmd := strings.ReplaceAll(m[3], `\u0027`, "'")
			for key, want := range map[string]bool{"sk-agent": true, "sk-someone-else": false} {
				// The agent puts its own key where the marker says.
				mine := strings.Replace(cmd, "<your API key>", key, 1)
				printed, err := exec.Command("sh", "-c", mine).Output()
				if err != nil {
					t.Fatalf("%s: %v", mine, err)
				}
				var from, to int
				fmt.Sscan(m[1], &from)
				fmt.Sscan(m[2], &to)
				lines := expand.Slice(run, expand.Lines{From: from, To: to})
				if got := string(printed) == lines; got != want {
					t.Fatalf("key %s: %s printed %q; the lines %d-%d: %v, want %v", key, mine, printed, from, to, got, want)
				}
			}
		})
	}
}
