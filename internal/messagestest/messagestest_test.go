package messagestest

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/compactor"
)

// req builds a request body around a messages array; extra are more
// top-level "key":value pairs.
func req(messages string, extra ...string) []byte {
	s := `{"model":"claude-opus-5-5","max_tokens":1024`
	for _, e := range extra {
		s += "," + e
	}
	return []byte(s + `,"messages":[` + messages + `]}`)
}

const (
	ask      = `{"role":"user","content":"List the files."}`
	callLs   = `{"role":"assistant","content":[{"type":"text","text":"Running ls."},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]}`
	resultLs = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a.py\nb.py","is_error":false}]}`
	answer   = `{"role":"assistant","content":[{"type":"text","text":"Two files."}]}`
	sysMsg   = `{"role":"system","content":"# Environment\nlinux"}`
	marker   = `"cache_control":{"type":"ephemeral"}`
)

func TestRequestsTheAPIAccepts(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"a user ask", string(req(ask))},
		{"a tool call answered in the next message", string(req(strings.Join([]string{ask, callLs, resultLs}, ",")))},
		{"two user messages in a row are one turn", string(req(ask + "," + ask))},
		{"system as a string", string(req(ask, `"system":"You are an agent."`))},
		{"system as text blocks with markers", string(req(ask, `"system":[{"type":"text","text":"a"},{"type":"text","text":"b",`+marker+`}]`))},
		{"a system message after the ask, then the assistant", string(req(strings.Join([]string{ask, sysMsg, callLs, resultLs}, ",")))},
		{"a system message last", string(req(ask + "," + sysMsg))},
		{"a tool result as blocks with a marker inside", string(req(ask + "," + callLs + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"a.py",` + marker + `}]}]}`))},
		{"four markers", string(req(`{"role":"user","content":[{"type":"text","text":"a",`+marker+`},{"type":"text","text":"b",`+marker+`}]}`,
			`"system":[{"type":"text","text":"a",`+marker+`},{"type":"text","text":"b",`+marker+`}]`))},
		{"a marker with a one-hour ttl", string(req(`{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral","ttl":"1h"}}]}`))},
		{"thinking with the drop_block opt-out", string(req(ask, `"thinking":{"type":"adaptive","block_binding":{"prefix_mismatch_behavior":"drop_block"}}`))},
		{"context management", string(req(ask, `"context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]}`))},
		{"a plain summary call", string(req(ask + "," + answer + `,{"role":"user","content":"` + compactor.HistoryLead + ` Summarise."}`))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Check([]byte(tc.body), Options{Header: http.Header{"Anthropic-Beta": {"claude-code-20250219", "a, " + BetaThinkingBinding}}}); err != nil {
				t.Fatalf("refused: %v\n%s", err, tc.body)
			}
		})
	}
}

func TestRequestsTheAPIRefuses(t *testing.T) {
	empty := `{"role":"user","content":[{"type":"text","text":""}]}`
	for _, tc := range []struct {
		name string
		body []byte
		opts Options
		want string
	}{
		{"an unknown top-level field", req(ask, `"ctxpress":1`), Options{}, "ctxpress: Extra inputs are not permitted"},
		{"no model", []byte(`{"max_tokens":1,"messages":[` + ask + `]}`), Options{}, "model: Field required"},
		{"no max_tokens", []byte(`{"model":"m","messages":[` + ask + `]}`), Options{}, "max_tokens: Field required"},
		{"no messages", req(""), Options{}, "messages: List should have at least 1 item"},
		{"a tool call left without its result", req(ask + "," + callLs), Options{},
			"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1. Each `tool_use` block must have a corresponding `tool_result` block in the next message."},
		{"a tool result a message too late", req(strings.Join([]string{ask, callLs, ask, resultLs}, ",")), Options{},
			"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1."},
		{"a tool result for no call", req(ask + "," + answer + "," + resultLs), Options{},
			"messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_1. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."},
		{"five markers", req(`{"role":"user","content":[{"type":"text","text":"a",`+marker+`},{"type":"text","text":"b",`+marker+`},{"type":"text","text":"c",`+marker+`}]}`,
			`"system":[{"type":"text","text":"a",`+marker+`},{"type":"text","text":"b",`+marker+`}]`), Options{},
			"A maximum of 4 blocks with cache_control may be provided. Found 5."},
		{"a marker on a thinking block", req(ask + `,{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"c2ln",` + marker + `},{"type":"text","text":"x"}]}`), Options{},
			"messages.1.content.0.thinking.cache_control: Extra inputs are not permitted"},
		{"a marker on an empty text block", req(`{"role":"user","content":[{"type":"text","text":"",` + marker + `}]}`), Options{},
			"messages.0.content.0.text: cache_control cannot be set for empty text blocks"},
		{"an empty text block", req(empty), Options{}, "messages: text content blocks must be non-empty"},
		{"an empty content", req(`{"role":"user","content":[]}`), Options{}, "messages.0: all messages must have non-empty content"},
		{"a marker of another type", req(`{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"persistent"}}]}`), Options{},
			"messages.0.content.0.cache_control.type: Input should be 'ephemeral'"},
		{"a tool call in a user message", req(`{"role":"user","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}]}`), Options{},
			"messages.0.content.0: Input tag 'tool_use' found"},
		{"another role", req(`{"role":"tool","content":"x"}`), Options{}, "messages.0.role: Input should be 'user', 'assistant' or 'system'"},
		{"a system message first", req(sysMsg + "," + ask), Options{}, "messages.0: a system message cannot be the first message"},
		{"a system message after the assistant", req(strings.Join([]string{ask, answer, sysMsg}, ",")), Options{}, "messages.2: a system message must follow a user message"},
		{"two system messages in a row", req(strings.Join([]string{ask, sysMsg, sysMsg}, ",")), Options{}, "messages.2: consecutive system messages are not allowed"},
		{"a system message before a user message", req(strings.Join([]string{ask, sysMsg, ask}, ",")), Options{}, "messages.1: a system message must be followed by an assistant message"},
		{"a system message to a model without them", req(ask + "," + sysMsg), Options{NoSystemMessages: true}, "messages.1.role: role 'system' is not supported on this model"},
		{"a bad tool name", req(ask, `"tools":[{"name":"a b","input_schema":{"type":"object"}}]`), Options{}, "tools.0.custom.name: String should match pattern"},
		{"max_tokens to count_tokens", req(ask), Options{CountTokens: true}, "max_tokens: Extra inputs are not permitted"},
		{"a summary call asking for context management", req(ask+","+answer+`,{"role":"user","content":"`+compactor.HistoryLead+` Summarise."}`,
			`"context_management":{"edits":[{"type":"compact_20260112"}]}`), Options{}, "context_management: a ctxpress summary call must not"},
		{"drop_block without its beta", req(ask, `"thinking":{"type":"adaptive","block_binding":{"prefix_mismatch_behavior":"drop_block"}}`),
			Options{Header: http.Header{"Anthropic-Beta": {"claude-code-20250219,interleaved-thinking-2025-05-14"}}}, "thinking.block_binding: this field requires the " + BetaThinkingBinding + " beta"},
		{"two tools of one name", req(ask, `"tools":[{"name":"a","input_schema":{}},{"name":"a","input_schema":{}}]`), Options{}, "tools: Tool names must be unique."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(tc.body, tc.opts)
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.body)
			}
			if err.Status != 400 || err.Type != "invalid_request_error" || !strings.Contains(err.Message, tc.want) {
				t.Fatalf("got %d %s %q, want 400 invalid_request_error containing %q", err.Status, err.Type, err.Message, tc.want)
			}
			if got := string(err.Body()); !strings.HasPrefix(got, `{"type":"error","error":{"type":"invalid_request_error","message":`) {
				t.Fatalf("error body %s", got)
			}
		})
	}
}

// What Claude Code 2.1.332 sent (testdata/README.md) is valid: 3 markers,
// 12 tools, a role:"system" message, thinking blocks and tool results.
func TestClaudeCodeRequestsAreValid(t *testing.T) {
	files, _ := filepath.Glob("testdata/claude-code-*.json")
	if len(files) < 3 {
		t.Fatalf("fixtures: %v", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			r, cerr := Check(body, Options{})
			if cerr != nil {
				t.Fatal(cerr)
			}
			if r.Markers != 3 || len(r.Tools) != 12 || !r.Stream || r.LastUser == "" {
				t.Fatalf("markers %d, tools %d, stream %v, last user %q", r.Markers, len(r.Tools), r.Stream, r.LastUser)
			}
			if _, err := Check(body, Options{NoSystemMessages: true}); err == nil {
				t.Fatal("a model without system messages accepted Claude Code's messages[1]")
			}
		})
	}
}
