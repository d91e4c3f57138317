package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

func start(t *testing.T, c config) (*server, *httptest.Server) {
	t.Helper()
	if c.toolTurns == 0 {
		c.toolTurns = 2
	}
	if c.reply == "" {
		c.reply = "All done."
	}
	c.sessionHeaders = []string{"x-session-id"}
	s, err := newServer(c)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

// opencodeTools are two tools shaped like opencode's: bash needs a
// description beside the command, read an absolute filePath.
func opencodeTools() []openai.ChatCompletionToolUnionParam {
	fn := func(name string, params shared.FunctionParameters) openai.ChatCompletionToolUnionParam {
		return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: name, Parameters: params})
	}
	return []openai.ChatCompletionToolUnionParam{
		fn("bash", shared.FunctionParameters{"type": "object", "required": []string{"command", "description"},
			"properties": map[string]any{"command": map[string]any{"type": "string"}, "description": map[string]any{"type": "string"}, "timeout": map[string]any{"type": "number"}}}),
		fn("read", shared.FunctionParameters{"type": "object", "required": []string{"filePath"},
			"properties": map[string]any{"filePath": map[string]any{"type": "string"}}}),
	}
}

// A conversation driven by the official client gets the scripted tool
// calls with arguments valid for each tool's schema, then the text; the
// usage reports the prompt's size and the prefix it shares with the
// previous request as cached.
func TestToolTurnsThenTextWithPrefixCacheUsage(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
			_, ts := start(t, config{workdir: "/repo", steps: []parStep{parseSteps("ls -la"), parseSteps("read:a.py")}})
			client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0),
				option.WithHeader("X-Session-ID", "ses_1"))
			history := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are an agent."), openai.UserMessage("List the functions.")}
			var calls []openai.ChatCompletionMessageToolCallUnion
			var usages []openai.CompletionUsage
			var text string
			for turn := 0; turn < 3; turn++ {
				params := openai.ChatCompletionNewParams{Model: "m", Messages: history, Tools: opencodeTools()}
				msg, u := complete(t, client, params, stream)
				usages = append(usages, u)
				if len(msg.ToolCalls) == 0 {
					text = msg.Content
					break
				}
				calls = append(calls, msg.ToolCalls...)
				history = append(history, msg.ToParam(), openai.ToolMessage("output of "+msg.ToolCalls[0].Function.Name, msg.ToolCalls[0].ID))
			}
			if len(calls) != 2 || text != "All done." {
				t.Fatalf("%d calls, text %q", len(calls), text)
			}
			wantArgs := []string{`{"command":"ls -la","description":"scripted step"}`, `{"filePath":"/repo/a.py"}`}
			for i, c := range calls {
				if c.Function.Arguments != wantArgs[i] {
					t.Errorf("call %d: %s %s, want %s", i, c.Function.Name, c.Function.Arguments, wantArgs[i])
				}
			}
			if usages[0].PromptTokensDetails.CachedTokens != 0 {
				t.Errorf("first request cached %d", usages[0].PromptTokensDetails.CachedTokens)
			}
			for i := 1; i < len(usages); i++ {
				// The whole previous prompt is a prefix of this one, less
				// at most a few bytes of rounding.
				prev, cur := usages[i-1].PromptTokens, usages[i].PromptTokens
				if cached := usages[i].PromptTokensDetails.CachedTokens; cached < prev-1 || cached >= cur {
					t.Errorf("turn %d: cached %d of %d, previous prompt %d", i, cached, cur, prev)
				}
			}
		})
	}
}

func complete(t *testing.T, client openai.Client, params openai.ChatCompletionNewParams, stream bool) (openai.ChatCompletionMessage, openai.CompletionUsage) {
	t.Helper()
	if !stream {
		c, err := client.Chat.Completions.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		return c.Choices[0].Message, c.Usage
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := client.Chat.Completions.NewStreaming(context.Background(), params)
	acc := openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return acc.Choices[0].Message, acc.Usage
}

// The rows are what api.openai.com answers 400 to (and what it accepts),
// so a body ctxpress breaks is refused here as it would be there.
func TestRefusesWhatTheAPIRefuses(t *testing.T) {
	sys := `{"role":"system","content":"s"}`
	usr := `{"role":"user","content":"u"}`
	call := `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]}`
	res := `{"role":"tool","tool_call_id":"c1","content":"out"}`
	body := func(msgs ...string) string {
		return `{"model":"m","messages":[` + strings.Join(msgs, ",") + `]}`
	}
	cases := []struct {
		name, body, refusal string // refusal "" means accepted
		strict              bool
	}{
		{"a tool loop is accepted", body(sys, usr, call, res), "", false},
		{"a tool result that answers no call", body(sys, usr, res), "must be a response to a preceeding message with 'tool_calls'", false},
		{"a result for another id", body(sys, usr, call, `{"role":"tool","tool_call_id":"c9","content":"x"}`), "preceeding message", false},
		{"a call left unanswered before the next user message", body(sys, usr, call, usr), "did not have response messages: c1", false},
		{"a call left unanswered at the end", body(sys, usr, call), "did not have response messages: c1", false},
		{"an unknown role", body(sys, `{"role":"human","content":"u"}`), "Invalid value: 'human'", false},
		{"an empty content array", body(sys, `{"role":"user","content":[]}`), "empty array", false},
		{"an image in a system message", body(`{"role":"system","content":[{"type":"image_url","image_url":{"url":"x"}}]}`, usr), "Invalid value: 'image_url'", false},
		{"an assistant message with neither content nor calls", body(sys, usr, `{"role":"assistant","content":null}`, usr), "got null", false},
		{"an empty tool_calls array", body(sys, usr, `{"role":"assistant","content":"x","tool_calls":[]}`, usr), "non-empty array of tool calls", false},
		{"stream_options without stream", `{"model":"m","stream_options":{"include_usage":true},"messages":[` + usr + `]}`, "only allowed when 'stream' is enabled", false},
		{"a tool name with a space", `{"model":"m","tools":[{"type":"function","function":{"name":"run it"}}],"messages":[` + usr + `]}`, "does not match pattern", false},
		{"no model", `{"messages":[` + usr + `]}`, "model parameter", false},
		{"not JSON", `{"model":`, "could not parse the JSON body", false},
		{"two user messages in a row are accepted (a warning)", body(sys, usr, usr), "", false},
		{"... and refused by a strict template", body(sys, usr, usr), "two user messages in a row", true},
		{"a system message after the start, strict", body(sys, usr, sys), "system message after the start", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, ts := start(t, config{strict: c.strict})
			resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got struct {
				Error *struct{ Message, Type string } `json:"error"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&got)
			switch {
			case c.refusal == "" && resp.StatusCode != 200:
				t.Fatalf("refused %d: %+v", resp.StatusCode, got.Error)
			case c.refusal != "" && (resp.StatusCode != 400 || got.Error == nil || !strings.Contains(got.Error.Message, c.refusal)):
				t.Fatalf("status %d %+v, want 400 with %q", resp.StatusCode, got.Error, c.refusal)
			case c.refusal != "" && got.Error.Type != "invalid_request_error":
				t.Fatalf("error type %q", got.Error.Type)
			}
		})
	}
}

// codex 0.93's shell tool takes an argv; qwen's a command string; with no
// read tool a read: step is a cat.
func TestCallsFitEachClientsShellTool(t *testing.T) {
	argv := map[string]any{"type": "object", "required": []any{"command"},
		"properties": map[string]any{"command": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}, "workdir": map[string]any{"type": "string"}}}
	qwen := map[string]any{"type": "object", "required": []any{"command"},
		"properties": map[string]any{"command": map[string]any{"type": "string"}, "is_background": map[string]any{"type": "boolean"}}}
	cases := []struct {
		tools []tool
		st    step
		name  string
		args  string
	}{
		{[]tool{{"shell", argv}}, parseStep("grep -n def *.py"), "shell", `{"command":["bash","-lc","grep -n def *.py"]}`},
		{[]tool{{"shell", argv}}, parseStep("read:a.py"), "shell", `{"command":["bash","-lc","cat a.py"]}`},
		{[]tool{{"read_file", map[string]any{"properties": map[string]any{"file_path": map[string]any{"type": "string"}}}}, {"run_shell_command", qwen}}, parseStep("read:b.py"), "read_file", `{"file_path":"/w/b.py"}`},
		{[]tool{{"run_shell_command", qwen}}, parseStep("sh:ls"), "run_shell_command", `{"command":"ls"}`},
		{[]tool{{"Bash", qwen}, {"Agent", map[string]any{"required": []any{"description", "prompt"}}}},
			parseStep(`tool:Agent {"prompt":"list the files"}`), "Agent", `{"description":"scripted step","prompt":"list the files"}`},
	}
	for _, c := range cases {
		call, err := callFor(c.st, c.tools, "/w", "id")
		if err != nil || call.Name != c.name || call.Arguments != c.args {
			t.Errorf("%+v: %v %+v, want %s %s", c.st, err, call, c.name, c.args)
		}
	}
	if _, err := callFor(parseStep("ls"), []tool{{"edit", nil}}, "", "id"); err == nil {
		t.Error("a call without a shell tool")
	}
	// A sub-agent offered no Agent tool ends its ask with text instead.
	if _, err := callFor(parseStep(`tool:Agent {"prompt":"p"}`), []tool{{"Bash", qwen}}, "", "id"); err == nil {
		t.Error("a call of a tool not offered")
	}
}

// ctxpress's summary call gets every template section; a request without
// tools (a title) a short text; neither moves the script on.
func TestSummaryAndSideRequestsGetText(t *testing.T) {
	_, ts := start(t, config{steps: []parStep{parseSteps("ls")}})
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	ask := openai.UserMessage("List the functions.")
	sum, _ := complete(t, client, openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage(compactor.BuildPromptFor(0, "", "[USER]: hi"))}}, false)
	title, _ := complete(t, client, openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{ask}}, true)
	agent, _ := complete(t, client, openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{ask}, Tools: opencodeTools()}, true)
	if !strings.Contains(sum.Content, "## Active Task") || len(sum.ToolCalls) > 0 {
		t.Errorf("summary: %q", sum.Content)
	}
	if title.Content == "" || len(title.ToolCalls) > 0 {
		t.Errorf("title: %+v", title)
	}
	if len(agent.ToolCalls) != 1 {
		t.Errorf("the agent turn after them got no call: %+v", agent)
	}
}

// -record writes each body and a line per request; -forward records what
// the client sent and the X-Ctxpress-* headers of the answer.
func TestRecordingAndForwardMode(t *testing.T) {
	dir := t.TempDir()
	up, upTS := start(t, config{record: filepath.Join(dir, "up"), steps: []parStep{parseSteps("ls")}})
	withHeader := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Ctxpress-Tokens-After", "42")
		up.ServeHTTP(w, r)
	})
	middle := httptest.NewServer(withHeader)
	t.Cleanup(middle.Close)
	front, err := newServer(config{record: filepath.Join(dir, "front"), sessionHeaders: []string{"x-session-id"}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := newForwarder(middle.URL, front)
	if err != nil {
		t.Fatal(err)
	}
	frontTS := httptest.NewServer(f)
	t.Cleanup(frontTS.Close)
	client := openai.NewClient(option.WithBaseURL(frontTS.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	complete(t, client, openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage("hi")}, Tools: opencodeTools()}, true)
	_ = upTS
	var ue entry
	readLine(t, filepath.Join(dir, "up", "requests.jsonl"), &ue)
	if ue.Status != 200 || ue.Kind != kindAgent || !strings.HasPrefix(ue.Answer, "call bash") || ue.PromptTokens == 0 {
		t.Errorf("upstream record %+v", ue)
	}
	var fe forwardEntry
	readLine(t, filepath.Join(dir, "front", "requests.jsonl"), &fe)
	if fe.Status != 200 || fe.Headers["X-Ctxpress-Tokens-After"] != "42" || fe.PromptTokens != ue.PromptTokens {
		t.Errorf("front record %+v", fe)
	}
	if _, err := os.Stat(filepath.Join(dir, "up", "0001.json")); err != nil {
		t.Error(err)
	}
}

func readLine(t *testing.T, path string, v any) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	if !sc.Scan() {
		t.Fatalf("%s: no line", path)
	}
	if err := json.Unmarshal(sc.Bytes(), v); err != nil {
		t.Fatal(err)
	}
}

// A par: step asks for several calls in one assistant message; the next
// request must answer each of them.
func TestParallelStepAsksForSeveralCalls(t *testing.T) {
	for _, stream := range []bool{false, true} {
		_, ts := start(t, config{toolTurns: 1, steps: []parStep{parseSteps("par:cat a.py ||| cat b.py")}})
		client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
		history := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Read both.")}
		msg, _ := complete(t, client, openai.ChatCompletionNewParams{Model: "m", Messages: history, Tools: opencodeTools()}, stream)
		if len(msg.ToolCalls) != 2 || msg.ToolCalls[1].Function.Arguments != `{"command":"cat b.py","description":"scripted step"}` ||
			msg.ToolCalls[0].ID == msg.ToolCalls[1].ID {
			t.Fatalf("stream=%v: %+v", stream, msg.ToolCalls)
		}
		history = append(history, msg.ToParam(), openai.ToolMessage("a", msg.ToolCalls[0].ID))
		if _, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "m", Messages: history, Tools: opencodeTools()}); err == nil {
			t.Fatal("one of two calls answered was accepted")
		}
		history = append(history, openai.ToolMessage("b", msg.ToolCalls[1].ID))
		if msg, _ = complete(t, client, openai.ChatCompletionNewParams{Model: "m", Messages: history, Tools: opencodeTools()}, stream); msg.Content != "All done." {
			t.Fatalf("after both results: %+v", msg)
		}
	}
}

// follow: runs the command of the last ctxpress marker, as a model that
// needs the lines it left out would.
func TestFollowMarker(t *testing.T) {
	body := []byte(`{"content":"a\n[lines 6-18 omitted; original intact: sed -n \u00276,18p\u0027 /tmp/o/2f52757154a2.txt]\nb\n[lines 24-231 omitted; sed -n '24,231p' /tmp/o/2f52757154a2.txt]"}`)
	if cmd, ok := followMarker(body); !ok || cmd != "sed -n '24,231p' /tmp/o/2f52757154a2.txt" {
		t.Fatalf("followMarker = %q, %v", cmd, ok)
	}
	if _, ok := followMarker([]byte(`{"content":"[lines 6-18 omitted]"}`)); ok {
		t.Fatal("a marker with no file followed")
	}
	if st := parseStep("follow:"); !st.Follow {
		t.Fatal("follow: not parsed")
	}
}
