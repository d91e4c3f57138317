package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/internal/geminitest"
	"github.com/ctxpress/ctxpress/state"
)

// geminiModel requires thought signatures: the fake checks every one sent
// back.
const geminiModel = "gemini-3-flash-preview"

// geminiUpstream is the strict fake Gemini API on 127.0.0.1, keeping what
// each request was: its path and query, its key, its body. A summary call
// (the summariser's preamble in its last user text) is answered with
// testSummary; a turn with a shell call while the conversation has had
// fewer than three, then a text.
type geminiUpstream struct {
	*httptest.Server
	fake *geminitest.Server
	mu   sync.Mutex
	got  []geminiRequest // guarded by mu
}

type geminiRequest struct {
	path, query, key string
	body             []byte
}

func newGeminiUpstream(t *testing.T) *geminiUpstream {
	u := &geminiUpstream{fake: geminitest.NewServer()}
	u.fake.Script = func(_ string, r *geminitest.Request) (string, []geminitest.Call) {
		if strings.Contains(r.LastUser, "## Active Task") {
			return testSummary, nil
		}
		if n := r.Contents - 1 - r.CurrentTurn; n < 6 {
			return "", []geminitest.Call{{ID: fmt.Sprintf("c%d", n), Name: "run_shell_command", Args: json.RawMessage(`{"command":"make"}`)}}
		}
		return "Built.", nil
	}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key := r.Header.Get("X-Goog-Api-Key")
		u.mu.Lock()
		u.got = append(u.got, geminiRequest{r.URL.Path, r.URL.RawQuery, key, body})
		u.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		u.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *geminiUpstream) requests() []geminiRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]geminiRequest(nil), u.got...)
}

// refused fails the test for every request the fake refused.
func (u *geminiUpstream) refused(t *testing.T) {
	t.Helper()
	for i, e := range u.fake.Entries() {
		if e.Status != http.StatusOK {
			t.Errorf("request %d (%s:%s) refused %d: %s", i, e.Route.Model, e.Route.Method, e.Status, e.Error)
		}
	}
}

// geminiAgent is a Gemini CLI-shaped client speaking raw JSON: it sends
// its contents and tools, keeps every part of each answer (signatures
// included) as the model's content, and answers each functionCall with a
// functionResponse of the same id and name.
type geminiAgent struct {
	t        *testing.T
	url, key string
	session  string
	contents []json.RawMessage
	resp     http.Header
}

func newGeminiAgent(t *testing.T, url, key, session string) *geminiAgent {
	a := &geminiAgent{t: t, url: url, key: key, session: session}
	a.user(`{"text":"Build the project and fix what fails."}`)
	return a
}

func (a *geminiAgent) user(parts ...string) {
	a.contents = append(a.contents, json.RawMessage(`{"role":"user","parts":[`+strings.Join(parts, ",")+`]}`))
}

// body is the request as Gemini CLI sends it.
func (a *geminiAgent) body() []byte {
	b, _ := json.Marshal(map[string]any{
		"contents":          a.contents,
		"systemInstruction": map[string]any{"parts": []any{map[string]string{"text": "You are a coding agent."}}},
		"tools": []any{map[string]any{"functionDeclarations": []any{map[string]any{"name": "run_shell_command",
			"parametersJsonSchema": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]string{"type": "string"}}}}}}},
		"generationConfig": map[string]any{"thinkingConfig": map[string]any{"includeThoughts": true}, "maxOutputTokens": 2048},
	})
	return b
}

// post sends body to path (…:generateContent, …:streamGenerateContent with
// or without alt=sse) and returns the status and the answer's bytes.
func (a *geminiAgent) post(path string, body []byte, header map[string]string) (int, []byte) {
	a.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, a.url+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Goog-Api-Key", a.key)
	req.Header.Set("X-Conversation-Id", a.session)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a.resp = resp.Header
	return resp.StatusCode, b
}

// geminiMode is how a turn asks: whole, SSE, or a streamed JSON array.
type geminiMode string

const (
	geminiWhole geminiMode = ":generateContent"
	geminiSSE   geminiMode = ":streamGenerateContent?alt=sse"
	geminiArray geminiMode = ":streamGenerateContent"
)

// chunks are the GenerateContentResponses of an answer in mode.
func chunks(t *testing.T, mode geminiMode, answer []byte) []gjson.Result {
	t.Helper()
	switch mode {
	case geminiWhole:
		return []gjson.Result{gjson.ParseBytes(answer)}
	case geminiArray:
		if !gjson.ValidBytes(answer) {
			t.Fatalf("not a JSON array: %s", answer)
		}
		return gjson.ParseBytes(answer).Array()
	}
	var out []gjson.Result
	for _, l := range strings.Split(string(answer), "\n") {
		if d, ok := strings.CutPrefix(strings.TrimRight(l, "\r"), "data: "); ok {
			out = append(out, gjson.Parse(d))
		}
	}
	return out
}

// turn sends the conversation in mode and appends the answer and, for its
// calls, their responses.
func (a *geminiAgent) turn(mode geminiMode) {
	a.t.Helper()
	status, answer := a.post("/v1beta/models/"+geminiModel+string(mode), a.body(), nil)
	if status != http.StatusOK {
		a.t.Fatalf("turn %d: %d %s", len(a.contents), status, answer)
	}
	var parts, responses []string
	for _, c := range chunks(a.t, mode, answer) {
		for _, p := range c.Get("candidates.0.content.parts").Array() {
			parts = append(parts, p.Raw)
			if fc := p.Get("functionCall"); fc.Exists() {
				responses = append(responses, fmt.Sprintf(`{"functionResponse":{"id":%q,"name":%q,"response":{"output":%q}}}`,
					fc.Get("id").Str, fc.Get("name").Str, strings.Repeat("cc -c dateparse.c: ok\n", 40)))
			}
		}
	}
	a.contents = append(a.contents, json.RawMessage(`{"role":"model","parts":[`+strings.Join(parts, ",")+`]}`))
	if len(responses) > 0 {
		a.user(responses...)
	} else {
		a.user(`{"text":"Now run the tests."}`)
	}
}

// geminiRecord waits for n turns of session recorded under the Gemini key,
// and returns the record.
func geminiRecord(t *testing.T, p *testProxy, st state.Store, key, session string, n int) state.Record {
	t.Helper()
	var rec state.Record
	waitFor(t, func() bool {
		var ok bool
		rec, ok, _ = st.Get(state.NewKey([]byte("x-goog-api-key\x00"+key), session))
		return ok && len(rec.Turns) >= n && p.recorderDrained()
	}, fmt.Sprintf("%d turns of %s recorded", n, session))
	return rec
}

// Gemini CLI-shaped turns through ctxpress, whole, as SSE and as a
// streamed JSON array: each is a turn (the headers say what ctxpress did),
// the strict upstream accepts every request with every signature as
// issued, and the record, under the Gemini key's namespace, has the
// model the path named and the usage each answer reported.
func TestGeminiTurnsAreRecordedWithThePathModelAndUsage(t *testing.T) {
	for _, mode := range []geminiMode{geminiWhole, geminiSSE, geminiArray} {
		t.Run(strings.TrimPrefix(string(mode), ":"), func(t *testing.T) {
			up := newGeminiUpstream(t)
			p, st := startWithStore(t, Config{Upstream: up.URL + "/v1"})
			a := newGeminiAgent(t, p.URL, "AIza-agent", "gemini-session")
			for range 4 {
				a.turn(mode)
				if a.resp.Get(HeaderConversation) != "gemini-session" || a.resp.Get(HeaderTokensBefore) == "" {
					t.Fatalf("turn headers: %v", a.resp)
				}
			}
			up.refused(t)
			if v := up.fake.Ledger.Verified(); v == 0 {
				t.Error("no signature was sent back")
			}
			rec := geminiRecord(t, p, st, "AIza-agent", "gemini-session", 4)
			if rec.Model != geminiModel {
				t.Errorf("record model %q, want the path's %q", rec.Model, geminiModel)
			}
			entries := up.fake.Entries()
			for i, tr := range rec.Turns {
				u := entries[i].Usage
				if tr.InputTokens != u.Prompt || tr.CachedTokens != u.Cached || tr.InputTokens == 0 {
					t.Errorf("turn %d: input %d cached %d, the upstream said %d and %d", i, tr.InputTokens, tr.CachedTokens, u.Prompt, u.Cached)
				}
			}
			if rec.Turns[3].CachedTokens == 0 {
				t.Error("the implicit cache's tokens were not recorded")
			}
		})
	}
}

// countTokens and the model list pass through: no turn, no record.
func TestGeminiCountTokensAndModelsPassThrough(t *testing.T) {
	up := newGeminiUpstream(t)
	p, st := startWithStore(t, Config{Upstream: up.URL})
	a := newGeminiAgent(t, p.URL, "AIza-agent", "count")
	status, answer := a.post("/v1beta/models/"+geminiModel+":countTokens", []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`), nil)
	if status != http.StatusOK || !gjson.GetBytes(answer, "totalTokens").Exists() || a.resp.Get(HeaderTokensBefore) != "" {
		t.Errorf("countTokens: %d %s, headers %v", status, answer, a.resp)
	}
	req, _ := http.NewRequest(http.MethodGet, p.URL+"/v1beta/models", nil)
	req.Header.Set("X-Goog-Api-Key", "AIza-agent")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !gjson.GetBytes(b, "models.0.name").Exists() || resp.Header.Get(HeaderTokensBefore) != "" {
		t.Errorf("models: %d %s", resp.StatusCode, b)
	}
	if got := up.requests(); len(got) != 2 || !bytes.Equal(got[0].body, []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)) {
		t.Errorf("upstream got %d requests", len(got))
	}
	if _, ok, _ := st.Get(state.NewKey([]byte("x-goog-api-key\x00AIza-agent"), "count")); ok {
		t.Error("a pass-through was recorded")
	}
}

// ctxpress's own errors on Gemini's paths are in Google's shape: a
// missing client key (a turn and countTokens alike), an upstream that
// cannot be reached.
func TestGeminiErrorsAreInGooglesShape(t *testing.T) {
	up := newGeminiUpstream(t)
	p := startProxy(t, Config{Upstream: up.URL, AuthKeys: []string{"cx-key"}})
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	q := startProxy(t, Config{Upstream: gone.URL})
	for _, r := range []struct {
		url    string
		status int
		name   string
	}{
		{p.URL + "/v1beta/models/" + geminiModel + ":generateContent", http.StatusUnauthorized, "UNAUTHENTICATED"},
		{p.URL + "/v1beta/models/" + geminiModel + ":countTokens", http.StatusUnauthorized, "UNAUTHENTICATED"},
		{q.URL + "/v1beta/models/" + geminiModel + ":streamGenerateContent?alt=sse", http.StatusBadGateway, "UNAVAILABLE"},
		{q.URL + "/v1beta/models", http.StatusBadGateway, "UNAVAILABLE"},
	} {
		status, body := sendGemini(t, "POST", r.url, map[string]string{"X-Goog-Api-Key": "AIza-not-ctxpress"}, `{"contents":[]}`)
		e := gjson.Get(body, "error")
		if status != r.status || e.Get("code").Int() != int64(r.status) || e.Get("status").Str != r.name ||
			!strings.HasPrefix(e.Get("message").Str, "ctxpress: ") || len(e.Map()) != 3 {
			t.Errorf("%s: %d %s", r.url, status, body)
		}
	}
	if len(up.requests()) != 0 {
		t.Errorf("a refused request reached the upstream")
	}
}

// A forced compaction of a Gemini conversation makes its summary call in
// Gemini's form to the conversation's own upstream and model, under
// /v1beta with the client's key (upstream_api_key when set, as the turns
// have it); the turn goes on with the summary in systemInstruction, and
// the strict upstream accepts every request.
func TestGeminiSummaryCallSpeaksGemini(t *testing.T) {
	for _, upKey := range []string{"", "AIza-upstream"} {
		t.Run("upstream_api_key="+upKey, func(t *testing.T) {
			up := newGeminiUpstream(t)
			cfg := compactionConfig(up.URL + "/v1")
			cfg.UpstreamAPIKey = upKey
			cfg.Compaction.Trigger.ThresholdTokens = 1 << 20 // only when asked
			p, _ := startWithStore(t, cfg)
			a := newGeminiAgent(t, p.URL, "AIza-agent", "compacted")
			for range 6 {
				a.turn(geminiWhole)
			}
			status, answer := a.post("/v1beta/models/"+geminiModel+":generateContent", a.body(), map[string]string{HeaderCompact: "force"})
			if status != http.StatusOK || a.resp.Get(HeaderCompacted) != "true" {
				t.Fatalf("%d, compacted %q: %s", status, a.resp.Get(HeaderCompacted), answer)
			}
			wantKey := upKey
			if wantKey == "" {
				wantKey = "AIza-agent"
			}
			got := up.requests()
			summary, turn := got[len(got)-2], got[len(got)-1]
			if summary.path != "/v1beta/models/"+geminiModel+":generateContent" || summary.key != wantKey || turn.key != wantKey ||
				!strings.Contains(gjson.GetBytes(summary.body, "contents.@reverse.0.parts.@reverse.0.text").Str, "## Active Task") {
				b := summary.body
				t.Errorf("summary call: %s key %q (the turn's %q): …%s", summary.path, summary.key, turn.key, b[max(0, len(b)-1500):])
			}
			if !strings.Contains(gjson.GetBytes(turn.body, "systemInstruction").Raw, "<conversation_summary>") {
				t.Errorf("the turn after the summary: %.500s", turn.body)
			}
			up.refused(t)
		})
	}
}

// "/compact" is answered by ctxpress in the client's own shape: a
// GenerateContentResponse, one SSE event of it, or a JSON array of it.
func TestGeminiCompactCommandIsAnsweredInKind(t *testing.T) {
	for _, mode := range []geminiMode{geminiWhole, geminiSSE, geminiArray} {
		t.Run(strings.TrimPrefix(string(mode), ":"), func(t *testing.T) {
			up := newGeminiUpstream(t)
			cfg := compactionConfig(up.URL)
			cfg.Compaction.Trigger.ThresholdTokens = 1 << 20
			p, _ := startWithStore(t, cfg)
			a := newGeminiAgent(t, p.URL, "AIza-agent", "command")
			// Until the model answers in text, so that /compact is a user
			// text of its own, as a user types it.
			for i := 0; i < 6 || !strings.Contains(string(a.contents[len(a.contents)-1]), "Now run the tests."); i++ {
				a.turn(geminiWhole)
			}
			a.contents = a.contents[:len(a.contents)-1]
			a.user(`{"text":"/compact"}`)
			before := len(up.requests())
			status, answer := a.post("/v1beta/models/"+geminiModel+string(mode), a.body(), nil)
			if status != http.StatusOK || a.resp.Get(HeaderCompacted) != "true" {
				t.Fatalf("%d, compacted %q: %s", status, a.resp.Get(HeaderCompacted), answer)
			}
			cs := chunks(t, mode, answer)
			if len(cs) != 1 || !strings.Contains(cs[0].Get("candidates.0.content.parts.0.text").Str, "compacted") ||
				cs[0].Get("candidates.0.content.role").Str != "model" {
				t.Errorf("answer: %s", answer)
			}
			if wantType := map[geminiMode]string{geminiWhole: "application/json", geminiSSE: "text/event-stream", geminiArray: "application/json"}[mode]; !strings.HasPrefix(a.resp.Get("Content-Type"), wantType) {
				t.Errorf("Content-Type %q", a.resp.Get("Content-Type"))
			}
			if got := up.requests()[before:]; len(got) != 1 || !strings.HasSuffix(got[0].path, ":generateContent") || !strings.Contains(string(got[0].body), "## Active Task") {
				t.Errorf("upstream got %d requests for /compact, want the summary call alone", len(got))
			}
			up.refused(t)
		})
	}
}

// A stream asked without alt=sse is one JSON array under
// application/json, sent element by element: the client gets each element
// as the upstream sends it (the next is only sent once the client has
// read the first), and the turn's usage is read from the last.
func TestGeminiArrayStreamIsRelayedAsItArrives(t *testing.T) {
	next := make(chan struct{})
	first := `[{"candidates":[{"content":{"role":"model","parts":[{"text":"Build"}]}}]}`
	rest := `,{"candidates":[{"content":{"role":"model","parts":[{"text":"ing."}]},"finishReason":"STOP"}],` +
		`"usageMetadata":{"promptTokenCount":321,"cachedContentTokenCount":256,"candidatesTokenCount":2}}]`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = io.WriteString(w, first)
		w.(http.Flusher).Flush()
		select {
		case <-next:
		case <-r.Context().Done():
			return
		case <-t.Context().Done(): // the test failed while the proxy held the answer
			return
		}
		_, _ = io.WriteString(w, rest)
	}))
	t.Cleanup(up.Close)
	p, st := startWithStore(t, Config{Upstream: up.URL})
	a := newGeminiAgent(t, p.URL, "AIza-agent", "array")
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent", bytes.NewReader(a.body()))
	req.Header.Set("X-Goog-Api-Key", "AIza-agent")
	req.Header.Set("X-Conversation-Id", "array")
	var got []byte
	within(t, 10*time.Second, "the first element relayed before the upstream sends the rest", func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		buf := make([]byte, 4096)
		for !bytes.Contains(got, []byte(`"Build"`)) {
			n, err := resp.Body.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				t.Errorf("before the first element: %v", err)
				return
			}
		}
		close(next)
		b, _ := io.ReadAll(resp.Body)
		got = append(got, b...)
	})
	if string(got) != first+rest {
		t.Fatalf("the client got %s", got)
	}
	rec := geminiRecord(t, p, st, "AIza-agent", "array", 1)
	if tr := rec.Turns[0]; tr.InputTokens != 321 || tr.CachedTokens != 256 || rec.Model != "gemini-2.5-flash" {
		t.Errorf("recorded %s: input %d cached %d", rec.Model, tr.InputTokens, tr.CachedTokens)
	}
}

// With the retrieval tool on, a Gemini turn offers it last among its
// function declarations, the strict upstream takes it, and every answer
// (held whole for the tool's calls, whole, SSE or array) reaches the
// client intact and is recorded.
func TestGeminiTurnsWithTheRetrievalTool(t *testing.T) {
	for _, mode := range []geminiMode{geminiWhole, geminiSSE, geminiArray} {
		t.Run(strings.TrimPrefix(string(mode), ":"), func(t *testing.T) {
			up := newGeminiUpstream(t)
			p, st := startWithStore(t, Config{Upstream: up.URL, ExpandTool: true})
			a := newGeminiAgent(t, p.URL, "AIza-agent", "expand")
			for range 3 {
				a.turn(mode)
			}
			up.refused(t)
			got := up.requests()
			if names := gjson.GetBytes(got[len(got)-1].body, "tools.@reverse.0.functionDeclarations.@reverse.0.name").Str; names != expand.ToolName {
				t.Errorf("the last function declaration is %q", names)
			}
			geminiRecord(t, p, st, "AIza-agent", "expand", 3)
		})
	}
}
