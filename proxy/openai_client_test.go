package proxy

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/ctxpress/ctxpress/internal/openaitest"
)

// The official Go client, pointed at ctxpress, works as against the upstream.
func TestOfficialClientThroughProxy(t *testing.T) {
	up := openaitest.New(t)
	p := startProxy(t, Config{Upstream: up.BaseURL()})
	client := newOpenAIClient(p.BaseURL())
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
	}

	t.Run("chat", func(t *testing.T) {
		got, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].Message.Content != up.Reply {
			t.Fatalf("content = %q, want %q", got.Choices[0].Message.Content, up.Reply)
		}
		last := up.Last(t)
		if last.Path != "/v1/chat/completions" {
			t.Fatalf("upstream path = %q", last.Path)
		}
		if auth := last.Header.Get("Authorization"); auth != "Bearer sk-test-key" {
			t.Fatalf("upstream Authorization = %q", auth)
		}
		if got.Usage.PromptTokens != int64(openaitest.PromptTokens(last.Body)) {
			t.Fatalf("usage prompt_tokens = %d", got.Usage.PromptTokens)
		}
	})

	t.Run("stream", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if got := acc.Choices[0].Message.Content; got != up.Reply {
			t.Fatalf("streamed content = %q, want %q", got, up.Reply)
		}
	})

	t.Run("models", func(t *testing.T) {
		page, err := client.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
		}
		if strings.Join(ids, ",") != "gpt-4o,tiny" {
			t.Fatalf("models = %v", ids)
		}
	})

	t.Run("embeddings", func(t *testing.T) {
		emb, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: "text-embedding-3-small",
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(emb.Data) != 1 || len(emb.Data[0].Embedding) != 3 || emb.Data[0].Embedding[1] != -0.2 {
			t.Fatalf("embeddings = %+v", emb.Data)
		}
	})
}
