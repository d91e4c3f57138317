package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/internal/geminitest"
	"github.com/ctxpress/ctxpress/state"
)

// toolMarker is a marker's way back through the retrieval tool.
var toolMarker = regexp.MustCompile(`ctxpress_expand \{\\"ref\\":\\"([0-9a-f]{12})\\",\\"lines\\":\\"(\d+-\d+)\\"\}`)

// A Gemini model that, reading a marker, calls ctxpress_expand: ctxpress
// answers the call itself from the conversation's originals and asks again
// (the strict fake takes the hidden turn: the call, then its response),
// and the client gets only the model's final text, whole, as SSE and as a
// streamed array; the model got the original's lines byte for byte.
func TestExpandToolGemini(t *testing.T) {
	for _, mode := range []geminiMode{geminiWhole, geminiSSE, geminiArray} {
		t.Run(strings.TrimPrefix(string(mode), ":"), func(t *testing.T) {
			var mu sync.Mutex
			var prompts []string
			fake := geminitest.NewServer()
			fake.Script = func(model string, r *geminitest.Request) (string, []geminitest.Call) {
				mu.Lock()
				defer mu.Unlock()
				prompts = append(prompts, string(r.Prompt))
				lines := strings.Split(strings.TrimSpace(string(r.Prompt)), "\n")
				last := lines[len(lines)-1]
				if strings.Contains(last, `"name":"`+expand.ToolName+`"`) {
					return "The failing cases are 211 to 230.", nil
				}
				if m := toolMarker.FindStringSubmatch(last); m != nil {
					args, _ := json.Marshal(map[string]string{"ref": m[1], "lines": m[2]})
					return "", []geminitest.Call{{Name: expand.ToolName, Args: args}}
				}
				return "No marker seen.", nil
			}
			up := httptest.NewServer(fake)
			t.Cleanup(up.Close)
			st := state.NewMemory()
			t.Cleanup(func() { st.Close() })
			p := startProxyWith(t, unprobed(Config{Upstream: up.URL, ExpandTool: true}), Deps{Pipeline: pipelineForTest(), Store: st})

			orig := expandOriginal()
			o := expand.New(expand.KindSquash, "run_shell_command", orig)
			ns := state.Namespace([]byte("x-goog-api-key\x00AIza-agent"))
			if err := st.PutOriginals(ns, []expand.Original{o}); err != nil {
				t.Fatal(err)
			}
			result := "go test ./dateparse: 400 tests failed\n[ctxpress: 380 similar lines squashed; " + expand.Ways{Tool: true}.Back(o.Ref, expandLines) + "]"
			body, _ := json.Marshal(map[string]any{
				"contents": []any{
					map[string]any{"role": "user", "parts": []any{map[string]any{"text": "Why do the date tests fail?"}}},
					map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": "run_shell_command", "args": map[string]any{"command": "go test ./dateparse"}}}}},
					map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"name": "run_shell_command", "response": map[string]any{"output": result}}}}},
				},
				"tools": []any{map[string]any{"functionDeclarations": []any{map[string]any{"name": "run_shell_command",
					"parametersJsonSchema": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}}}}},
			})
			path := "/v1beta/models/gemini-2.5-flash:generateContent"
			switch mode {
			case geminiSSE:
				path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
			case geminiArray:
				path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
			}
			req, _ := http.NewRequest(http.MethodPost, p.URL+path, bytes.NewReader(body))
			req.Header.Set("x-goog-api-key", "AIza-agent")
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, answer)
			}
			var said strings.Builder // the text parts, joined as a client joins a stream's
			for _, m := range regexp.MustCompile(`"text":"([^"]*)"`).FindAllStringSubmatch(string(answer), -1) {
				said.WriteString(m[1])
			}
			if said.String() != "The failing cases are 211 to 230." || strings.Contains(string(answer), expand.ToolName) {
				t.Fatalf("the client got %s", answer)
			}
			for i, e := range fake.Entries() {
				if e.Status != http.StatusOK {
					t.Errorf("request %d refused: %d %s", i, e.Status, e.Error)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(prompts) != 2 {
				t.Fatalf("the model was asked %d times, want 2 (the turn, then after the hidden call)", len(prompts))
			}
			want, _ := json.Marshal(expand.Slice(orig, expandLines))
			if !strings.Contains(prompts[1], strings.Trim(string(want), `"`)) {
				t.Errorf("the model did not get lines %s of the original back", expandLines)
			}
			if n := strings.Count(prompts[1], `"name":"`+expand.ToolName+`"`); n < 2 {
				t.Errorf("the hidden turn: %d mentions of the tool's call and response", n)
			}
			if n := value(scrape(t, p.URL), "ctxpress_originals_retrieved_total", "kind", "squash", "tool", "run_shell_command", "way", "tool"); n != 1 {
				t.Errorf("retrievals counted: %v, want 1", n)
			}
		})
	}
}
