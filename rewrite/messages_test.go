package rewrite

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// longOutput is a tool output long enough for the stand-in squasher.
var longOutput = strings.Repeat("line of build output with some words in it\\n", 60)

func TestRewriteMessageShapes(t *testing.T) {
	tests := []struct {
		name string
		body []byte
		// squashed is how many texts the stand-in squasher must shorten.
		squashed int
	}{
		{"content string", chat("gpt-4o",
			`{"role":"user","content":"list files"}`,
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]}`,
			`{"role":"tool","tool_call_id":"c1","content":"`+longOutput+`"}`), 1},
		{"content as text parts (qwen-code)", chat("qwen3-coder",
			`{"role":"user","content":[{"type":"text","text":"run it"}]}`,
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"run_shell_command","arguments":"{\"command\":\"make\"}"}}]}`,
			`{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"`+longOutput+`"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},{"type":"text","text":"short"},{"type":"text","text":"`+longOutput+`x"}]}`), 2},
		{"null content with tool_calls, arguments as object", chat("gpt-4o",
			`{"role":"user","content":"go"}`,
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":{"command":"make"}}}]}`,
			`{"role":"tool","tool_call_id":"c1","content":"`+longOutput+`"}`), 1},
		{"legacy role function", chat("gpt-3.5-turbo",
			`{"role":"user","content":"weather?"}`,
			`{"role":"assistant","content":null,"function_call":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}`,
			`{"role":"function","name":"get_weather","content":"`+longOutput+`"}`), 1},
		{"developer role, audio and refusal parts", chat("o3",
			`{"role":"developer","content":"be brief"}`,
			`{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},{"type":"text","text":"`+longOutput+`"}]}`,
			`{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]}`), 0},
		{"unknown roles, unknown fields, odd spacing", []byte(`  {"x_vendor":{"b":1,"a":[true,null]},` + "\n\t" + `"model" : "gpt-4o" ,"tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}],` +
			`"messages" : [ {"role":"critic","content":"` + longOutput + `","weight":0.5} , "not an object", 42, null,` +
			`{"role":"assistant","tool_calls":[{"id":"c1","function":{"name":"bash","arguments":"not json"}}],"reasoning_content":"hmm"},` +
			`{"content":"` + longOutput + `","tool_call_id":"c1","role":"tool","cache_control":{"type":"ephemeral"}},` +
			`{"role":"tool","tool_call_id":"nope","content":{"weird":"object content"}}` +
			` ], "response_format":{"type":"json_object"},"tool_choice":"auto","stream":false,"temperature":0.2}` + "\n"), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestPipeline()
			res := p.Rewrite(tt.body)
			if !res.Understood {
				t.Fatal("not understood")
			}
			assertOnlyContentsChanged(t, tt.body, res.Body)
			if res.Squashed != tt.squashed {
				t.Errorf("Squashed = %d, want %d", res.Squashed, tt.squashed)
			}
			if res.Changed != (tt.squashed > 0) || res.Changed != (string(res.Body) != string(tt.body)) {
				t.Errorf("Changed = %v with %d squashed", res.Changed, res.Squashed)
			}
			if res.TokensAfter > res.TokensBefore || (res.Changed && res.TokensAfter == res.TokensBefore) {
				t.Errorf("tokens %d -> %d", res.TokensBefore, res.TokensAfter)
			}
			if res.BytesBefore != len(tt.body) || res.BytesAfter != len(res.Body) {
				t.Errorf("bytes %d -> %d, body %d -> %d", res.BytesBefore, res.BytesAfter, len(tt.body), len(res.Body))
			}
			// The squashed texts are what the stand-in made of them.
			if tt.squashed > 0 && !strings.Contains(string(res.Body), "stand-in squash: truncated") {
				t.Error("squashed text not in the body")
			}
			// Counting the forwarded body on its own agrees with TokensAfter.
			n, err := p.Counter().CountRequest(chatFormat, res.Body)
			if err != nil || n != res.TokensAfter {
				t.Errorf("CountRequest(out) = %d, %v; TokensAfter %d", n, err, res.TokensAfter)
			}
			n, _ = p.Counter().CountRequest(chatFormat, tt.body)
			if n != res.TokensBefore {
				t.Errorf("CountRequest(in) = %d; TokensBefore %d", n, res.TokensBefore)
			}
		})
	}
}

func TestRewriteKeepsPartsArrayShape(t *testing.T) {
	body := chat("gpt-4o",
		`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]}`,
		`{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"`+longOutput+`","extra":1},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}`)
	res := newTestPipeline().Rewrite(body)
	parts := gjson.GetBytes(res.Body, "messages.1.content")
	if !parts.IsArray() || len(parts.Array()) != 2 {
		t.Fatalf("content is no longer a 2-part array: %s", parts.Raw)
	}
	if got := parts.Get("0.extra").Raw; got != "1" {
		t.Errorf("part field lost: %q", got)
	}
	if got := parts.Get("1").Raw; got != `{"type":"image_url","image_url":{"url":"https://x/y.png"}}` {
		t.Errorf("image part changed: %s", got)
	}
	want := truncSquash(ToolCall{Name: "bash"}, gjson.GetBytes(body, "messages.1.content.0.text").Str)
	if got := parts.Get("0.text").Str; got != want {
		t.Errorf("text part = %.80q, want the stand-in's output", got)
	}
}

func TestRewriteNotUnderstood(t *testing.T) {
	for _, body := range []string{
		``, `{`, `{"messages":[}`, `nul`, `"just a string"`, `[]`, `[{"role":"user"}]`, `42`,
		`{"model":"gpt-4o"}`, `{"messages":{"role":"user"}}`, `{"messages":"hi"}`, `{"prompt":"hello","model":"gpt-3.5-turbo-instruct"}`,
		`{"messages":[{"role":"tool","content":"x"}]` + "\x00",
	} {
		res := newTestPipeline().Rewrite([]byte(body))
		if res.Understood || res.Changed || string(res.Body) != body {
			t.Errorf("%q: Understood %v Changed %v body %q", body, res.Understood, res.Changed, res.Body)
		}
		if res.BytesBefore != len(body) || res.BytesAfter != len(body) || res.TokensBefore != 0 {
			t.Errorf("%q: %+v", body, res)
		}
	}
}

func TestRewriteEmptyMessages(t *testing.T) {
	body := []byte(`{"model":"gpt-4o","messages":[],"stream":true}`)
	res := newTestPipeline().Rewrite(body)
	if !res.Understood || res.Changed || !res.Stream || res.Messages != 0 || res.TokensBefore != replyPriming {
		t.Errorf("%+v", res)
	}
}

func TestRewriteNilSquashLeavesBodyAlone(t *testing.T) {
	body := chat("gpt-4o",
		`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]}`,
		`{"role":"tool","tool_call_id":"c1","content":"`+longOutput+`"}`)
	res := New(Config{Format: chatFormat}).Rewrite(body)
	if res.Changed || &res.Body[0] != &body[0] || res.TokensAfter != res.TokensBefore || res.TokensBefore == 0 {
		t.Errorf("%+v", res)
	}
}

func TestRewriteSquasherSeesToolNames(t *testing.T) {
	seen := map[string]string{}
	p := New(Config{Format: chatFormat, Squasher: squashWith(func(call ToolCall, content string) string {
		seen[content] = call.Name
		return content
	})})
	p.Rewrite(chat("gpt-4o",
		`{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"grep","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"bash","arguments":"{}"}}]}`,
		`{"role":"tool","tool_call_id":"b","content":"out-b"}`,
		`{"role":"tool","tool_call_id":"a","content":"out-a"}`,
		`{"role":"tool","tool_call_id":"zzz","name":"named","content":"out-unmatched"}`,
		`{"role":"function","name":"legacy_fn","content":"out-legacy"}`,
		`{"role":"user","content":"not a tool result"}`))
	want := map[string]string{"out-a": "grep", "out-b": "bash", "out-unmatched": "named", "out-legacy": "legacy_fn"}
	if len(seen) != len(want) {
		t.Errorf("squasher saw %v", seen)
	}
	for c, tool := range want {
		if seen[c] != tool {
			t.Errorf("%s: tool %q, want %q", c, seen[c], tool)
		}
	}
}

func TestRewriteSquashPanicPassesThrough(t *testing.T) {
	body := chat("gpt-4o",
		`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]}`,
		`{"role":"tool","tool_call_id":"c1","content":"`+longOutput+`"}`)
	res := New(Config{Format: chatFormat, Squasher: squashWith(func(ToolCall, string) string { panic("boom") })}).Rewrite(body)
	if !res.Understood || res.Changed {
		t.Errorf("%+v", res)
	}
}

func TestRewriteIgnoresSquashThatCostsTokens(t *testing.T) {
	body := chat("gpt-4o",
		`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]}`,
		`{"role":"tool","tool_call_id":"c1","content":"ok"}`)
	res := New(Config{Format: chatFormat, Squasher: squashWith(func(_ ToolCall, c string) string { return c + " and more words" })}).Rewrite(body)
	if res.Changed || res.Squashed != 0 {
		t.Errorf("%+v", res)
	}
}

func TestRewriteSquashCache(t *testing.T) {
	calls := 0
	p := New(Config{Format: chatFormat, Squasher: squashWith(func(call ToolCall, c string) string { calls++; return truncSquash(call, c) })})
	turn := []string{
		`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]}`,
		`{"role":"tool","tool_call_id":"c1","content":"` + longOutput + `"}`,
	}
	first := p.Rewrite(chat("gpt-4o", turn...))
	turn = append(turn, `{"role":"user","content":"next"}`)
	second := p.Rewrite(chat("gpt-4o", turn...))
	if calls != 1 {
		t.Errorf("squasher called %d times for one unchanged output", calls)
	}
	if !strings.HasPrefix(string(second.Body), strings.TrimSuffix(string(first.Body), "]}")) {
		t.Error("second turn does not extend the first")
	}
}
