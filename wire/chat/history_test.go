package chat

import (
	"errors"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/chatcheck"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

const historyPrompt = "[Context checkpoint request] Summarise."

// A summary call that continues the conversation sends the forwarded body
// byte for byte up to where the instruction goes, then the instruction as
// the next user text; only stream, the tools' use and the cap change.
func TestHistorySummaryBody(t *testing.T) {
	tools := `"tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}]`
	toolTurn := `[{"role":"system","content":"Be brief."},{"role":"user","content":"Fix the build."},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"make\"}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"error: x.go:3"}]`
	userTurn := `[{"role":"system","content":"Be brief."},{"role":"user","content":"Fix the build."},{"role":"assistant","content":"Done \u2014 it builds."},{"role":"user","content":"Now test it."}]`
	partsTurn := `[{"role":"user","content":"Fix the build."},{"role":"assistant","content":"Done."},{"role":"user","content":[{"type":"text","text":"Now test it."}]}]`
	rows := []struct {
		name  string
		body  string
		rules wire.ParamRules
		// upTo is what the call keeps byte for byte: the body up to where
		// the instruction goes.
		upTo string
		// then is what comes right after it.
		then string
		want map[string]string // top-level members as they must be
	}{
		{"after tool results: the assistant pauses, then one new user message; tools disabled, not streamed",
			`{"messages":` + toolTurn + `,"model":"gpt-4o","max_tokens":16,"stream":true,"stream_options":{"include_usage":true},"temperature":0,` + tools + `,"parallel_tool_calls":false}`,
			wire.ParamRules{}, `error: x.go:3"}`, `,` + pauseReply + `,{"role":"user","content":"[Context checkpoint request] Summarise."}]`,
			map[string]string{"tool_choice": `"none"`, "max_tokens": "2000", "temperature": "0", "parallel_tool_calls": "false", "stream": "", "stream_options": ""}},
		{"after the user's text: the instruction joins it, so no two user messages follow each other",
			`{"model":"local","stream":true,"messages":` + userTurn + `}`,
			wire.ParamRules{}, `"Now test it.`, `\n\n[Context checkpoint request] Summarise."}]`,
			map[string]string{"tool_choice": "", "max_tokens": "2000", "stream": ""}},
		{"after the user's parts: one more text part",
			`{"model":"local","messages":` + partsTurn + `,"max_completion_tokens":50,` + tools + `,"tool_choice":"required"}`,
			wire.ParamRules{}, `"Now test it."}`, `,{"type":"text","text":"[Context checkpoint request] Summarise."}]}]`,
			map[string]string{"tool_choice": `"none"`, "max_tokens": "2000", "max_completion_tokens": ""}},
		{"a reasoning model's cap is max_completion_tokens with headroom",
			`{"model":"o3","messages":` + toolTurn + `,"max_tokens":16,` + tools + `}`,
			wire.ReasoningRules, `error: x.go:3"}`, `,` + pauseReply + `,{"role":"user",`,
			map[string]string{"max_tokens": "", "max_completion_tokens": "18384"}},
		{"legacy functions are disabled as such",
			`{"model":"gpt-3.5-turbo","messages":` + userTurn + `,"functions":[{"name":"bash","parameters":{}}]}`,
			wire.ParamRules{}, `"Now test it.`, `\n\n`,
			map[string]string{"function_call": `"none"`, "tool_choice": ""}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			out, err := SummaryBody(wire.SummaryCall{Model: "ignored", Prompt: historyPrompt, MaxTokens: 2000, History: []byte(r.body)}, r.rules)
			if err != nil {
				t.Fatal(err)
			}
			at := strings.Index(r.body, r.upTo) + len(r.upTo)
			if at < len(r.upTo) {
				t.Fatalf("bad row: %q not in the body", r.upTo)
			}
			kept, wantKept := messagesRaw(out), messagesRaw([]byte(r.body))
			cut := at - gjson.Get(r.body, "messages").Index
			if !strings.HasPrefix(kept, wantKept[:cut]) || !strings.HasPrefix(kept[cut:], r.then) {
				t.Fatalf("messages:\n%s\nwant the body's up to %q, then %q", kept, r.upTo, r.then)
			}
			if msgs := gjson.GetBytes(out, "messages").Array(); !strings.Contains(msgs[len(msgs)-1].Get("content").Raw, "Summarise.") ||
				msgs[len(msgs)-1].Get("role").Str != "user" {
				t.Errorf("the last message is not the user's with the instruction")
			}
			if gjson.Get(r.body, "messages").Index < strings.Index(r.body, `"stream"`) || !strings.Contains(r.body, `"stream"`) {
				// Members before the messages are unchanged: the body's own bytes lead.
				if !strings.HasPrefix(string(out), r.body[:at]) {
					t.Errorf("body does not start with the forwarded body's bytes up to the instruction:\n%s", out)
				}
			}
			for k, v := range r.want {
				if got := gjson.GetBytes(out, k).Raw; got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			gjson.Parse(r.body).ForEach(func(k, v gjson.Result) bool {
				if _, changed := r.want[k.Str]; !changed && k.Str != "messages" && k.Str != "max_tokens" && k.Str != "max_completion_tokens" &&
					gjson.GetBytes(out, k.Str).Raw != v.Raw {
					t.Errorf("%s changed: %s", k.Str, gjson.GetBytes(out, k.Str).Raw)
				}
				return true
			})
			if err := chatcheck.ValidateChat(out); err != nil {
				t.Errorf("a strict server refuses it: %v", err)
			}
			if chatcheck.ValidateAlternation([]byte(r.body)) == nil {
				if err := chatcheck.ValidateAlternation(out); err != nil {
					t.Errorf("roles alternated in the forwarded body, not in the summary call: %v", err)
				}
			}
		})
	}
}

func messagesRaw(body []byte) string { return gjson.GetBytes(body, "messages").Raw }

func TestHistorySummaryBodyWithoutMessages(t *testing.T) {
	for _, body := range []string{`{"model":"m","messages":[]}`, `{"model":"m"}`, `{"model":"m","messages":["x"]}`} {
		if _, err := SummaryBody(wire.SummaryCall{Prompt: historyPrompt, History: []byte(body)}, wire.ParamRules{}); !errors.Is(err, wire.ErrNoHistoryForm) {
			t.Errorf("%s: %v, want wire.ErrNoHistoryForm", body, err)
		}
	}
}

// A reply that calls a tool is no summary, whatever text came with it: a
// summary call that continues the conversation keeps its tools offered.
func TestReadSummaryToolCall(t *testing.T) {
	body := `{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"Let me check first.",` +
		`"tool_calls":[{"id":"c9","type":"function","function":{"name":"bash","arguments":"{}"}}]}}],"usage":{"prompt_tokens":10,"completion_tokens":5}}`
	res, err := ReadSummary(200, []byte(body), "")
	if !errors.Is(err, wire.ErrToolCallReply) || !errors.Is(err, wire.ErrEmptySummary) || res.PromptTokens != 10 {
		t.Fatalf("%+v, %v", res, err)
	}
}
