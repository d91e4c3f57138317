package system

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/internal/geminitest"
)

// geminiSummary is a summary with every section of ctxpress's template.
func geminiSummary() string {
	var b strings.Builder
	for _, line := range strings.Split(compactor.SummaryTemplate, "\n") {
		if strings.HasPrefix(line, "## ") {
			fmt.Fprintf(&b, "%s\nGemini fake summary: %s.\n\n", line, strings.ToLower(line[3:]))
		}
	}
	return strings.TrimSpace(b.String())
}

// A Gemini CLI-shaped tool loop through the real binary in front of a
// strict fake of Google's API (internal/geminitest: roles, pairing, and
// Gemini 3's thought signatures checked against what the fake issued),
// whole answers and SSE: ctxpress compacts it several times, inside the
// loop, with summary calls in Gemini's form on the same upstream; no
// request is refused, the signatures the client sends back are verified,
// and the record names the path's model.
func TestBinaryGeminiToolLoopCompacted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := ctxpressBinary(t)
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", sse), func(t *testing.T) {
			fake := geminitest.NewServer()
			var summaries atomic.Int32 // counted on the fake's goroutines
			fake.Script = func(model string, r *geminitest.Request) (string, []geminitest.Call) {
				if compactor.IsSummaryPrompt(r.LastUser) {
					summaries.Add(1)
					return geminiSummary(), nil
				}
				return "", []geminitest.Call{{Name: "run_shell_command", Args: json.RawMessage(`{"command":"pytest -x"}`)}}
			}
			up := httptest.NewServer(fake)
			t.Cleanup(up.Close)
			p := runBinary(t, bin, up.URL+"/v1", binaryCompaction+"expand:\n  files: false\n")

			path := "/v1beta/models/gemini-3-flash-preview:generateContent"
			if sse {
				path = "/v1beta/models/gemini-3-flash-preview:streamGenerateContent?alt=sse"
			}
			contents := []json.RawMessage{json.RawMessage(`{"role":"user","parts":[{"text":"The leap-year tests fail; find out why."}]}`)}
			const turns = 24
			for turn := 1; turn <= turns; turn++ {
				body, _ := json.Marshal(map[string]any{
					"contents": contents,
					"tools": []any{map[string]any{"functionDeclarations": []any{map[string]any{
						"name": "run_shell_command", "description": "Runs a shell command.",
						"parametersJsonSchema": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}, "required": []string{"command"}},
					}}}},
					"generationConfig": map[string]any{"thinkingConfig": map[string]any{"includeThoughts": true}},
				})
				req, _ := http.NewRequest(http.MethodPost, p.url+path, bytes.NewReader(body))
				req.Header.Set("x-goog-api-key", "gemini-test-key")
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				answer, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("turn %d: %d %s", turn, resp.StatusCode, answer)
				}
				model := modelContent(t, answer, sse)
				contents = append(contents, model)
				var responses []any
				for _, part := range gjson.GetBytes(model, "parts").Array() {
					if call := part.Get("functionCall"); call.Exists() {
						responses = append(responses, map[string]any{"functionResponse": map[string]any{
							"id": call.Get("id").Str, "name": call.Get("name").Str,
							"response": map[string]any{"output": toolText("gemini", turn)}}})
					}
				}
				if len(responses) == 0 {
					t.Fatalf("turn %d: the fake's answer calls no tool: %s", turn, model)
				}
				next, _ := json.Marshal(map[string]any{"role": "user", "parts": responses})
				contents = append(contents, next)
			}
			if n := summaries.Load(); n < 2 {
				t.Fatalf("%d summary calls in %d turns; want the loop compacted several times", n, turns)
			}
			signed := 0
			for i, e := range fake.Entries() {
				if e.Status != http.StatusOK {
					t.Errorf("request %d refused: %d %s", i, e.Status, e.Error)
				}
				signed += e.Signed
			}
			if signed == 0 {
				t.Error("no signature came back to the fake: the test proves little")
			}
			t.Logf("%d turns, %d summary calls, %d signatures sent back and verified", turns, summaries.Load(), signed)
			p.checkLog(t, turns, nil)
			var rec struct {
				Data []struct {
					Model       string `json:"model"`
					Compactions int    `json:"compactions"`
				} `json:"data"`
			}
			waitForJSON(t, p.url+"/ctxpress/conversations", &rec, func() bool { return len(rec.Data) == 1 && rec.Data[0].Compactions >= 2 })
			if len(rec.Data) != 1 || rec.Data[0].Model != "gemini-3-flash-preview" || rec.Data[0].Compactions < 2 {
				t.Errorf("the record: %+v", rec.Data)
			}
		})
	}
}

// modelContent is the model's content of a Gemini answer, whole or as SSE
// events (their parts joined, as Google's clients join them).
func modelContent(t *testing.T, answer []byte, sse bool) json.RawMessage {
	t.Helper()
	if !sse {
		return json.RawMessage(gjson.GetBytes(answer, "candidates.0.content").Raw)
	}
	var parts []json.RawMessage
	sc := bufio.NewScanner(bytes.NewReader(answer))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(strings.TrimRight(sc.Text(), "\r"), "data: ")
		if !ok {
			continue
		}
		for _, p := range gjson.Get(data, "candidates.0.content.parts").Array() {
			parts = append(parts, json.RawMessage(p.Raw))
		}
	}
	out, _ := json.Marshal(map[string]any{"role": "model", "parts": parts})
	return out
}
