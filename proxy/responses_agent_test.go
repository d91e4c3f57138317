package proxy

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire/chat"
)

// responsesAgent is a codex-shaped agent on the Responses API, driven with
// the official client: a developer prompt and an ask, then every answer's
// output items (reasoning with its encrypted content, calls, messages) sent
// back as input with store false, and an output for every call, as codex
// 0.171 does.
type responsesAgent struct {
	t      *testing.T
	client openai.Client
	key    string // the session-id header and prompt_cache_key, as codex sends its thread id
	items  []responses.ResponseInputItemUnionParam
	calls  int
	// output is the output of the n-th call (from 1); nil: toolOutput.
	output func(n int) string
	header http.Header // of the last answer
	// opts are sent with every request.
	opts []option.RequestOption
}

func newResponsesAgent(t *testing.T, baseURL, key string) *responsesAgent {
	return &responsesAgent{t: t, key: key,
		client: openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey("sk-agent"), option.WithMaxRetries(0)),
		items: []responses.ResponseInputItemUnionParam{
			responsesMessage("You are a coding agent. Use exec_command to inspect the repository.", responses.EasyInputMessageRoleDeveloper),
			responsesMessage("The test TestParseDate fails on leap years; find and fix the bug in dateparse/parse.go.", responses.EasyInputMessageRoleUser),
		}}
}

// responsesMessage is a message item with its "type", as codex sends them.
func responsesMessage(text string, role responses.EasyInputMessageRole) responses.ResponseInputItemUnionParam {
	m := responses.ResponseInputItemParamOfMessage(text, role)
	m.OfMessage.Type = responses.EasyInputMessageTypeMessage
	return m
}

var execCommandTool = responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
	Name: "exec_command", Strict: openai.Bool(false), Description: openai.String("Runs a command in a PTY."),
	Parameters: map[string]any{"type": "object", "required": []string{"cmd"},
		"properties": map[string]any{"cmd": map[string]any{"type": "string"}}},
}}

func (a *responsesAgent) params() responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: a.items},
		Tools: []responses.ToolUnionParam{execCommandTool}, Store: openai.Bool(false),
		Include:           []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
		PromptCacheKey:    openai.String(a.key),
		ParallelToolCalls: openai.Bool(true),
	}
}

// send makes the agent's next request, whole or streamed, and returns the
// response (a stream's from response.completed).
func (a *responsesAgent) send(stream bool, extra ...option.RequestOption) (*responses.Response, error) {
	opts := append([]option.RequestOption{option.WithHeader("session-id", a.key),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			resp, err := next(r)
			if resp != nil {
				a.header = resp.Header
			}
			return resp, err
		})}, a.opts...)
	opts = append(opts, extra...)
	return openaitest.Respond(a.client, a.params(), stream, opts...)
}

var errNoCompleted = openaitest.ErrNoCompleted

// turn sends the next request, fails the test unless it is answered, and
// appends the answer's items and an output for each call.
func (a *responsesAgent) turn(stream bool, extra ...option.RequestOption) *responses.Response {
	a.t.Helper()
	r, err := a.send(stream, extra...)
	if err != nil {
		var apiErr *openai.Error
		if errors.As(err, &apiErr) {
			a.t.Fatalf("turn refused: %d %s", apiErr.StatusCode, apiErr.RawJSON())
		}
		a.t.Fatalf("turn: %v", err)
	}
	a.take(r)
	return r
}

// take appends r's output items to the history, and the output of each
// call after them.
func (a *responsesAgent) take(r *responses.Response) {
	var outputs []responses.ResponseInputItemUnionParam
	for _, it := range r.Output {
		switch it.Type {
		case "reasoning":
			p := it.AsReasoning().ToParam()
			a.items = append(a.items, responses.ResponseInputItemUnionParam{OfReasoning: &p})
		case "function_call":
			fc := it.AsFunctionCall()
			p := fc.ToParam()
			a.items = append(a.items, responses.ResponseInputItemUnionParam{OfFunctionCall: &p})
			a.calls++
			out := toolOutput(a.calls)
			if a.output != nil {
				out = a.output(a.calls)
			}
			o := responses.ResponseInputItemParamOfFunctionCallOutput(out)
			o.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
			outputs = append(outputs, o)
		case "message":
			p := it.AsMessage().ToParam()
			a.items = append(a.items, responses.ResponseInputItemUnionParam{OfOutputMessage: &p})
		default:
			// Any other item goes back as it came; a call of another
			// kind gets its kind's output, paired by its id.
			a.items = append(a.items, rawItem(it.RawJSON()))
			if out := kindOutput(gjson.Parse(it.RawJSON()), a.calls+1); out != "" {
				a.calls++
				outputs = append(outputs, rawItem(out))
			}
		}
	}
	a.items = append(a.items, outputs...)
}

// rawItem is an input item sent as the raw JSON given.
func rawItem(raw string) responses.ResponseInputItemUnionParam {
	p := param.Override[responses.ResponseInputItemCompactionTriggerParam](json.RawMessage(raw))
	return responses.ResponseInputItemUnionParam{OfCompactionTrigger: &p}
}

// kindOutput is the output a client sends for call (its n-th), in the
// call's kind's shape; "" when call is no call.
func kindOutput(call gjson.Result, n int) string {
	id := jsonText(call.Get("call_id").Str)
	switch call.Get("type").Str {
	case "shell_call":
		return `{"type":"shell_call_output","call_id":` + id + `,"output":[{"stdout":` + jsonText(toolOutput(n)) +
			`,"stderr":"","outcome":{"type":"exit","exit_code":0}}]}`
	case "apply_patch_call":
		return `{"type":"apply_patch_call_output","call_id":` + id + `,"status":"completed","output":` + jsonText(toolOutput(n)) + `}`
	case "computer_call":
		return `{"type":"computer_call_output","call_id":` + id + `,"output":{"type":"computer_screenshot","image_url":"data:image/png;base64,` +
			base64.StdEncoding.EncodeToString([]byte(toolOutput(n))) + `"}}`
	case "mcp_approval_request":
		return `{"type":"mcp_approval_response","approval_request_id":` + jsonText(call.Get("id").Str) + `,"approve":true}`
	}
	return ""
}

func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// ask appends a user message.
func (a *responsesAgent) ask(text string) {
	a.items = append(a.items, responsesMessage(text, responses.EasyInputMessageRoleUser))
}

// responsesDeps is the production pipeline (squash with its own counter,
// dedup) and a real bbolt store.
func responsesDeps(t *testing.T) (Deps, state.Store) {
	t.Helper()
	st := openStoreAt(t, filepath.Join(t.TempDir(), "ctxpress.db"))
	t.Cleanup(func() { st.Close() })
	p := rewrite.New(rewrite.Config{Format: chat.Format{}, Squash: &squash.Config{}, Dedup: rewrite.DefaultDedupConfig()})
	return Deps{Pipeline: p, Store: st}, st
}

// turnsOf waits for n turns of the conversation key to be recorded, and
// returns them.
func turnsOf(t *testing.T, p *testProxy, st state.Store, key string, n int) []state.Turn {
	t.Helper()
	var rec state.Record
	waitFor(t, func() bool {
		var ok bool
		rec, ok, _ = st.Get(state.NewKey([]byte("Bearer sk-agent"), key))
		return ok && len(rec.Turns) >= n && p.recorderDrained()
	}, fmt.Sprintf("%d turns of %s recorded", n, key))
	return rec.Turns
}

// bigBuildLog is a ~20 KB build log that squash shortens.
func bigBuildLog() string {
	var b strings.Builder
	for i := 0; b.Len() < 20000; i++ {
		fmt.Fprintf(&b, "[%04d] compiling module dateparse/internal/pkg%03d ... ok (%d ms)\n", i, i%97, 10+i%13)
	}
	b.WriteString("error: dateparse/parse.go:42: undefined: isLeap\nbuild failed\n")
	return b.String()
}
