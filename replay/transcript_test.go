package replay

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/messagestest"
	"github.com/ctxpress/ctxpress/internal/responsestest"
	"github.com/tidwall/gjson"
)

// The fixtures are real sessions (testdata/README.md): Claude Code 2.1.332
// and codex 0.171 run against cmd/ctxpress-scripted, which recorded the
// bodies they sent; testdata/sent.json holds those bodies' digests.
const fixtureHome = "testdata/home"

var fixtures = []struct {
	path   string // under fixtureHome
	agent  string
	format Format
	model  string
}{
	{".claude/projects/-tmp-ctxpress-fixture-project/cbb6cffc-97bd-402d-8115-d7a42cd07eb1.jsonl", "claude-code", Messages, "claude-opus-5-5"},
	{".claude/projects/-tmp-ctxpress-fixture-project/fbe4a9f3-0bb3-4f6e-972b-bc98f6817ff8.jsonl", "claude-code", Messages, "claude-opus-5-5"},
	{".claude/projects/-tmp-ctxpress-fixture-project/fbe4a9f3-0bb3-4f6e-972b-bc98f6817ff8/subagents/agent-ab59b5f993f9b0617.jsonl", "claude-code", Messages, "claude-opus-5-5"},
	{".claude/projects/-tmp-ctxpress-fixture-project/fbe4a9f3-0bb3-4f6e-972b-bc98f6817ff8/subagents/agent-ac5f5e8a7447e8603.jsonl", "claude-code", Messages, "claude-opus-5-5"},
	{".codex/sessions/2026/12/05/rollout-2026-12-05T04-18-33-01a2446c-d5c5-77a3-a6f7-588b7b7a2746.jsonl", "codex", Responses, "gpt-5.5"},
	{".codex/sessions/2026/12/05/rollout-2026-12-05T04-18-40-01a2446c-f1fe-7593-92ea-3b584f2173ca.jsonl", "codex", Responses, "gpt-5.5"},
}

// sentRequest is what testdata/sent.json holds of a request a client sent:
// the model, and digests (sentDigest) of each history element, of the
// system blocks (Messages, the billing-header line left out) and of the
// tools.
type sentRequest struct {
	Model   string   `json:"model"`
	History []string `json:"history"`
	System  string   `json:"system"`
	Tools   string   `json:"tools"`
}

func sentRequests(t *testing.T) map[string][]sentRequest {
	t.Helper()
	b, err := os.ReadFile("testdata/sent.json")
	if err != nil {
		t.Fatal(err)
	}
	var sent map[string][]sentRequest
	if err := json.Unmarshal(b, &sent); err != nil {
		t.Fatal(err)
	}
	return sent
}

// sentDigest is the first 12 hex digits of the SHA-256 of v's JSON with
// sorted keys, cache_control markers left out and a string content as the
// one text block it is, as testdata/sent.json has them.
func sentDigest(t *testing.T, raw string) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	v = withoutMarkers(v)
	if m, ok := v.(map[string]any); ok {
		if s, ok := m["content"].(string); ok {
			m["content"] = []any{map[string]any{"type": "text", "text": s}}
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bytes.TrimSuffix(b.Bytes(), []byte{'\n'}))
	return hex.EncodeToString(sum[:6])
}

func withoutMarkers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		delete(x, "cache_control")
		for k, e := range x {
			x[k] = withoutMarkers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = withoutMarkers(e)
		}
	}
	return v
}

// history is a request's conversation: Messages' messages, Responses' input.
func history(f Format, body []byte) []gjson.Result {
	if f == Responses {
		return gjson.GetBytes(body, "input").Array()
	}
	return gjson.GetBytes(body, "messages").Array()
}

// validRequest fails t when the API would refuse body: a call without its
// result, a result without its call, a shape it does not take.
func validRequest(t *testing.T, f Format, body []byte, what string) {
	t.Helper()
	if f == Responses {
		if _, e := responsestest.Check(body, responsestest.Options{}); e != nil {
			t.Errorf("%s: refused: %s", what, e.Body())
		}
		return
	}
	if _, e := messagestest.Check(body, messagestest.Options{}); e != nil {
		t.Errorf("%s: refused: %s", what, e.Body())
	}
}

// Each fixture is rebuilt into the requests its client sent, one per model
// call: a Claude Code session from its own request records, as sent
// (messages, system, tools); a codex rollout with its history as sent, the
// base instructions from the rollout and codex's tools. Every request is
// one the API takes (each call with its result).
func TestReadersRebuildTheRequestsTheClientSent(t *testing.T) {
	sent := sentRequests(t)
	for _, fx := range fixtures {
		name := filepath.Base(fx.path)
		t.Run(name, func(t *testing.T) {
			sessions, err := ReadFile(filepath.Join(fixtureHome, fx.path), name, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(sessions) != 1 {
				t.Fatalf("%d sessions, want 1", len(sessions))
			}
			s, want := sessions[0], sent[name]
			if s.Agent != fx.agent || s.Format != fx.format || s.Model != fx.model || s.Name != name {
				t.Errorf("read as %s/%s, model %s, name %s; want %s/%s, %s", s.Agent, s.Format, s.Model, s.Name, fx.agent, fx.format, fx.model)
			}
			if len(s.Requests) != len(want) || s.Turns != len(want) {
				t.Fatalf("%d requests (%d turns), the client sent %d", len(s.Requests), s.Turns, len(want))
			}
			for k, body := range s.Requests {
				what := "request " + string(rune('1'+k))
				validRequest(t, s.Format, body, what)
				got := history(s.Format, body)
				w := want[k]
				if gjson.GetBytes(body, "model").String() != w.Model || len(got) != len(w.History) {
					t.Fatalf("request %d: model %s, %d history elements; the client sent %s, %d", k+1,
						gjson.GetBytes(body, "model"), len(got), w.Model, len(w.History))
				}
				first := 0
				if s.Format == Responses { // the base instructions: the rollout's, not codex's own variant of them
					first = 1
					if got[0].Get("role").String() != "developer" || !strings.Contains(got[0].Get("content.0.text").String(), "You are Codex") {
						t.Errorf("request %d: input starts with %.80s, want codex's base instructions", k+1, got[0].Raw)
					}
				}
				for i := first; i < len(got); i++ {
					if d := sentDigest(t, got[i].Raw); d != w.History[i] {
						t.Errorf("request %d: history element %d differs from what the client sent: %.200s", k+1, i, got[i].Raw)
					}
				}
				if d := sentDigest(t, gjson.GetBytes(body, "tools").Raw); d != w.Tools {
					t.Errorf("request %d: tools differ from the client's", k+1)
				}
				if s.Format == Messages {
					if d := sentDigest(t, gjson.GetBytes(body, "system").Raw); d != w.System {
						t.Errorf("request %d: system differs from the client's", k+1)
					}
				}
			}
		})
	}
}

// withoutRecords is a Claude Code transcript as versions before 2.1 write
// it: no records of its requests.
func withoutRecords(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, line := range bytes.SplitAfter(data, []byte{'\n'}) {
		if !strings.HasPrefix(gjson.GetBytes(line, "type").String(), "api-request") {
			out = append(out, line...)
		}
	}
	return out
}

// Without request records, a Claude Code transcript still gives one
// request per model call, each the transcript up to that call: the same
// answers as the client's own requests held (every block of each, the
// parallel calls' too), each followed by the results of its calls, in
// order. The context Claude Code assembles before the first answer, the
// system prompt and the tools are approximated, and the session says so.
func TestClaudeCodeTranscriptWithoutRecordsIsTheChainUpToEachCall(t *testing.T) {
	for _, fx := range fixtures[:2] {
		name := filepath.Base(fx.path)
		exact, err := ReadFile(filepath.Join(fixtureHome, fx.path), name, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, withoutRecords(t, filepath.Join(fixtureHome, fx.path)), 0o644); err != nil {
			t.Fatal(err)
		}
		sessions, err := ReadFile(path, name, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s, want := sessions[0], exact[0].Requests
		if len(sessions) != 1 || len(s.Requests) != len(want) {
			t.Fatalf("%s: %d sessions, %d requests; the client sent %d", name, len(sessions), len(s.Requests), len(want))
		}
		if !strings.Contains(s.Approximated, "system prompt, tools and cache_control placement") {
			t.Errorf("%s: approximated %q: want it said what was filled in", name, s.Approximated)
		}
		for k, body := range s.Requests {
			validRequest(t, Messages, body, name)
			got, sent := answersAndResults(t, body), answersAndResults(t, want[k])
			if strings.Join(got, "\n") != strings.Join(sent, "\n") {
				t.Errorf("%s request %d: answers and results\n%s\nthe client sent\n%s", name, k+1, strings.Join(got, "\n"), strings.Join(sent, "\n"))
			}
			last := history(Messages, body)
			if !last[len(last)-1].Get("content.@reverse.0.cache_control").Exists() {
				t.Errorf("%s request %d: no marker on the last message, where Claude Code puts it", name, k+1)
			}
		}
	}
}

// answersAndResults are a Messages request's assistant messages (digests)
// and, for each user message after one, the tool_use ids its results
// answer.
func answersAndResults(t *testing.T, body []byte) []string {
	var out []string
	for _, m := range history(Messages, body) {
		switch m.Get("role").String() {
		case "assistant":
			out = append(out, "answer "+sentDigest(t, m.Raw))
		case "user":
			var ids []string
			m.Get("content").ForEach(func(_, b gjson.Result) bool {
				if b.Get("type").String() == "tool_result" {
					ids = append(ids, b.Get("tool_use_id").String())
				}
				return true
			})
			if len(out) > 0 {
				slices.Sort(ids) // the API pairs them by id, in any order
				out = append(out, "results "+strings.Join(ids, ","))
			}
		}
	}
	return out
}
