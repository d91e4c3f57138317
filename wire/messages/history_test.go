package messages

import (
	"errors"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/internal/messagestest"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// A summary call that continues a Claude Code conversation sends the
// forwarded body byte for byte up to where the instruction goes, then the
// instruction: a user message of its own after tool results (Anthropic
// merges it into the same user turn), joined to the user's own text
// otherwise. system, tools, tool_choice, thinking and the cache markers
// stay as sent (Anthropic's cache of the messages is keyed on tool_choice
// and thinking), context_management is left out, the call is not
// streamed, and the API's rules accept it.
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
			out, err := SummaryBody(wire.SummaryCall{Model: "ignored", Prompt: prompt, MaxTokens: 2000, History: body}, wire.ParamRules{})
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
				if k.Str != "messages" && k.Str != "stream" && k.Str != "max_tokens" && k.Str != "context_management" && gjson.GetBytes(out, k.Str).Raw != v.Raw {
					t.Errorf("%s changed", k.Str)
				}
				return true
			})
			if gjson.GetBytes(out, "context_management").Exists() {
				t.Error("context_management sent")
			}
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
	_, err := SummaryBody(wire.SummaryCall{Prompt: "x", History: capture(t, "turn1")}, wire.ParamRules{})
	if !errors.Is(err, wire.ErrNoHistoryForm) {
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
		{"adaptive: the summary with reasoning headroom", `{"type":"adaptive"}`, 128000, 2000 + wire.ReasoningHeadroom},
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
	if !errors.Is(err, wire.ErrToolCallReply) || !errors.Is(err, wire.ErrEmptySummary) || res.PromptTokens != 10 {
		t.Fatalf("%+v, %v", res, err)
	}
}

// A history summary call leaves context_management out wherever it is, so
// the provider answers instead of compacting or clearing the call; every
// other byte is the forwarded body's.
func TestHistorySummaryBodyAsksNoProviderCompaction(t *testing.T) {
	const (
		user   = `{"role":"user","content":"fix it"}`
		joined = `{"role":"user","content":"fix it\n\nSummarise."}`
		manage = `"context_management":{"edits":[{"type":"compact_20260112","trigger":{"type":"input_tokens","value":150000}},{"type":"clear_tool_uses_20250919"}]}`
	)
	rows := []struct {
		name, body string
	}{
		{"absent", `{"model":"claude","max_tokens":32000,"messages":[` + user + `]}`},
		{"first", `{` + manage + `,"model":"claude","max_tokens":32000,"messages":[` + user + `]}`},
		{"between", `{"model":"claude",` + manage + `,"max_tokens":32000,"messages":[` + user + `]}`},
		{"last", `{"model":"claude","max_tokens":32000,"messages":[` + user + `],` + manage + `}`},
	}
	const want = `{"model":"claude","max_tokens":2000,"messages":[` + joined + `]}`
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			out, err := SummaryBody(wire.SummaryCall{Model: "claude", Prompt: "Summarise.", MaxTokens: 2000, History: []byte(r.body)}, wire.ParamRules{})
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != want {
				t.Fatalf("got\n%s\nwant\n%s", out, want)
			}
		})
	}
}

// A provider that compacted the summary call instead of answering it says
// so with stop_reason "compaction" (pause_after_compaction) or a
// compaction block: that is ErrProviderCompacted, not an empty summary;
// with text beside it, the text is the summary.
func TestReadSummaryProviderCompacted(t *testing.T) {
	const (
		compaction = `{"type":"compaction","content":"The user is fixing a bug."}`
		thinking   = `{"type":"thinking","thinking":"","signature":"sig"}`
		text       = `{"type":"text","text":"## Goal\nx"}`
	)
	rows := []struct {
		name, content, stop string
		want                error
		text                string
	}{
		{"paused after compacting", `[` + compaction + `]`, "compaction", wire.ErrProviderCompacted, ""},
		{"a compaction block, stop_reason end_turn", `[` + compaction + `]`, "end_turn", wire.ErrProviderCompacted, ""},
		{"stop_reason compaction with no block", `[]`, "compaction", wire.ErrProviderCompacted, ""},
		{"thinking, then a compaction block", `[` + thinking + `,` + compaction + `]`, "compaction", wire.ErrProviderCompacted, ""},
		{"a compaction block, then the summary", `[` + compaction + `,` + text + `]`, "end_turn", nil, "## Goal\nx"},
		{"nothing at all: an empty summary", `[]`, "end_turn", wire.ErrEmptySummary, ""},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			body := `{"type":"message","role":"assistant","content":` + r.content + `,"stop_reason":"` + r.stop + `","usage":{"input_tokens":10,"output_tokens":5}}`
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
