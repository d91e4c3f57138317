package messages

import (
	"errors"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/messagestest"
	"github.com/ctxpress/ctxpress/wire/chat"
	"github.com/tidwall/gjson"
)

// A summary call that continues a Claude Code conversation sends the
// forwarded body byte for byte up to where the instruction goes, then the
// instruction: a user message of its own after tool results (Anthropic
// merges it into the same user turn), joined to the user's own text
// otherwise. system, tools, tool_choice, thinking, context_management and
// the cache markers stay as sent (Anthropic's cache of the messages is
// keyed on tool_choice and thinking), the call is not streamed, and the
// API's rules accept it.
func TestHistorySummaryBody(t *testing.T) {
	const prompt = "[Context checkpoint request] Summarise."
	turn6 := string(capture(t, "turn6")) // ends with a tool_result, adaptive thinking, max_tokens 128000
	userLast := strings.Replace(every, `,"stream":true}`, `,"stream":true,"tools":[{"name":"Bash","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"}}`, 1)
	rows := []struct {
		name, body string
		then       string // what follows the messages' bytes up to where the instruction goes
		joined     bool   // the instruction joins the last message's content
		wantCap    string
	}{
		{"after tool results: a user message of its own", turn6,
			`,{"role":"user","content":"` + prompt + `"}]`, false, "18384"},
		{"after the user's own text: one more text block", userLast,
			`,{"type":"text","text":"` + prompt + `"}]}]`, true, "2000"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			body := []byte(r.body)
			accepted(t, body)
			out, err := SummaryBody(chat.SummaryCall{Model: "ignored", Prompt: prompt, MaxTokens: 2000, History: body}, chat.ParamRules{})
			if err != nil {
				t.Fatal(err)
			}
			in, got := gjson.GetBytes(body, "messages").Raw, gjson.GetBytes(out, "messages").Raw
			upTo := len(in) - len(`]`)
			if r.joined {
				upTo -= len(`]}`)
			}
			if !strings.HasPrefix(got, in[:upTo]) || got[upTo:] != r.then {
				t.Fatalf("not the forwarded messages up to the instruction, then it:\n%s", got[max(0, upTo-100):])
			}
			if gjson.GetBytes(out, "stream").Exists() || gjson.GetBytes(out, "max_tokens").Raw != r.wantCap {
				t.Errorf("stream %s, max_tokens %s", gjson.GetBytes(out, "stream").Raw, gjson.GetBytes(out, "max_tokens").Raw)
			}
			gjson.ParseBytes(body).ForEach(func(k, v gjson.Result) bool {
				if k.Str != "messages" && k.Str != "stream" && k.Str != "max_tokens" && gjson.GetBytes(out, k.Str).Raw != v.Raw {
					t.Errorf("%s changed", k.Str)
				}
				return true
			})
			req, rerr := messagestest.Check(out, messagestest.Options{})
			if rerr != nil {
				t.Fatalf("the API refuses it: %v", rerr)
			}
			if req.Markers != strings.Count(r.body, `"cache_control"`) || !strings.HasSuffix(req.LastUser, prompt) {
				t.Errorf("%d markers, last user text %q", req.Markers, req.LastUser)
			}
		})
	}
}

// After a role:"system" message only an assistant message may come: no
// summary instruction can follow it.
func TestHistorySummaryBodyAfterSystemMessage(t *testing.T) {
	_, err := SummaryBody(chat.SummaryCall{Prompt: "x", History: capture(t, "turn1")}, chat.ParamRules{})
	if !errors.Is(err, chat.ErrNoHistoryForm) {
		t.Fatalf("%v, want ErrNoHistoryForm", err)
	}
}

func TestThinkingCap(t *testing.T) {
	rows := []struct {
		name     string
		thinking string
		sent     int
		want     int
	}{
		{"no thinking: the summary's cap", ``, 32000, 2000},
		{"thinking disabled: the summary's cap", `{"type":"disabled"}`, 32000, 2000},
		{"a budget: budget and summary", `{"type":"enabled","budget_tokens":10000}`, 32000, 12000},
		{"a budget near the request's cap: the request's cap, above the budget", `{"type":"enabled","budget_tokens":31000}`, 32000, 32000},
		{"adaptive: the summary with reasoning headroom", `{"type":"adaptive"}`, 128000, 2000 + chat.ReasoningHeadroom},
		{"adaptive under a small cap: the request's cap", `{"type":"adaptive"}`, 8000, 8000},
	}
	for _, r := range rows {
		if got := thinkingCap(gjson.Parse(r.thinking), r.sent, 2000); got != r.want {
			t.Errorf("%s: %d, want %d", r.name, got, r.want)
		}
	}
}

// A reply that calls a tool is no summary, whatever text came with it.
func TestReadSummaryToolUse(t *testing.T) {
	body := `{"type":"message","role":"assistant","content":[{"type":"text","text":"Let me check first."},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":5}}`
	res, err := ReadSummary(200, []byte(body), "")
	if !errors.Is(err, chat.ErrToolCallReply) || !errors.Is(err, chat.ErrEmptySummary) || res.PromptTokens != 10 {
		t.Fatalf("%+v, %v", res, err)
	}
}
