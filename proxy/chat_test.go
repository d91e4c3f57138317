package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/wire/chat"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/state"
)

// bigLog is a build log large enough to be squashed.
func bigLog() string {
	var b strings.Builder
	for i := 0; i < 400; i++ {
		b.WriteString("INFO  compiling module pkg/widget/file_" + strconv.Itoa(i) + ".go ok\n")
	}
	b.WriteString("ERROR pkg/widget/server.go:142: undefined: handlerFunc\n")
	b.WriteString("BUILD FAILED in 12s\n")
	return b.String()
}

// Through the real proxy with the official client, in both stream modes:
// the upstream gets the squashed body, the client is told the token counts,
// the record holds what the upstream reported, and a client that did not
// ask for usage never sees a usage chunk.
func TestChatIsSquashedCountedAndRecorded(t *testing.T) {
	up := openaitest.New(t)
	deps, st := chatDeps(t)
	p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
	client := openai.NewClient(option.WithBaseURL(p.BaseURL()), option.WithAPIKey("sk-agent"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: toolTurn()}
	const conv = "conv-42"

	for _, stream := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			var headers http.Header
			opts := []option.RequestOption{
				option.WithHeader("X-Session-ID", conv),
				option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
					resp, err := next(r)
					if resp != nil {
						headers = resp.Header
					}
					return resp, err
				}),
			}
			var content string
			if stream {
				s := client.Chat.Completions.NewStreaming(context.Background(), params, opts...)
				acc := openai.ChatCompletionAccumulator{}
				for s.Next() {
					chunk := s.Current()
					if chunk.JSON.Usage.Valid() && chunk.Usage.PromptTokens > 0 {
						t.Errorf("client got a usage chunk it did not ask for: %s", chunk.RawJSON())
					}
					acc.AddChunk(chunk)
				}
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
				content = acc.Choices[0].Message.Content
				if !gjson.GetBytes(up.Last(t).Body, "stream_options.include_usage").Bool() {
					t.Error("ctxpress did not ask the upstream for usage")
				}
			} else {
				got, err := client.Chat.Completions.New(context.Background(), params, opts...)
				if err != nil {
					t.Fatal(err)
				}
				content = got.Choices[0].Message.Content
			}
			if content != up.Reply {
				t.Fatalf("content %q", content)
			}

			sent := up.Last(t).Body
			toolOut := gjson.GetBytes(sent, "messages.3.content").String()
			if len(toolOut) >= len(bigLog()) || !strings.Contains(toolOut, "undefined: handlerFunc") || !strings.Contains(toolOut, "BUILD FAILED") {
				t.Fatalf("upstream got an unsquashed or lossy tool output (%d bytes): %.300s", len(toolOut), toolOut)
			}
			before, _ := strconv.Atoi(headers.Get(HeaderTokensBefore))
			after, _ := strconv.Atoi(headers.Get(HeaderTokensAfter))
			if before <= after || after <= 0 || headers.Get(HeaderConversation) != conv {
				t.Fatalf("headers: before %q after %q conversation %q", headers.Get(HeaderTokensBefore), headers.Get(HeaderTokensAfter), headers.Get(HeaderConversation))
			}
			if want := deps.Pipeline.Counter(); want != nil {
				if n, _ := want.CountRequest(chat.Format{}, sent); n != after && !stream {
					t.Errorf("X-Ctxpress-Tokens-After %d, but the body sent counts %d", after, n)
				}
			}

			key := state.NewKey([]byte("Bearer sk-agent"), conv)
			reported := openaitest.PromptTokens(sent)
			waitFor(t, func() bool {
				rec, ok, _ := st.Get(key)
				return ok && rec.CurrentLine().Calibration.LastInput == reported
			}, "the record to hold the upstream's input tokens")
			rec, _, _ := st.Get(key)
			l := rec.CurrentLine()
			if (l.Calibration.LastEstimate != after && !stream) || rec.Model != "gpt-4o" || l.Calibration.Ratio < 0.5 || l.Calibration.Ratio > 2 {
				t.Fatalf("record: %+v", rec)
			}
			if other, ok, _ := st.Get(state.NewKey([]byte("Bearer someone-else"), conv)); ok {
				t.Fatalf("another API key sees the record: %+v", other)
			}
		})
	}
	key := state.NewKey([]byte("Bearer sk-agent"), conv)
	waitFor(t, func() bool { rec, _, _ := st.Get(key); return rec.Requests == 2 }, "both turns recorded")
	rec, _, _ := st.Get(key)
	if rec.Requests != 2 || rec.TokensSaved <= 0 {
		t.Fatalf("counters: requests %d saved %d", rec.Requests, rec.TokensSaved)
	}
}

// A client that asked for usage gets the upstream's usage chunk untouched.
func TestStreamUsageKeptWhenAsked(t *testing.T) {
	up := openaitest.New(t)
	deps, _ := chatDeps(t)
	p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	resp := postChat(t, context.Background(), p.URL, body)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(got), `"choices":[],`) || !strings.Contains(string(got), `"prompt_tokens":`) {
		t.Fatalf("usage chunk missing: %s", got)
	}
	if string(up.Last(t).Body) != body {
		t.Fatalf("a body that needed no change was changed: %s", up.Last(t).Body)
	}
}

// Bodies ctxpress does not understand go upstream exactly as sent.
func TestNonChatBodiesPassUnchanged(t *testing.T) {
	up := openaitest.New(t)
	deps, _ := chatDeps(t)
	p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
	for _, body := range []string{`{"model":"m","messages":[`, `{"model":"m","prompt":"legacy"}`, `[1,2,3]`, ``} {
		resp := postChat(t, context.Background(), p.URL, body)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if got := string(up.Last(t).Body); got != body {
			t.Fatalf("body changed: sent %q, upstream got %q", body, got)
		}
		if resp.Header.Get(HeaderTokensBefore) != "" {
			t.Fatalf("token headers on a body ctxpress did not understand (%q)", body)
		}
	}
}

// The SSE stream the client gets, when it did not ask for usage, has every
// upstream event but the usage-only one, in order.
func TestStreamWithoutUsageMatchesUpstreamOtherwise(t *testing.T) {
	up := openaitest.New(t)
	deps, _ := chatDeps(t)
	p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
	resp := postChat(t, context.Background(), p.URL, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var events []string
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data: ") {
			events = append(events, strings.TrimPrefix(line, "data: "))
		}
	}
	if len(events) < 3 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("events: %v", events)
	}
	for _, e := range events[:len(events)-1] {
		var chunk struct {
			Choices []json.RawMessage `json:"choices"`
		}
		if err := json.Unmarshal([]byte(e), &chunk); err != nil || len(chunk.Choices) == 0 {
			t.Fatalf("unexpected event %s", e)
		}
	}
}

// qwen-code's read_file answers a second read of an unchanged file with a
// stub that points back to the first ("[File b.py unchanged since last
// read ...]"). Dedup replaced the first read by "superseded by a later
// call": the upstream got neither copy of the file.
func TestRereadStubKeepsTheFileContent(t *testing.T) {
	up := openaitest.New(t)
	deps, _ := chatDeps(t)
	p := startProxyWith(t, Config{Upstream: up.BaseURL()}, deps)
	client := openai.NewClient(option.WithBaseURL(p.BaseURL()), option.WithAPIKey("sk-agent"), option.WithMaxRetries(0))
	var file strings.Builder
	for i := 0; file.Len() < 12000; i++ {
		fmt.Fprintf(&file, "def func_b_%d(x, y=None):\n    total = x * %d + (y or 3)\n    return total\n\n", i, i)
	}
	read := func(id string) openai.ChatCompletionMessageParamUnion {
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
			ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "read_file", Arguments: `{"file_path":"/repo/b.py"}`}}}}}}
	}
	msgs := []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You are Qwen Code."), openai.UserMessage("List the functions of b.py."),
		read("call_1"), openai.ToolMessage(file.String(), "call_1"),
		read("call_2"), openai.ToolMessage("[File b.py unchanged since last read in this session — refer to the earlier read_file result for its content.]", "call_2"),
	}
	if _, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: msgs},
		option.WithHeader("X-Session-ID", "qwen-reread")); err != nil {
		t.Fatal(err)
	}
	if sent := gjson.GetBytes(up.Last(t).Body, "messages.3.content").String(); sent != file.String() {
		t.Fatalf("the first read was replaced (%d of %d bytes): %.200s", len(sent), file.Len(), sent)
	}
}

// TestTurnHeaderNamesAreWrittenAsFasthttpWritesThem: the turn headers are
// set under names taken as canonical (nothing normalises them), so each
// must be the spelling fasthttp gives it.
func TestTurnHeaderNamesAreWrittenAsFasthttpWritesThem(t *testing.T) {
	for _, name := range [][]byte{turnHeaderKeys.tokensBefore, turnHeaderKeys.tokensAfter, turnHeaderKeys.compacted, turnHeaderKeys.conversation} {
		var h fasthttp.ResponseHeader
		h.Set(strings.ToLower(string(name)), "1")
		var got string
		h.VisitAll(func(k, _ []byte) {
			if strings.EqualFold(string(k), string(name)) {
				got = string(k)
			}
		})
		if got != string(name) {
			t.Errorf("fasthttp writes %q as %q", name, got)
		}
	}
}
