//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// responsesConvo is a scripted codex-shaped tool conversation on the
// Responses API: a developer prompt, the ask, then per turn the model's
// reply, an exec_command call and its output in codex 0.171's text form.
type responsesConvo struct {
	items []responses.ResponseInputItemUnionParam
	turn  int
	key   string // prompt_cache_key, codex's thread id
}

func newResponsesConvo(key string) *responsesConvo {
	return &responsesConvo{key: key, items: []responses.ResponseInputItemUnionParam{
		message("You are a coding agent. Use exec_command to inspect the repository, then fix the failing test.", responses.EasyInputMessageRoleDeveloper),
		message("The test TestParseDate fails on leap years. Find the bug in dateparse/parse.go and fix it.", responses.EasyInputMessageRoleUser),
	}}
}

// responsesConvoAt is a conversation already n turns in, with the replies
// the model would have given left as "ok": what the overflow test sends
// directly and through ctxpress.
func responsesConvoAt(key string, n int) *responsesConvo {
	c := newResponsesConvo(key)
	for i := 0; i < n; i++ {
		c.advance("ok")
	}
	return c
}

// message is a message item with its "type": llama-server refuses an
// assistant message without it ("Cannot determine type of 'item'").
func message(text string, role responses.EasyInputMessageRole) responses.ResponseInputItemUnionParam {
	m := responses.ResponseInputItemParamOfMessage(text, role)
	m.OfMessage.Type = responses.EasyInputMessageTypeMessage
	return m
}

var execTool = responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
	Name: "exec_command", Strict: openai.Bool(false), Description: openai.String("Runs a command in a PTY."),
	Parameters: map[string]any{"type": "object", "required": []string{"cmd"},
		"properties": map[string]any{"cmd": map[string]any{"type": "string"}}},
}}

func (c *responsesConvo) params() responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model: modelName, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: c.items},
		Tools: []responses.ToolUnionParam{execTool}, MaxOutputTokens: openai.Int(16), Temperature: openai.Float(0),
		Store: openai.Bool(false), PromptCacheKey: openai.String(c.key),
	}
}

// codexOutput is a ~250-byte exec result as codex 0.171 words it.
func codexOutput(turn int) string {
	out := toolOutput(turn)
	return fmt.Sprintf("Chunk ID: %06x\nWall time: 0.0102 seconds\nProcess exited with code 0\nOriginal token count: %d\nOutput:\n%s", 0xa38788+turn, len(out)/4, out)
}

// advance appends the model's reply and the next scripted call and output.
func (c *responsesConvo) advance(reply string) {
	c.turn++
	id := "call_" + strconv.Itoa(c.turn)
	if reply != "" {
		c.items = append(c.items, message(reply, responses.EasyInputMessageRoleAssistant))
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput(codexOutput(c.turn))
	out.OfFunctionCallOutput.CallID = openai.String(id)
	c.items = append(c.items,
		responses.ResponseInputItemParamOfFunctionCall(fmt.Sprintf(`{"cmd":"sed -n %d,%dp dateparse/parse.go"}`, c.turn*10, c.turn*10+8), id, "exec_command"),
		out)
}

// describe is an error with the server's body when it has one.
func describe(err error) string {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		return fmt.Sprintf("%d %s", apiErr.StatusCode, apiErr.RawJSON())
	}
	return err.Error()
}

// respond sends the conversation's next request, whole or streamed (the
// answer then is response.completed's; a stream without it is an error).
func respond(client openai.Client, c *responsesConvo, stream bool, opts ...option.RequestOption) (*responses.Response, error) {
	return openaitest.Respond(client, c.params(), stream, opts...)
}

// A codex-shaped Responses tool conversation through ctxpress with the
// official client, streamed and not: every turn is answered, and the usage
// the client gets (from the JSON answer, from response.completed) is the
// server's own count of that request, which the same request sent directly
// gets too.
func TestResponsesThroughCtxpress(t *testing.T) {
	srv := startLlama(t)
	cp := startCtxpress(t, srv.URL(), filepath.Join(t.TempDir(), "ctxpress.db"), "")
	via := openai.NewClient(option.WithBaseURL(cp.BaseURL()), option.WithAPIKey("sk-e2e"), option.WithMaxRetries(0))
	direct := openai.NewClient(option.WithBaseURL(srv.URL()), option.WithAPIKey("sk-e2e"), option.WithMaxRetries(0))
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
			key := "responses-" + strconv.FormatBool(stream)
			c := newResponsesConvo(key)
			for turn := 1; turn <= 4; turn++ {
				got, err := respond(via, c, stream, option.WithHeader("session-id", key))
				if err != nil {
					t.Fatalf("turn %d through ctxpress: %s", turn, describe(err))
				}
				text, u := got.OutputText(), got.Usage
				if text == "" || u.InputTokens == 0 || u.TotalTokens != u.InputTokens+u.OutputTokens || !u.JSON.InputTokensDetails.Valid() {
					t.Fatalf("turn %d: text %q, usage %s", turn, text, u.RawJSON())
				}
				// The server counts the same request the same way when
				// it comes directly.
				want, err := respond(direct, c, false)
				if err != nil {
					t.Fatalf("turn %d direct: %s", turn, describe(err))
				}
				if u.InputTokens != want.Usage.InputTokens {
					t.Fatalf("turn %d: the client got input_tokens %d through ctxpress, the server counts %d for this request", turn, u.InputTokens, want.Usage.InputTokens)
				}
				// ctxpress read the same usage, from the JSON answer or from
				// response.completed, and took the turn as a whole one.
				cp.waitLog("request", func(l map[string]any) bool {
					return l["conversation"] == key && num(l["input_tokens"]) == int(u.InputTokens) && l["error"] == nil && (l["stream"] == true) == stream
				})
				t.Logf("turn %d: input_tokens %d (cached %d), output %d: %q", turn, u.InputTokens, u.InputTokensDetails.CachedTokens, u.OutputTokens, text)
				c.advance(text)
			}
		})
	}
}

// The headline for codex users: a Responses tool conversation that
// overflows the 2048-token window when sent directly is answered on every
// turn through ctxpress, streamed and not, and the usage ctxpress records
// is the server's.
func TestResponsesOutgrowTheWindow(t *testing.T) {
	srv := startLlama(t)
	direct := openai.NewClient(option.WithBaseURL(srv.URL()), option.WithAPIKey("sk-e2e"), option.WithMaxRetries(0))
	refusedAt := 0
	for turn := 1; turn <= 30 && refusedAt == 0; turn++ {
		_, err := respond(direct, responsesConvoAt("direct", turn-1), false)
		var apiErr *openai.Error
		switch {
		case errors.As(err, &apiErr) && apiErr.StatusCode == 400 && apiErr.Type == "exceed_context_size_error":
			refusedAt = turn
		case err != nil:
			t.Fatalf("direct turn %d: %s", turn, describe(err))
		}
	}
	if refusedAt == 0 {
		t.Fatal("the conversation never outgrew the window when sent directly; make turns bigger")
	}
	t.Logf("sent directly, turn %d is refused: over the 2048-token window", refusedAt)

	cp := startCtxpress(t, srv.URL(), filepath.Join(t.TempDir(), "ctxpress.db"),
		"models: {"+modelName+": {context_window: 2048}}\n")
	via := openai.NewClient(option.WithBaseURL(cp.BaseURL()), option.WithAPIKey("sk-e2e"), option.WithMaxRetries(0))
	c := newResponsesConvo("outgrow")
	largest, sent := 0, 0
	for turn := 1; turn <= 2*refusedAt; turn++ {
		stream := turn%2 == 0
		got, err := respond(via, c, stream, option.WithHeader("session-id", "outgrow"))
		if err != nil {
			t.Fatalf("turn %d through ctxpress (stream %v): %s", turn, stream, describe(err))
		}
		if got.Usage.InputTokens >= 2048 || got.OutputText() == "" {
			t.Fatalf("turn %d: %q with %d input tokens", turn, got.OutputText(), got.Usage.InputTokens)
		}
		cp.waitLog("request", func(l map[string]any) bool {
			return l["conversation"] == "outgrow" && num(l["input_tokens"]) == int(got.Usage.InputTokens) && l["error"] == nil
		})
		largest, sent = max(largest, int(got.Usage.InputTokens)), sent+int(got.Usage.InputTokens)
		c.advance(got.OutputText())
	}
	ok := 0
	for _, e := range events(cp) {
		switch e["result"] {
		case "ok":
			ok++
		case "failed":
			t.Errorf("a compaction failed: %v", e) // the summary call in Responses form, to the server itself
		}
	}
	if ok == 0 {
		t.Fatal("no compaction through ctxpress")
	}
	t.Logf("direct: refused at turn %d; through ctxpress: %d/%d turns answered, %d input tokens sent, largest request %d, %d compactions; every turn's recorded usage is the server's",
		refusedAt, 2*refusedAt, 2*refusedAt, sent, largest, ok)
}
