package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/genai"
)

func geminiClient(t *testing.T, url string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: "k", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: url}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// geminiCLITools is Gemini CLI's shell tool, declared as it declares it.
var geminiCLITools = []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "run_shell_command",
	ParametersJsonSchema: map[string]any{"type": "object", "required": []any{"command"},
		"properties": map[string]any{"command": map[string]any{"type": "string"}, "description": map[string]any{"type": "string"}}}}}}}

// A tool loop driven by Google's own client, streamed and not, gets the
// scripted calls with signatures (sent back and verified), then the text;
// the usage reports the prompt and the prefix it repeats as cached.
func TestGeminiToolTurnsThenText(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			s, ts := start(t, config{steps: []parStep{parseSteps("ls"), parseSteps("cat a.py")}})
			c := geminiClient(t, ts.URL)
			cfg := &genai.GenerateContentConfig{Tools: geminiCLITools, ThinkingConfig: &genai.ThinkingConfig{IncludeThoughts: true}}
			contents := []*genai.Content{genai.NewContentFromText("List the files.", genai.RoleUser)}
			var cmds []string
			text := ""
			for turn := 0; text == "" && turn < 4; turn++ {
				var parts []*genai.Part
				var u *genai.GenerateContentResponseUsageMetadata
				if stream {
					for r, err := range c.Models.GenerateContentStream(context.Background(), "gemini-3-flash-preview", contents, cfg) {
						if err != nil {
							t.Fatalf("turn %d: %v", turn, err)
						}
						parts, u = append(parts, r.Candidates[0].Content.Parts...), r.UsageMetadata
					}
				} else {
					r, err := c.Models.GenerateContent(context.Background(), "gemini-3-flash-preview", contents, cfg)
					if err != nil {
						t.Fatalf("turn %d: %v", turn, err)
					}
					parts, u = r.Candidates[0].Content.Parts, r.UsageMetadata
				}
				if turn > 0 && (u.CachedContentTokenCount == 0 || u.CachedContentTokenCount >= u.PromptTokenCount) {
					t.Fatalf("turn %d: usage %+v", turn, u)
				}
				contents = append(contents, &genai.Content{Role: genai.RoleModel, Parts: parts})
				var answers []*genai.Part
				for _, p := range parts {
					if fc := p.FunctionCall; fc != nil {
						cmds = append(cmds, fmt.Sprint(fc.Args["command"]))
						answers = append(answers, genai.NewPartFromFunctionResponse(fc.Name, map[string]any{"output": "ok"}))
						answers[len(answers)-1].FunctionResponse.ID = fc.ID
					} else if !p.Thought {
						text += p.Text
					}
				}
				if answers != nil {
					contents = append(contents, &genai.Content{Role: genai.RoleUser, Parts: answers})
				}
			}
			if strings.Join(cmds, "|") != "ls|cat a.py" || text != "All done." {
				t.Fatalf("calls %q, text %q", cmds, text)
			}
			if s.geminiLedger.Verified() != 3 {
				t.Fatalf("signatures verified: %d", s.geminiLedger.Verified())
			}

			// The last call's signature altered: Google's refusal.
			contents[3].Parts[len(contents[3].Parts)-1].ThoughtSignature[0] ^= 1
			_, err := c.Models.GenerateContent(context.Background(), "gemini-3-flash-preview", contents[:5], cfg)
			var apiErr genai.APIError
			if !errors.As(err, &apiErr) || apiErr.Code != 400 || apiErr.Message != "Corrupted thought signature." {
				t.Fatalf("got %v", err)
			}
		})
	}
}

func TestGeminiPathsKeysAndWindow(t *testing.T) {
	_, ts := start(t, config{context: 50})
	get := func(method, path, key, body string) (int, string) {
		r, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if key != "" {
			r.Header.Set("x-goog-api-key", key)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	small := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	for _, tc := range []struct {
		method, path, key, body string
		code                    int
		want                    string
	}{
		{"POST", "/v1beta/models/gemini-3-flash-preview:generateContent", "", small, 403, `"status": "PERMISSION_DENIED"`},
		{"POST", "/v1beta/models/gemini-3-flash-preview:generateContent", "k", small, 200, `"finishReason":"STOP"`},
		{"POST", "/v1beta/models/gemini-3-flash-preview:generateContent?key=k", "", `{"contents":[{"role":"system","parts":[{"text":"hi"}]}]}`, 400, "Please use a valid role: user, model."},
		{"POST", "/v1beta/models/gemini-3-flash-preview:generateContent", "k", `{"contents":[{"role":"user","parts":[{"text":"` + strings.Repeat("long ", 60) + `"}]}]}`, 400,
			"The input token count (85) exceeds the maximum number of tokens allowed (50)."},
		{"POST", "/v1beta/models/gemini-3-flash-preview:countTokens", "k", small, 200, `"totalTokens":`},
		{"GET", "/v1beta/models", "k", "", 200, `"models/gemini-3-flash-preview"`},
		{"GET", "/v1/models", "", "", 200, `"object":"list"`},
	} {
		code, body := get(tc.method, tc.path, tc.key, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s: %d %s, want %d with %q", tc.method, tc.path, code, body, tc.code, tc.want)
		}
	}
}
