package gemini

import (
	"errors"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

func TestSummaryBodyTranscript(t *testing.T) {
	for _, tc := range []struct {
		model string
		temp  bool
	}{{"gemini-2.5-flash", true}, {"gemini-3-pro-preview", false}, {"models/gemini-3-flash", false}} {
		b, err := SummaryBody(wire.SummaryCall{Model: tc.model, Prompt: "Summarise <this> & that", MaxTokens: 2000}, wire.ParamRules{})
		if err != nil {
			t.Fatal(err)
		}
		v := gjson.ParseBytes(b)
		if v.Get("contents.0.role").Str != "user" || v.Get("contents.0.parts.0.text").Str != "Summarise <this> & that" ||
			v.Get("generationConfig.maxOutputTokens").Int() != int64(2000+wire.ReasoningHeadroom) ||
			v.Get("generationConfig.temperature").Exists() != tc.temp || strings.Contains(string(b), `\u003c`) {
			t.Errorf("%s: %s", tc.model, b)
		}
	}
	if p := SummaryPath("models/gemini-2.5-pro"); p != "/models/gemini-2.5-pro:generateContent" {
		t.Error(p)
	}
}

func TestSummaryBodyContinuesTheHistory(t *testing.T) {
	for _, tc := range []struct {
		name, history, tail string
		limit               int64
	}{
		{"after the user's results: a text part of theirs",
			`{"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"name":"ls"},"thoughtSignature":"QQ=="}]},{"role":"user","parts":[{"functionResponse":{"name":"ls","response":{"output":"x"}}}]}],"tools":[{"functionDeclarations":[{"name":"ls"}]}],"generationConfig":{"maxOutputTokens":8000,"thinkingConfig":{"thinkingLevel":"low"}}}`,
			`{"functionResponse":{"name":"ls","response":{"output":"x"}}},{"text":"SUMMARISE"}]}]`, 8000},
		{"after the model: a user content of its own",
			`{"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"text":"ok"}]}],"generation_config":{"temperature":1}}`,
			`{"role":"model","parts":[{"text":"ok"}]},{"role":"user","parts":[{"text":"SUMMARISE"}]}]`, int64(1000 + wire.ReasoningHeadroom)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := SummaryBody(wire.SummaryCall{Model: "gemini-3-pro", Prompt: "SUMMARISE", MaxTokens: 1000, History: []byte(tc.history)}, wire.ParamRules{})
			if err != nil {
				t.Fatal(err)
			}
			contents := gjson.Get(tc.history, "contents").Raw
			if !strings.HasPrefix(string(b), tc.history[:strings.Index(tc.history, contents)+len(contents)-len(`]}]`)]) {
				t.Errorf("the history's bytes are not the call's prefix: %s", b)
			}
			if !strings.Contains(string(b), tc.tail) {
				t.Errorf("no %s in %s", tc.tail, b)
			}
			gc := gjson.GetBytes(b, "generationConfig")
			if !gc.Exists() {
				gc = gjson.GetBytes(b, "generation_config")
			}
			if gc.Get("maxOutputTokens").Int() != tc.limit || gjson.GetBytes(b, "tools").Raw != gjson.Get(tc.history, "tools").Raw {
				t.Errorf("%s", b)
			}
			if strings.Count(string(b), "eneration") != 1 {
				t.Errorf("two generation configs: %s", b)
			}
		})
	}
	if _, err := SummaryBody(wire.SummaryCall{Prompt: "p", History: []byte(`{"contents":[]}`)}, wire.ParamRules{}); !errors.Is(err, wire.ErrNoHistoryForm) {
		t.Errorf("no contents: %v", err)
	}
}

func TestReadSummary(t *testing.T) {
	answer := func(parts, finish string) string {
		return `{"candidates":[{"content":{"role":"model","parts":[` + parts + `]},"finishReason":"` + finish + `"}],"usageMetadata":{"promptTokenCount":5000,"cachedContentTokenCount":4000,"candidatesTokenCount":300,"thoughtsTokenCount":50}}`
	}
	for _, tc := range []struct {
		name      string
		status    int
		body      string
		text      string
		truncated bool
		err       error
	}{
		{"text, thoughts skipped", 200, answer(`{"text":"thinking…","thought":true},{"text":"The summary"},{"text":" goes on.","thoughtSignature":"QQ=="}`, "STOP"), "The summary goes on.", false, nil},
		{"cut at the cap", 200, answer(`{"text":"The sum"}`, "MAX_TOKENS"), "The sum", true, nil},
		{"only thoughts", 200, answer(`{"text":"hmm","thought":true}`, "MAX_TOKENS"), "", true, wire.ErrEmptySummary},
		{"a call", 200, answer(`{"functionCall":{"name":"ls"}}`, "STOP"), "", false, wire.ErrToolCallReply},
		{"blocked", 200, `{"promptFeedback":{"blockReason":"OTHER"},"usageMetadata":{"promptTokenCount":5}}`, "", false, wire.ErrEmptySummary},
		{"no candidates", 200, `{"usageMetadata":{"promptTokenCount":5}}`, "", false, wire.ErrBadResponse},
		{"refused", 400, `{"error":{"code":400,"message":"Invalid value at 'generation_config.temperature'","status":"INVALID_ARGUMENT"}}`, "", false, wire.ErrRefused},
		{"too long", 400, `{"error":{"code":400,"message":"The input token count exceeds the maximum number of tokens allowed 1048576.","status":"INVALID_ARGUMENT"}}`, "", false, wire.ErrContextOverflow},
		{"overloaded", 503, `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`, "", false, wire.ErrUpstream},
		{"a stream's array", 200, "[" + chunk1 + "," + chunk2 + "]", `Hello "}" ]`, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := ReadSummary(tc.status, []byte(tc.body), "AIzaSecretKey123")
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "AIzaSecretKey123") {
				t.Error("the key in an error")
			}
			if res.Text != tc.text || res.Truncated != tc.truncated {
				t.Errorf("text %q truncated %v", res.Text, res.Truncated)
			}
		})
	}
	res, _ := ReadSummary(200, []byte(answer(`{"text":"s"}`, "STOP")), "")
	if res.Usage != (Usage{InputTokens: 5000, CachedTokens: 4000, OutputTokens: 350, Found: true}) || res.PromptTokens != 5000 || res.CompletionTokens != 350 {
		t.Errorf("usage %+v", res)
	}
}
