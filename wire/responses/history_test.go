package responses

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/responsestest"
	"github.com/ctxpress/ctxpress/wire/chat"
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
		rules      chat.ParamRules
		then       string // what follows the last item's bytes up to its end (or its content's)
		wantCap    string
	}{
		{"after tool output: one new user message", "codex171-exec-loop.json", chat.ParamRules{},
			`,{"type":"message","role":"user","content":[{"type":"input_text","text":"` + prompt + `"}]}]`, "2000"},
		{"after the user's message: one more input_text part", "codex171-apply-patch-second-ask.json", chat.ReasoningRules,
			`,{"type":"input_text","text":"` + prompt + `"}]}]`, "18384"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("..", "..", "internal", "responsestest", "testdata", r.file))
			if err != nil {
				t.Fatal(err)
			}
			out, err := SummaryBody(chat.SummaryCall{Model: "ignored", Prompt: prompt, MaxTokens: 2000, History: body}, r.rules)
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
	if !errors.Is(err, chat.ErrToolCallReply) || res.PromptTokens != 10 {
		t.Fatalf("%+v, %v", res, err)
	}
}
