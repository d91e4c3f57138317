package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/internal/chatcheck"
	"github.com/ctxpress/ctxpress/internal/openaitest"
)

// lastUserText is a chat body's last message's last text.
func lastUserText(body []byte) string {
	msgs := gjson.GetBytes(body, "messages").Array()
	if len(msgs) == 0 {
		return ""
	}
	return openaitest.LastText(msgs[len(msgs)-1].Get("content"))
}

// templateChat is a chat upstream as strict as the servers a summary call
// meets: OpenAI's request rules (a valid message sequence, tool_choice only
// with tools, stream_options only when streaming) and a strict chat
// template (roles alternate, as llama.cpp's Jinja templates that raise
// "Conversation roles must alternate" want; the agent's own requests keep
// it). Refusals are 400s with the server's own message. summary, when
// set, answers the summary calls that continue the conversation.
type templateChat struct {
	*openaitest.Server
	summary http.HandlerFunc
}

func newTemplateChat(t *testing.T) *templateChat {
	u := &templateChat{Server: openaitest.New(t)}
	u.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		refuse := func(msg string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
			w.Write(b)
		}
		switch tools := gjson.GetBytes(body, "tools"); {
		case chatcheck.ValidateChat(body) != nil:
			refuse(chatcheck.ValidateChat(body).Error())
		case gjson.GetBytes(body, "tool_choice").Exists() && (!tools.IsArray() || len(tools.Array()) == 0):
			refuse("Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.")
		case gjson.GetBytes(body, "stream_options").Exists() && gjson.GetBytes(body, "stream").Type != gjson.True:
			refuse("The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		case chatcheck.ValidateAlternation(body) != nil:
			refuse("Jinja Exception: Conversation roles must alternate user/assistant/user/assistant/...")
		case u.summary != nil && strings.HasPrefix(lastUserText(body), compactor.HistoryLead) ||
			u.summary != nil && strings.Contains(lastUserText(body), "\n\n"+compactor.HistoryLead):
			r.Body = io.NopCloser(bytes.NewReader(body))
			u.summary(w, r)
		default:
			u.AnswerChat(w, r, body)
		}
	})
	return u
}

// bashTool is the tool a test agent offers.
var bashTool = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
	Name: "bash", Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}},
})}

// forwardedBefore is the last conversation turn the upstream got before
// request i.
func forwardedBefore(t *testing.T, reqs []openaitest.Request, i int) []byte {
	t.Helper()
	for j := i - 1; j >= 0; j-- {
		if strings.HasSuffix(reqs[j].Path, "/chat/completions") && !openaitest.IsSummaryRequest(reqs[j].Body) {
			return reqs[j].Body
		}
	}
	t.Fatal("no turn before the summary call")
	return nil
}

// summaryCalls are the summary calls the upstream got, by index.
func summaryCalls(up *openaitest.Server) (reqs []openaitest.Request, at []int) {
	reqs = up.Requests()
	for i, r := range reqs {
		if openaitest.IsSummaryRequest(r.Body) {
			at = append(at, i)
		}
	}
	return reqs, at
}

// checkContinues fails unless summary is forwarded continued: every byte
// of its messages array up to the end of forwarded's last message (its
// content's end with joined), then then; and every other member as
// forwarded but tool_choice "none", no stream or stream_options, and
// max_tokens the summary's cap.
func checkContinues(t *testing.T, forwarded, summary []byte, then string, joined bool, maxTokens int) {
	t.Helper()
	fm, sm := gjson.GetBytes(forwarded, "messages").Raw, gjson.GetBytes(summary, "messages").Raw
	upTo := len(fm) - len(`]`)
	if joined {
		upTo -= len(`"}`)
	}
	if !strings.HasPrefix(sm, fm[:upTo]) || !strings.HasPrefix(sm[upTo:], then) {
		t.Fatalf("summary call's messages are not the forwarded ones, then %.60q:\n...%s", then, sm[max(0, upTo-200):])
	}
	if gjson.GetBytes(summary, "tool_choice").Raw != `"none"` || gjson.GetBytes(summary, "stream").Exists() ||
		gjson.GetBytes(summary, "stream_options").Exists() || gjson.GetBytes(summary, "max_tokens").Int() != int64(maxTokens) {
		t.Errorf("summary call: tool_choice %s, stream %s, stream_options %s, max_tokens %s", gjson.GetBytes(summary, "tool_choice").Raw,
			gjson.GetBytes(summary, "stream").Raw, gjson.GetBytes(summary, "stream_options").Raw, gjson.GetBytes(summary, "max_tokens").Raw)
	}
	gjson.ParseBytes(forwarded).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "messages", "stream", "stream_options", "tool_choice", "max_tokens":
		default:
			if gjson.GetBytes(summary, k.Str).Raw != v.Raw {
				t.Errorf("summary call's %s is not the forwarded one's", k.Str)
			}
		}
		return true
	})
}

// A compaction's summary call to the conversation's own upstream and model
// sends the conversation as forwarded, tools included, and asks for the
// summary in one more message, so the provider bills the history as
// cached: before forwarding, this request as it would go; in the
// background, the very body the turn forwarded. After tool results the
// assistant's turn closes first, so a strict template takes it.
func TestSummaryCallContinuesTheForwardedConversation(t *testing.T) {
	then := `,{"role":"assistant","content":"Pausing the task here for a context checkpoint."},{"role":"user","content":"` + compactor.HistoryLead
	t.Run("before forwarding", func(t *testing.T) {
		up := newTemplateChat(t)
		cfg := compactionConfig(up.BaseURL())
		cfg.Compaction.Summarizer.MaxTokens = 600
		p, _ := startWithStore(t, cfg)
		a := newAgent(t, p.BaseURL(), "sync")
		a.tools = bashTool
		compactOnce(t, a)
		reqs, at := summaryCalls(up.Server)
		if len(at) != 1 {
			t.Fatalf("%d summary calls", len(at))
		}
		summary := reqs[at[0]].Body
		// This request before its compaction extends the turn before it,
		// which the provider has cached.
		checkContinues(t, forwardedBefore(t, reqs, at[0]), summary, `,{`, false, 600)
		msgs := gjson.GetBytes(summary, "messages").Array()
		if len(msgs) != len(a.history)-2+2 || !strings.HasPrefix(msgs[len(msgs)-3].Get("role").Str, "tool") {
			t.Errorf("%d messages, the client's %d before its last turn: want them, the pause and the instruction", len(msgs), len(a.history)-2)
		}
		if raw := msgs[len(msgs)-2].Raw + "," + msgs[len(msgs)-1].Raw; !strings.HasPrefix(","+raw, then) {
			t.Errorf("the summary call ends with %.200s", raw)
		}
	})
	t.Run("in the background", func(t *testing.T) {
		up := newTemplateChat(t)
		cfg := compactionConfig(up.BaseURL())
		cfg.Compaction.Precompact = true
		cfg.Compaction.Summarizer.MaxTokens = 600
		p, _ := startWithStore(t, cfg)
		a := newAgent(t, p.BaseURL(), "background")
		a.tools = bashTool
		for i := 0; i < 30; i++ {
			a.turn(i%2 == 1) // streamed turns carry stream_options ctxpress added
			p.comp.Wait()
			if _, at := summaryCalls(up.Server); len(at) > 0 {
				break
			}
		}
		reqs, at := summaryCalls(up.Server)
		if len(at) != 1 {
			t.Fatalf("%d summary calls", len(at))
		}
		checkContinues(t, forwardedBefore(t, reqs, at[0]), reqs[at[0]].Body, then, false, 600)
		for i := 0; ; i++ {
			a.turn(false)
			if chats, _ := up.ChatRequests(); strings.Contains(string(chats[len(chats)-1].Body), "<conversation_summary>") {
				break
			}
			if i == 10 {
				t.Fatal("no turn used the precompacted summary")
			}
		}
	})
}

// A turn that ends with the user's own text gets the instruction joined to
// it: two user messages in a row are what strict chat templates refuse.
func TestSummaryInstructionJoinsTheUsersLastMessage(t *testing.T) {
	up := newTemplateChat(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Trigger.ThresholdTokens = 1 << 20 // only the forced one
	p, _ := startWithStore(t, cfg)
	a := newAgent(t, p.BaseURL(), "user-last")
	a.tools = bashTool
	for range 8 {
		a.turn(false)
	}
	a.history = append(a.history, openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
		Content: openai.ChatCompletionAssistantMessageParamContentUnion{OfString: openai.String("Found it: the century rule.")}}},
		openai.UserMessage("Good. Fix it and run the tests."))
	if h := a.turn(false, option.WithHeader(HeaderCompact, "force")); h.Get(HeaderCompacted) != "true" {
		t.Fatal("not compacted")
	}
	reqs, at := summaryCalls(up.Server)
	if len(at) != 1 {
		t.Fatalf("%d summary calls", len(at))
	}
	summary := reqs[at[0]].Body
	msgs := gjson.GetBytes(summary, "messages").Array()
	last := msgs[len(msgs)-1]
	if len(msgs) != len(a.history)-2 || last.Get("role").Str != "user" ||
		!strings.HasPrefix(last.Get("content").Str, "Good. Fix it and run the tests.\n\n"+compactor.HistoryLead) {
		t.Fatalf("%d messages (the client sent %d); last %.200s", len(msgs), len(a.history)-2, last.Raw)
	}
	if err := chatcheck.ValidateAlternation(summary); err != nil {
		t.Fatal(err)
	}
}

// When the upstream refuses the summary call that continues the
// conversation (a template, a field it takes from clients but not in
// this call) or the model answers it with a tool call, the compaction
// sends a transcript instead and succeeds.
func TestRefusedHistorySummaryFallsBackToATranscript(t *testing.T) {
	for name, answer := range map[string]http.HandlerFunc{
		"refused": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"code":400,"message":"Unable to generate parser for this template.","type":"invalid_request_error"}}`)
		},
		"a tool call": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"Let me look first.",`+
				`"tool_calls":[{"id":"c9","type":"function","function":{"name":"bash","arguments":"{}"}}]}}],"usage":{"prompt_tokens":10,"completion_tokens":5}}`)
		},
	} {
		t.Run(name, func(t *testing.T) {
			up := newTemplateChat(t)
			up.summary = answer
			p, _ := startWithStore(t, compactionConfig(up.BaseURL()))
			a := newAgent(t, p.BaseURL(), "fallback")
			a.tools = bashTool
			compactOnce(t, a)
			reqs, at := summaryCalls(up.Server)
			if len(at) != 2 || !strings.HasPrefix(lastUserText(reqs[at[0]].Body), compactor.HistoryLead) ||
				len(gjson.GetBytes(reqs[at[1]].Body, "messages").Array()) != 1 {
				t.Fatalf("%d summary calls; want the history's, then a transcript", len(at))
			}
			if !strings.Contains(p.logs.String(), "sending a transcript instead") {
				t.Error("the fallback is not logged")
			}
		})
	}
}

// A history that would not leave the summary room in the model's window
// with the instruction is summarised from a transcript, sized to fit.
func TestHistoryOverTheWindowIsSummarisedFromATranscript(t *testing.T) {
	up := newTemplateChat(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Trigger.Models = map[string]int{"gpt-4o": testTrigger + 1000}
	p, _ := startWithStore(t, cfg)
	a := newAgent(t, p.BaseURL(), "tight")
	a.tools = bashTool
	compactOnce(t, a)
	reqs, at := summaryCalls(up.Server)
	if len(at) != 1 || len(gjson.GetBytes(reqs[at[0]].Body, "messages").Array()) != 1 {
		t.Fatalf("%d summary calls; want one transcript", len(at))
	}
}

// A summariser configured at the upstream's own URL, without another
// model or API, is the conversation's own: the history is continued. With
// another model there, it gets a transcript.
func TestSummariserAtTheUpstreamsURL(t *testing.T) {
	for model, history := range map[string]bool{"": true, "gpt-4o-mini": false} {
		up := newTemplateChat(t)
		cfg := compactionConfig(up.BaseURL())
		cfg.Compaction.Summarizer.BaseURL, cfg.Compaction.Summarizer.Model = up.BaseURL()+"/", model
		p, _ := startWithStore(t, cfg)
		a := newAgent(t, p.BaseURL(), "configured")
		a.tools = bashTool
		compactOnce(t, a)
		reqs, at := summaryCalls(up.Server)
		if len(at) != 1 {
			t.Fatalf("summary model %q: %d summary calls", model, len(at))
		}
		if got := strings.HasPrefix(lastUserText(reqs[at[0]].Body), compactor.HistoryLead); got != history {
			t.Errorf("summary model %q: continues the history %v, want %v", model, got, history)
		}
	}
}
