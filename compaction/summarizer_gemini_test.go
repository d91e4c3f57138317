package compaction

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// A summary call in Gemini's form goes to the model's generateContent
// under the version's base, its key as x-goog-api-key (never as
// Authorization), and its answer's text is the summary.
func TestSummarizeGemini(t *testing.T) {
	var key string
	up := newSummaryUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		key = r.Header.Get("X-Goog-Api-Key")
		summaryReply(200, `{"candidates":[{"content":{"role":"model","parts":[{"text":"## Goal\nShip it."}]},"finishReason":"STOP"}],`+
			`"usageMetadata":{"promptTokenCount":900,"candidatesTokenCount":40}}`)(w, r)
	})
	res, err := NewSummarizer().Summarize(context.Background(), SummaryRequest{
		BaseURL: up.URL + "/v1beta", API: APIGemini, APIKey: "AIza-summary", Model: "gemini-2.5-flash",
		Prompt: "Summarise.", MaxTokens: 1000, Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if up.path != "/v1beta/models/gemini-2.5-flash:generateContent" || key != "AIza-summary" || up.auth != "" {
		t.Errorf("posted to %s with x-goog-api-key %q, Authorization %q", up.path, key, up.auth)
	}
	if gjson.GetBytes(up.body, "contents.0.parts.0.text").Str != "Summarise." {
		t.Errorf("body %s", up.body)
	}
	if res.Text != "## Goal\nShip it." || res.PromptTokens != 900 {
		t.Errorf("result %+v", res)
	}
}

// The credential of a Gemini summary call: the summariser's or the
// route's key, else the client's Gemini key, each as x-goog-api-key.
func TestGeminiSummaryCredentials(t *testing.T) {
	for _, r := range []struct {
		name      string
		routeKey  string
		creds     Creds
		key, auth string
	}{
		{"the client's key", "", Creds{GoogleKey: "AIza-client"}, "AIza-client", ""},
		{"upstream_api_key over the client's", "AIza-up", Creds{GoogleKey: "AIza-client"}, "AIza-up", ""},
		{"an OAuth client's token", "", Creds{Authorization: "Bearer ya29"}, "", "Bearer ya29"},
	} {
		c := NewEngine(Config{}, Deps{Routes: map[string]Route{APIGemini: {Upstream: "http://h/v1beta", APIKey: r.routeKey}}})
		req := c.summaryRequest(Input{API: APIGemini, Creds: r.creds}, "gemini-2.5-flash", 1000)
		if req.APIKey != r.key || req.Authorization != r.auth || req.API != APIGemini || req.BaseURL != "http://h/v1beta" {
			t.Errorf("%s: %+v", r.name, req)
		}
	}
}
