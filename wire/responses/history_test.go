package responses

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/responsestest"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// A summary call that continues a codex conversation sends the forwarded
// body byte for byte up to where the instruction goes, then the
// instruction as the next user text: joined to the user's last message,
// or a message of its own after tool output. tool_choice is "none", the
// call not streamed; store, include, reasoning and prompt_cache_key stay
// as sent, and OpenAI's rules (checked with the forwarded body as the
// client's) accept it.
func TestHistorySummaryBody(t *testing.T) {
	const prompt = "[Context checkpoint request] Summarise."
	rows := []struct {
		name, file string
		rules      wire.ParamRules
		then       string // what follows the last item's bytes up to its end (or its content's)
		wantCap    string
	}{
		{"after tool output: one new user message", "codex171-exec-loop.json", wire.ParamRules{},
			`,{"type":"message","role":"user","content":[{"type":"input_text","text":"` + prompt + `"}]}]`, "2000"},
		{"after the user's message: one more input_text part", "codex171-apply-patch-second-ask.json", wire.ReasoningRules,
			`,{"type":"input_text","text":"` + prompt + `"}]}]`, "18384"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("..", "..", "internal", "responsestest", "testdata", r.file))
			if err != nil {
				t.Fatal(err)
			}
			out, err := SummaryBody(wire.SummaryCall{Model: "ignored", Prompt: prompt, MaxTokens: 2000, History: body}, r.rules)
			if err != nil {
				t.Fatal(err)
			}
			// The input array as forwarded up to the end of its last item
			// (or of that item's content), then the instruction. (stream,
			// before it in codex's body, is left out.)
			in, got := gjson.GetBytes(body, "input").Raw, gjson.GetBytes(out, "input").Raw
			upTo := len(in) - len(`]`)
			if !strings.Contains(r.then, `"message"`) {
				upTo -= len(`]}`)
			}
			if !strings.HasPrefix(got, in[:upTo]) || got[upTo:] != r.then {
				t.Fatalf("not the forwarded input up to the instruction, then it:\n%s", got[max(0, upTo-100):])
			}
			for k, want := range map[string]string{"tool_choice": `"none"`, "stream": "", "max_output_tokens": r.wantCap} {
				if got := gjson.GetBytes(out, k).Raw; got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			for _, k := range []string{"store", "include", "reasoning", "prompt_cache_key", "tools", "parallel_tool_calls", "client_metadata"} {
				if gjson.GetBytes(out, k).Raw != gjson.GetBytes(body, k).Raw {
					t.Errorf("%s changed", k)
				}
			}
			if _, err := responsestest.Check(out, responsestest.Options{Client: body}); err != nil {
				t.Errorf("OpenAI refuses it: %v", err)
			}
		})
	}
}

// A reply that calls a tool is no summary, whatever text came with it.
func TestReadSummaryFunctionCall(t *testing.T) {
	body := `{"object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Let me check."}]},` +
		`{"type":"function_call","call_id":"c9","name":"exec_command","arguments":"{}"}],"usage":{"input_tokens":10,"output_tokens":5}}`
	res, err := ReadSummary(200, []byte(body), "")
	if !errors.Is(err, wire.ErrToolCallReply) || res.PromptTokens != 10 {
		t.Fatalf("%+v, %v", res, err)
	}
}

// A history summary call carries nothing that has the provider compact it
// instead of answering: context_management, previous_response_id and
// conversation are left out wherever they are, compaction_trigger items
// wherever they are in input (their commas with them); every other byte
// is the forwarded body's.
func TestHistorySummaryBodyAsksNoProviderCompaction(t *testing.T) {
	const (
		user    = `{"role":"user","content":"fix it"}`
		joined  = `{"role":"user","content":"fix it\n\nSummarise."}`
		said    = `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}`
		ask     = `{"type":"message","role":"user","content":[{"type":"input_text","text":"Summarise."}]}`
		trigger = `{"type":"compaction_trigger"}`
		manage  = `"context_management":[{"type":"compaction","compact_threshold":200000}]`
		capped  = `,"max_output_tokens":2000}`
	)
	rows := []struct {
		name, body, want string
	}{
		{"none of them: only the instruction and the cap",
			`{"model":"m","input":[` + user + `]}`, `{"model":"m","input":[` + joined + `]` + capped},
		{"context_management first",
			`{` + manage + `,"model":"m","input":[` + user + `]}`, `{"model":"m","input":[` + joined + `]` + capped},
		{"context_management last",
			`{"model":"m","input":[` + user + `],` + manage + `}`, `{"model":"m","input":[` + joined + `]` + capped},
		{"previous_response_id and conversation",
			`{"model":"m","previous_response_id":"resp_1","input":[` + user + `],"conversation":"conv_1"}`,
			`{"model":"m","input":[` + joined + `]` + capped},
		{"a trigger first",
			`{"model":"m","input":[` + trigger + `,` + user + `]}`, `{"model":"m","input":[` + joined + `]` + capped},
		{"a trigger in the middle",
			`{"model":"m","input":[` + user + `,` + trigger + `,` + said + `]}`,
			`{"model":"m","input":[` + user + `,` + said + `,` + ask + `]` + capped},
		{"a trigger last, as codex sends it",
			`{"model":"m","input":[` + user + `,` + said + `,` + trigger + `],` + manage + `}`,
			`{"model":"m","input":[` + user + `,` + said + `,` + ask + `]` + capped},
		{"triggers first and last",
			`{"model":"m","input":[` + trigger + `,` + user + `,` + trigger + `]}`, `{"model":"m","input":[` + joined + `]` + capped},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			out, err := SummaryBody(wire.SummaryCall{Model: "m", Prompt: "Summarise.", MaxTokens: 2000, History: []byte(r.body)}, wire.ParamRules{})
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != r.want {
				t.Fatalf("got\n%s\nwant\n%s", out, r.want)
			}
		})
	}
	t.Run("a trigger alone: no history to continue", func(t *testing.T) {
		_, err := SummaryBody(wire.SummaryCall{Model: "m", Prompt: "Summarise.", History: []byte(`{"model":"m","input":[` + trigger + `]}`)}, wire.ParamRules{})
		if !errors.Is(err, wire.ErrNoHistoryForm) {
			t.Fatalf("err %v, want ErrNoHistoryForm", err)
		}
	})
}

// A provider that compacted the summary call instead of answering it says
// so with a compaction item: that is ErrProviderCompacted, not an empty
// summary; with message text beside it, the text is the summary.
func TestReadSummaryProviderCompacted(t *testing.T) {
	const (
		compaction = `{"type":"compaction","id":"cmp_1","encrypted_content":"gAAA"}`
		reasoning  = `{"type":"reasoning","id":"rs_1","summary":[]}`
		message    = `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"## Goal\nx"}]}`
	)
	rows := []struct {
		name, output string
		want         error
		text         string
	}{
		{"a compaction item alone", `[` + compaction + `]`, wire.ErrProviderCompacted, ""},
		{"its older name", `[{"type":"compaction_summary","encrypted_content":"gAAA"}]`, wire.ErrProviderCompacted, ""},
		{"reasoning, then a compaction item", `[` + reasoning + `,` + compaction + `]`, wire.ErrProviderCompacted, ""},
		{"a compaction item, then the summary", `[` + compaction + `,` + message + `]`, nil, "## Goal\nx"},
		{"nothing at all: an empty summary", `[]`, wire.ErrEmptySummary, ""},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			body := `{"object":"response","status":"completed","output":` + r.output + `,"usage":{"input_tokens":10,"output_tokens":5}}`
			res, err := ReadSummary(200, []byte(body), "")
			if !errors.Is(err, r.want) || (r.want == nil) != (err == nil) || res.Text != r.text || res.PromptTokens != 10 {
				t.Fatalf("%+v, %v; want %q, %v", res, err, r.text, r.want)
			}
			if r.want == wire.ErrEmptySummary && errors.Is(err, wire.ErrProviderCompacted) {
				t.Fatal("an empty answer read as a compaction")
			}
		})
	}
}
