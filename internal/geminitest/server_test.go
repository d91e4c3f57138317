package geminitest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/genai"
)

// loop answers two tool steps per ask, then text.
func loop(model string, r *Request) (string, []Call) {
	if r.Contents-1-r.CurrentTurn >= 4 {
		return "Two steps done.", nil
	}
	n := (r.Contents - r.CurrentTurn + 1) / 2
	return "", []Call{{ID: fmt.Sprintf("c%d", n), Name: "run_shell_command", Args: json.RawMessage(fmt.Sprintf(`{"command":"echo %d"}`, n))}}
}

func start(t *testing.T) (*Server, *genai.Client) {
	t.Helper()
	s := NewServer()
	s.Script = loop
	s.BindPrefix = true // the loop only appends: every prefix stays as issued
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: "test-key", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: ts.URL}})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

var shellTool = &genai.Tool{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "run_shell_command",
	ParametersJsonSchema: map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}, "required": []any{"command"}}}}}

// generate asks once, streamed or not, and returns the model content (a
// stream's parts gathered as clients gather them) and the last usage.
func generate(t *testing.T, c *genai.Client, contents []*genai.Content, stream bool) (*genai.Content, *genai.GenerateContentResponseUsageMetadata, error) {
	t.Helper()
	cfg := &genai.GenerateContentConfig{Tools: []*genai.Tool{shellTool}, SystemInstruction: genai.NewContentFromText("You are an agent.", genai.RoleUser),
		ThinkingConfig: &genai.ThinkingConfig{IncludeThoughts: true}}
	ctx := context.Background()
	if !stream {
		r, err := c.Models.GenerateContent(ctx, "gemini-3-flash-preview", contents, cfg)
		if err != nil {
			return nil, nil, err
		}
		return r.Candidates[0].Content, r.UsageMetadata, nil
	}
	out := &genai.Content{Role: genai.RoleModel}
	var u *genai.GenerateContentResponseUsageMetadata
	for r, err := range c.Models.GenerateContentStream(ctx, "gemini-3-flash-preview", contents, cfg) {
		if err != nil {
			return nil, nil, err
		}
		out.Parts = append(out.Parts, r.Candidates[0].Content.Parts...)
		u = r.UsageMetadata
	}
	return out, u, nil
}

func TestGoogleGoClientRunsAToolLoop(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			s, c := start(t)
			contents := []*genai.Content{genai.NewContentFromText("Run two steps.", genai.RoleUser)}
			var text string
			for turn := 0; text == "" && turn < 5; turn++ {
				m, u, err := generate(t, c, contents, stream)
				if err != nil {
					t.Fatalf("turn %d: %v", turn, err)
				}
				if u.PromptTokenCount == 0 || u.CandidatesTokenCount == 0 || u.ThoughtsTokenCount == 0 {
					t.Fatalf("turn %d: usage %+v", turn, u)
				}
				if turn > 0 && u.CachedContentTokenCount == 0 {
					t.Fatalf("turn %d: the repeated prefix was not cached: %+v", turn, u)
				}
				contents = append(contents, m)
				var answers []*genai.Part
				for _, p := range m.Parts {
					switch {
					case p.FunctionCall != nil:
						if len(p.ThoughtSignature) == 0 {
							t.Fatalf("turn %d: call without a signature", turn)
						}
						answers = append(answers, &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: p.FunctionCall.ID,
							Name: p.FunctionCall.Name, Response: map[string]any{"output": "ok"}}})
					case !p.Thought:
						text += p.Text
					}
				}
				if answers != nil {
					contents = append(contents, &genai.Content{Role: genai.RoleUser, Parts: answers})
				}
			}
			if text != "Two steps done." {
				t.Fatalf("text %q", text)
			}
			if s.Ledger.Verified() < 3 {
				t.Fatalf("verified %d signatures, want every call's and none refused", s.Ledger.Verified())
			}
			n, err := c.Models.CountTokens(context.Background(), "gemini-3-flash-preview", contents, nil)
			if err != nil || n.TotalTokens == 0 {
				t.Fatalf("countTokens: %v %+v", err, n)
			}

			// The same history with the latest call's signature dropped.
			for _, p := range contents[len(contents)-3].Parts {
				p.ThoughtSignature = nil
			}
			_, _, err = generate(t, c, contents[:len(contents)-1], stream)
			var apiErr genai.APIError
			if !errors.As(err, &apiErr) || apiErr.Code != 400 || !strings.Contains(apiErr.Message, "Function call is missing a thought_signature") {
				t.Fatalf("want the missing-signature refusal, got %v", err)
			}
		})
	}
}

func raw(t *testing.T, method, url, key, body string) (int, http.Header, string) {
	t.Helper()
	r, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		r.Header.Set("x-goog-api-key", key)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestServerAnswersAsGoogleDoes(t *testing.T) {
	s := NewServer()
	s.Script = func(string, *Request) (string, []Call) { return "All done here.", nil }
	ts := httptest.NewServer(s)
	defer ts.Close()
	base := ts.URL + "/v1beta/models/"
	body := string(req(ask))

	code, _, got := raw(t, "POST", base+"gemini-3-flash-preview:generateContent", "", body)
	if code != 403 || !strings.Contains(got, `"status": "PERMISSION_DENIED"`) {
		t.Fatalf("no key: %d %s", code, got)
	}
	if code, _, got = raw(t, "POST", base+"gemini-3-flash-preview:generateContent?key=k", "", body); code != 200 {
		t.Fatalf("?key=: %d %s", code, got)
	}

	code, h, got := raw(t, "POST", base+"gemini-3-flash-preview:streamGenerateContent?alt=sse", "k", body)
	events := strings.Split(strings.TrimSuffix(got, "\r\n\r\n"), "\r\n\r\n")
	if code != 200 || h.Get("Content-Type") != "text/event-stream" || len(events) != 3 {
		t.Fatalf("sse: %d %q", code, got)
	}
	last := strings.TrimPrefix(events[2], "data: ")
	var chunk struct {
		Candidates []struct {
			Content struct {
				Parts []map[string]any `json:"parts"`
			} `json:"content"`
			FinishReason string `json:"finishReason"`
		} `json:"candidates"`
		Usage map[string]any `json:"usageMetadata"`
	}
	if err := json.Unmarshal([]byte(last), &chunk); err != nil {
		t.Fatal(err)
	}
	if p := chunk.Candidates[0].Content.Parts[0]; chunk.Candidates[0].FinishReason != "STOP" || p["thoughtSignature"] == nil || p["text"] != "" ||
		chunk.Usage["candidatesTokenCount"] == nil || chunk.Usage["cachedContentTokenCount"] == nil {
		t.Fatalf("last event: %s", last)
	}

	code, _, got = raw(t, "POST", base+"gemini-3-flash-preview:streamGenerateContent", "k", body)
	var arr []json.RawMessage
	if code != 200 || json.Unmarshal([]byte(got), &arr) != nil || len(arr) != 3 {
		t.Fatalf("array stream: %d %s", code, got)
	}

	code, _, got = raw(t, "GET", ts.URL+"/v1beta/models", "k", "")
	if code != 200 || !strings.Contains(got, `"name":"models/gemini-3-flash-preview"`) {
		t.Fatalf("models: %d %s", code, got)
	}
	s.Models = []string{"gemini-3-flash-preview"}
	code, _, got = raw(t, "POST", base+"gemini-4-ultra:generateContent", "k", body)
	if code != 404 || !strings.Contains(got, "models/gemini-4-ultra is not found for API version v1beta, or is not supported for generateContent.") {
		t.Fatalf("unknown model: %d %s", code, got)
	}
	code, _, got = raw(t, "POST", base+"gemini-3-flash-preview:generateContent", "k", string(req(join(ask, unsigned, resultLs))))
	if code != 400 || !strings.Contains(got, "position 2") {
		t.Fatalf("unsigned: %d %s", code, got)
	}
}
