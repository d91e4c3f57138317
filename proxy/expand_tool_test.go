package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/turn"
)

// The retrieval tool, end to end: a client (the official OpenAI client
// for chat completions and Responses, plain HTTP for Messages) whose tool
// result carries a marker naming ctxpress_expand, ctxpress in front of a
// strict fake model that follows the marker (expandModel), the original
// in ctxpress's store. The client gets the model's final text and that
// answer's usage, and nothing of the call; the model gets the original's
// lines byte for byte, in a request the provider accepts; the tool's
// definition is the same bytes on every request that has tools, and on
// none that has not; the record bills every hidden round.

// expandOriginal is what squash replaced: distinct lines, so that a range
// is checked byte for byte.
func expandOriginal() string {
	var b strings.Builder
	for i := 1; i <= 400; i++ {
		fmt.Fprintf(&b, "--- FAIL: TestParseDate/case_%03d (0.00s) parse_test.go:%d: got %d, want %d\n", i, 100+i, i*7%31, i*3%29)
	}
	return b.String()
}

// expandLines is the range the marker names.
var expandLines = expand.Lines{From: 211, To: 230}

// expandSetup starts the fake model of format and ctxpress (the tool on,
// a memory store) in front of it, with the original kept in namespace ns;
// it returns the tool result whose marker names the original and the
// lines the model must get back.
func expandSetup(t *testing.T, format, ns string) (*expandModel, *testProxy, state.Store, string, string) {
	t.Helper()
	up := newExpandModel(t, format)
	st := state.NewMemory()
	t.Cleanup(func() { st.Close() })
	p := startProxyWith(t, Config{Upstream: up.BaseURL(), ExpandTool: true}, Deps{Pipeline: pipelineForTest(), Store: st})
	orig := expandOriginal()
	o := expand.New(expand.KindSquash, "bash", orig)
	if err := st.(state.Originals).PutOriginals(ns, []expand.Original{o}); err != nil {
		t.Fatal(err)
	}
	result := "go test ./dateparse: 400 tests failed\n[ctxpress: 380 similar lines squashed; " + expand.Ways{Tool: true}.Back(o.Ref, expandLines) + "]"
	return up, p, st, result, expand.Slice(orig, expandLines)
}

// checkExpanded checks what the fake saw over a client's two turns: the
// first answered after one hidden round, the second as it came.
func checkExpanded(t *testing.T, up *expandModel, st state.Store, key state.Key, want string) {
	t.Helper()
	bodies, defs, results, usages := up.snapshot()
	if len(bodies) != 3 {
		t.Fatalf("the model got %d requests, want 3 (the turn, its hidden round, the next turn)", len(bodies))
	}
	if len(results) != 1 || results[0] != want {
		t.Fatalf("the model read %d results of %s; the first:\n%q\nwant the original's lines byte for byte:\n%q", len(results), expand.ToolName, results, want)
	}
	for i, d := range defs {
		if d == "" || strings.HasPrefix(d, "not last") || d != defs[0] {
			t.Errorf("request %d offers the tool as %q; the first did as %q", i+1, d, defs[0])
		}
	}
	if !strings.Contains(defs[0], expand.ToolDescription) || !strings.Contains(defs[0], expand.ToolParameters) {
		t.Errorf("the definition %s is not the tool's", defs[0])
	}
	if bytes.Contains(bodies[2], []byte("call_1_b")) {
		t.Error("the client's next turn carries the hidden exchange")
	}
	waitFor(t, func() bool {
		rec, ok, _ := st.Get(key)
		return ok && len(rec.Turns) == 2
	}, "both turns recorded")
	rec, _, _ := st.Get(key)
	var in, out int64
	for _, u := range usages {
		in, out = in+int64(u[0]), out+int64(u[1])
	}
	if rec.Usage.Input != in || rec.Usage.Output != out || rec.Usage.Calls != 2 {
		t.Errorf("the record bills %+v; the model answered %d calls of %d input and %d output tokens in 2 turns", rec.Usage, len(usages), in, out)
	}
	if rec.Turns[0].InputTokens != usages[0][0] {
		t.Errorf("turn 1 counts %d input tokens, the request as forwarded %d", rec.Turns[0].InputTokens, usages[0][0])
	}
}

// checkNoTools sends a request without tools, which must reach the model
// without the tool.
func checkNoTools(t *testing.T, up *expandModel, send func()) {
	t.Helper()
	before, _, _, _ := up.snapshot()
	send()
	bodies, _, _, _ := up.snapshot()
	if len(bodies) != len(before)+1 || bytes.Contains(bodies[len(bodies)-1], []byte(expand.ToolName)) {
		t.Fatalf("a request without tools reached the model as %s", bodies[len(bodies)-1])
	}
}

// tee keeps every byte of the answers the client read.
func tee(raw *bytes.Buffer) option.RequestOption {
	return option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(r)
		if resp != nil {
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.TeeReader(resp.Body, raw), resp.Body}
		}
		return resp, err
	})
}

func TestExpandToolChat(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		stream, includeUsage, gzip bool
	}{{"whole", false, false, false}, {"whole, gzipped", false, false, true}, {"streamed", true, true, false}, {"streamed, usage asked by ctxpress", true, false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			up, p, st, result, want := expandSetup(t, "chat", state.Namespace([]byte("Bearer sk-agent")))
			up.gzip = tc.gzip
			client := openai.NewClient(option.WithBaseURL(p.BaseURL()), option.WithAPIKey("sk-agent"), option.WithMaxRetries(0))
			call := openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: "call_1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "bash", Arguments: `{"command":"go test ./dateparse"}`}}}
			history := []openai.ChatCompletionMessageParamUnion{
				openai.SystemMessage("You are a coding agent."),
				openai.UserMessage("Fix the failing date tests."),
				{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{call}}},
				openai.ToolMessage(result, "call_1"),
			}
			send := func(msgs []openai.ChatCompletionMessageParamUnion, tools []openai.ChatCompletionToolUnionParam, session string) (string, openai.CompletionUsage, []byte) {
				var raw bytes.Buffer
				opts := []option.RequestOption{option.WithHeader("X-Session-ID", session), tee(&raw)}
				params := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: msgs, Tools: tools}
				if !tc.stream {
					got, err := client.Chat.Completions.New(context.Background(), params, opts...)
					if err != nil {
						t.Fatal(err)
					}
					return got.Choices[0].Message.Content, got.Usage, raw.Bytes()
				}
				if tc.includeUsage {
					params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
				}
				s := client.Chat.Completions.NewStreaming(context.Background(), params, opts...)
				acc := openai.ChatCompletionAccumulator{}
				for s.Next() {
					acc.AddChunk(s.Current())
				}
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
				if len(acc.Choices[0].Message.ToolCalls) != 0 {
					t.Errorf("the client got calls: %+v", acc.Choices[0].Message.ToolCalls)
				}
				return acc.Choices[0].Message.Content, acc.Usage, raw.Bytes()
			}
			text, usage, raw := send(history, bashTool, "expand-chat")
			firstLine, _, _ := strings.Cut(want, "\n")
			if text != "The missing lines begin: "+firstLine {
				t.Fatalf("the client got %q", text)
			}
			if bytes.Contains(raw, []byte(expand.ToolName)) || bytes.Contains(raw, []byte("call_1_")) {
				t.Fatalf("the client saw the hidden exchange:\n%s", raw)
			}
			_, _, _, usages := up.snapshot()
			final := usages[len(usages)-1]
			switch {
			case tc.stream && !tc.includeUsage:
				if usage.PromptTokens != 0 || bytes.Contains(raw, []byte(`"usage"`)) {
					t.Errorf("the client got the usage ctxpress asked for: %+v", usage)
				}
			case usage.PromptTokens != int64(final[0]) || usage.CompletionTokens != int64(final[1]):
				t.Errorf("the client got usage %d/%d, the final answer's is %v", usage.PromptTokens, usage.CompletionTokens, final)
			}
			history = append(history, openai.AssistantMessage(text), openai.UserMessage("Thanks; now fix it."))
			if text, _, _ := send(history, bashTool, "expand-chat"); text != "Done." {
				t.Fatalf("turn 2: %q", text)
			}
			checkExpanded(t, up, st, state.NewKey([]byte("Bearer sk-agent"), "expand-chat"), want)
			if up.mu.Lock(); tc.gzip && up.gzipped != 3 {
				t.Errorf("%d answers were gzipped, want all 3", up.gzipped)
			}
			up.mu.Unlock()
			checkNoTools(t, up, func() { send([]openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, nil, "no-tools") })
		})
	}
}

func TestExpandToolResponses(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			up, p, st, result, want := expandSetup(t, "responses", state.Namespace([]byte("Bearer sk-agent")))
			client := openai.NewClient(option.WithBaseURL(p.BaseURL()), option.WithAPIKey("sk-agent"), option.WithMaxRetries(0))
			out := responses.ResponseInputItemParamOfFunctionCallOutput(result)
			out.OfFunctionCallOutput.CallID = openai.String("call_1")
			items := []responses.ResponseInputItemUnionParam{
				responsesMessage("You are a coding agent.", responses.EasyInputMessageRoleDeveloper),
				responsesMessage("Fix the failing date tests.", responses.EasyInputMessageRoleUser),
				responses.ResponseInputItemParamOfFunctionCall(`{"cmd":"go test ./dateparse"}`, "call_1", "exec_command"),
				out,
			}
			send := func(items []responses.ResponseInputItemUnionParam, tools []responses.ToolUnionParam, session string) (*responses.Response, []byte) {
				var raw bytes.Buffer
				params := responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items},
					Tools: tools, Store: openai.Bool(false)}
				resp, err := openaitest.Respond(client, params, stream, option.WithHeader("session-id", session), tee(&raw))
				if err != nil {
					t.Fatal(err)
				}
				return resp, raw.Bytes()
			}
			resp, raw := send(items, []responses.ToolUnionParam{execCommandTool}, "expand-responses")
			firstLine, _, _ := strings.Cut(want, "\n")
			if resp.OutputText() != "The missing lines begin: "+firstLine || len(resp.Output) != 1 {
				t.Fatalf("the client got %d items, text %q", len(resp.Output), resp.OutputText())
			}
			if bytes.Contains(raw, []byte(expand.ToolName)) || bytes.Contains(raw, []byte("call_1_")) {
				t.Fatalf("the client saw the hidden exchange:\n%s", raw)
			}
			_, _, _, usages := up.snapshot()
			if final := usages[len(usages)-1]; resp.Usage.InputTokens != int64(final[0]) || resp.Usage.OutputTokens != int64(final[1]) {
				t.Errorf("the client got usage %d/%d, the final answer's is %v", resp.Usage.InputTokens, resp.Usage.OutputTokens, final)
			}
			items = append(items, responsesMessage(resp.OutputText(), responses.EasyInputMessageRoleAssistant),
				responsesMessage("Thanks; now fix it.", responses.EasyInputMessageRoleUser))
			if resp, _ := send(items, []responses.ToolUnionParam{execCommandTool}, "expand-responses"); resp.OutputText() != "Done." {
				t.Fatalf("turn 2: %q", resp.OutputText())
			}
			checkExpanded(t, up, st, state.NewKey([]byte("Bearer sk-agent"), "expand-responses"), want)
			checkNoTools(t, up, func() {
				send([]responses.ResponseInputItemUnionParam{responsesMessage("hi", responses.EasyInputMessageRoleUser)}, nil, "no-tools")
			})
		})
	}
}

func TestExpandToolMessages(t *testing.T) {
	const key = "sk-ant-expand"
	for _, stream := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			up, p, st, result, want := expandSetup(t, "messages", state.Namespace([]byte("x-api-key\x00"+key)))
			tools := []any{map[string]any{"name": "bash", "description": "Runs a command.",
				"input_schema": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}}}
			msgs := []any{
				map[string]any{"role": "user", "content": "Fix the failing date tests."},
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": map[string]any{"command": "go test ./dateparse"}}}},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": result}}},
			}
			send := func(msgs, tools []any, session string) (text string, usage [2]int, raw []byte) {
				body := map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "You are a coding agent.", "messages": msgs, "stream": stream}
				if tools != nil {
					body["tools"] = tools
				}
				b, _ := json.Marshal(body)
				req, _ := http.NewRequest("POST", p.URL+"/v1/messages", bytes.NewReader(b))
				req.Header.Set("x-api-key", key)
				req.Header.Set("anthropic-version", "2023-06-01")
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Claude-Code-Session-Id", session)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				raw, _ = io.ReadAll(resp.Body)
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, raw)
				}
				text, usage = readExpandAnswer(t, raw, stream)
				return text, usage, raw
			}
			text, usage, raw := send(msgs, tools, "expand-messages")
			firstLine, _, _ := strings.Cut(want, "\n")
			if text != "The missing lines begin: "+firstLine {
				t.Fatalf("the client got %q", text)
			}
			if bytes.Contains(raw, []byte(expand.ToolName)) || bytes.Contains(raw, []byte("call_1_")) {
				t.Fatalf("the client saw the hidden exchange:\n%s", raw)
			}
			_, _, _, usages := up.snapshot()
			if final := usages[len(usages)-1]; usage != final {
				t.Errorf("the client got usage %v, the final answer's is %v", usage, final)
			}
			msgs = append(msgs, map[string]any{"role": "assistant", "content": text}, map[string]any{"role": "user", "content": "Thanks; now fix it."})
			if text, _, _ := send(msgs, tools, "expand-messages"); text != "Done." {
				t.Fatalf("turn 2: %q", text)
			}
			checkExpanded(t, up, st, state.NewKey([]byte("x-api-key\x00"+key), "expand-messages"), want)
			checkNoTools(t, up, func() { send([]any{map[string]any{"role": "user", "content": "hi"}}, nil, "no-tools") })
		})
	}
}

// readExpandAnswer reads a Messages answer's text and usage (input,
// output), whole or from its events; it fails the test on a tool_use.
func readExpandAnswer(t *testing.T, raw []byte, stream bool) (string, [2]int) {
	t.Helper()
	if !stream {
		var text strings.Builder
		for _, b := range gjson.GetBytes(raw, "content").Array() {
			if b.Get("type").String() != "text" {
				t.Fatalf("the client got a %s block", b.Get("type"))
			}
			text.WriteString(b.Get("text").String())
		}
		return text.String(), [2]int{int(gjson.GetBytes(raw, "usage.input_tokens").Int()), int(gjson.GetBytes(raw, "usage.output_tokens").Int())}
	}
	var text strings.Builder
	var usage [2]int
	stopped := false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		ev := gjson.Parse(data)
		switch ev.Get("type").String() {
		case "message_start":
			usage[0] = int(ev.Get("message.usage.input_tokens").Int())
		case "content_block_start":
			if typ := ev.Get("content_block.type").String(); typ != "text" {
				t.Fatalf("the client got a %s block", typ)
			}
		case "content_block_delta":
			text.WriteString(ev.Get("delta.text").String())
		case "message_delta":
			usage[1] = int(ev.Get("usage.output_tokens").Int())
		case "message_stop":
			stopped = true
		}
	}
	if !stopped {
		t.Fatal("the client's stream has no message_stop")
	}
	return text.String(), usage
}

// A reference kept in another namespace is not found: the model reads
// an error it can act on, never the other client's text; and a model that
// keeps calling the tool gets MaxExpandRounds answers, after which its
// answer is the client's as it came.
func TestExpandToolRoundsAndNamespaces(t *testing.T) {
	up, p, _, result, _ := expandSetup(t, "chat", state.Namespace([]byte("Bearer sk-other")))
	up.loop = true
	client := openai.NewClient(option.WithBaseURL(p.BaseURL()), option.WithAPIKey("sk-agent"), option.WithMaxRetries(0))
	call := openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
		ID: "call_1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "bash", Arguments: `{"command":"go test"}`}}}
	got, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-4o", Tools: bashTool,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Fix the tests."),
			{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{call}}},
			openai.ToolMessage(result, "call_1")}})
	if err != nil {
		t.Fatal(err)
	}
	bodies, _, results, _ := up.snapshot()
	if len(bodies) != 1+turn.MaxExpandRounds {
		t.Fatalf("the model was asked %d times, want %d", len(bodies), 1+turn.MaxExpandRounds)
	}
	for i, r := range results {
		if !strings.HasPrefix(r, expand.ToolName+": no original is kept under ") {
			t.Errorf("result %d: %q", i+1, r)
		}
	}
	if tc := got.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Name != expand.ToolName || got.Choices[0].Message.Content != "Once more." {
		t.Errorf("the client got %+v, want the last answer as it came", got.Choices[0].Message)
	}
}
