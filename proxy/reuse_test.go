package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

// TestConcurrentAnswersAreNotMixedUp: many agents at once, each answer
// read whole for its usage (into pooled buffers) must reach its own client
// intact: its own content and usage, whatever the sizes of the answers
// around it.
func TestConcurrentAnswersAreNotMixedUp(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		msgs := gjson.GetBytes(body, "messages").Array()
		ask := msgs[len(msgs)-1].Get("content").String()
		var n int
		fmt.Sscanf(ask, "ask %d", &n)
		// Sizes around and above the buffers' first size, so that buffers
		// of every size change hands.
		content := answerFor(ask, []int{40, 3000, 9000, 70000}[n%4])
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":1,"total_tokens":%d}}`,
			content, 100+n, 101+n)
	}))
	t.Cleanup(up.Close)
	deps, _ := chatDeps(t)
	p := startProxyWith(t, Config{Upstream: up.URL + "/v1"}, deps)
	const agents, turns = 8, 25
	var wg sync.WaitGroup
	for a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := openai.NewClient(option.WithBaseURL(p.BaseURL()), option.WithAPIKey("sk-agent"), option.WithMaxRetries(0),
				option.WithHeader("X-Session-ID", fmt.Sprintf("agent-%d", a)))
			for i := range turns {
				n := a*turns + i
				ask := fmt.Sprintf("ask %d", n)
				got, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
					Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(ask)},
				})
				if err != nil {
					t.Errorf("%s: %v", ask, err)
					return
				}
				if want := answerFor(ask, []int{40, 3000, 9000, 70000}[n%4]); got.Choices[0].Message.Content != want {
					t.Errorf("%s: answer of %d bytes is not its own (starts %.40q)", ask, len(got.Choices[0].Message.Content), got.Choices[0].Message.Content)
				}
				if got.Usage.PromptTokens != int64(100+n) {
					t.Errorf("%s: prompt_tokens %d, want %d", ask, got.Usage.PromptTokens, 100+n)
				}
			}
		}()
	}
	wg.Wait()
}

// answerFor is the upstream's answer to ask: about size bytes that name it
// throughout, so any byte of another answer shows.
func answerFor(ask string, size int) string {
	unit := "answer to " + ask + ". "
	return strings.Repeat(unit, max(1, size/len(unit)))
}
