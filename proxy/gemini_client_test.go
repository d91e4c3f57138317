package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/genai"

	"github.com/ctxpress/ctxpress/internal/geminitest"
)

// Google's own Go client through the proxy in front of the strict fake:
// a tool loop, streamed (alt=sse) and not, every signature sent back as
// issued, the usage (cached tokens included) as the upstream reported it,
// and the upstream's refusals in Google's shape as Google sent them.
func TestGoogleGoClientThroughTheProxy(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			fake := geminitest.NewServer()
			fake.Script = func(_ string, r *geminitest.Request) (string, []geminitest.Call) {
				if n := r.Contents - 1 - r.CurrentTurn; n < 4 {
					return "", []geminitest.Call{{ID: fmt.Sprintf("c%d", n), Name: "run_shell_command", Args: json.RawMessage(`{"command":"ls"}`)}}
				}
				return "Listed twice.", nil
			}
			up := httptest.NewServer(fake)
			t.Cleanup(up.Close)
			p := startProxy(t, Config{Upstream: up.URL + "/v1"})
			c, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: "k", Backend: genai.BackendGeminiAPI,
				HTTPOptions: genai.HTTPOptions{BaseURL: p.URL}})
			if err != nil {
				t.Fatal(err)
			}
			cfg := &genai.GenerateContentConfig{ThinkingConfig: &genai.ThinkingConfig{IncludeThoughts: true},
				Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "run_shell_command",
					ParametersJsonSchema: map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}}}}}}
			ask := func(contents []*genai.Content) ([]*genai.Part, *genai.GenerateContentResponseUsageMetadata, error) {
				if !stream {
					r, err := c.Models.GenerateContent(context.Background(), "gemini-3-flash-preview", contents, cfg)
					if err != nil {
						return nil, nil, err
					}
					return r.Candidates[0].Content.Parts, r.UsageMetadata, nil
				}
				var parts []*genai.Part
				var u *genai.GenerateContentResponseUsageMetadata
				for r, err := range c.Models.GenerateContentStream(context.Background(), "gemini-3-flash-preview", contents, cfg) {
					if err != nil {
						return nil, nil, err
					}
					parts, u = append(parts, r.Candidates[0].Content.Parts...), r.UsageMetadata
				}
				return parts, u, nil
			}
			contents := []*genai.Content{genai.NewContentFromText("List the files twice.", genai.RoleUser)}
			text := ""
			for turn := 0; text == "" && turn < 4; turn++ {
				parts, u, err := ask(contents)
				if err != nil {
					t.Fatalf("turn %d: %v", turn, err)
				}
				if turn > 0 && u.CachedContentTokenCount == 0 {
					t.Fatalf("turn %d: no cached tokens reached the client: %+v", turn, u)
				}
				contents = append(contents, &genai.Content{Role: genai.RoleModel, Parts: parts})
				var answers []*genai.Part
				for _, part := range parts {
					if fc := part.FunctionCall; fc != nil {
						answers = append(answers, &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: fc.ID, Name: fc.Name, Response: map[string]any{"output": "a.py"}}})
					} else if !part.Thought {
						text += part.Text
					}
				}
				if answers != nil {
					contents = append(contents, &genai.Content{Role: genai.RoleUser, Parts: answers})
				}
			}
			if text != "Listed twice." || fake.Ledger.Verified() != 3 {
				t.Fatalf("text %q, signatures verified %d", text, fake.Ledger.Verified())
			}
			contents[1].Parts[len(contents[1].Parts)-1].ThoughtSignature = nil
			_, _, err = ask(contents[:len(contents)-1])
			var apiErr genai.APIError
			if !errors.As(err, &apiErr) || apiErr.Code != 400 || apiErr.Status != "INVALID_ARGUMENT" ||
				!strings.Contains(apiErr.Message, "Function call is missing a thought_signature") {
				t.Fatalf("want Google's refusal passed through, got %v", err)
			}
		})
	}
}

// The streamed JSON array (streamGenerateContent without alt=sse) and the
// whole JSON answer reach a raw client as the fake sent them, and a
// request without a key gets Google's 403 from the upstream.
func TestGeminiStreamedArrayThroughTheProxy(t *testing.T) {
	fake := geminitest.NewServer()
	fake.Script = func(string, *geminitest.Request) (string, []geminitest.Call) { return "Three words here.", nil }
	up := httptest.NewServer(fake)
	t.Cleanup(up.Close)
	p := startProxy(t, Config{Upstream: up.URL + "/v1"})
	body := `{"contents":[{"role":"user","parts":[{"text":"Say three words."}]}]}`
	key := map[string]string{"x-goog-api-key": "k"}
	code, got := sendGemini(t, "POST", p.URL+"/v1beta/models/gemini-3-flash-preview:streamGenerateContent", key, body)
	var chunks []map[string]any
	if code != 200 || json.Unmarshal([]byte(got), &chunks) != nil || len(chunks) != 3 || chunks[2]["usageMetadata"] == nil {
		t.Fatalf("streamed array: %d %s", code, got)
	}
	code, got = sendGemini(t, "POST", p.URL+"/v1beta/models/gemini-3-flash-preview:generateContent", key, body)
	if code != 200 || !strings.Contains(got, `"text":"Three words here.","thoughtSignature":"`) {
		t.Fatalf("JSON: %d %s", code, got)
	}
	code, got = sendGemini(t, "POST", p.URL+"/v1beta/models/gemini-3-flash-preview:generateContent", nil, body)
	if code != 403 || !strings.Contains(got, `"status": "PERMISSION_DENIED"`) {
		t.Fatalf("no key: %d %s", code, got)
	}
}
