package replay

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/tidwall/gjson"
)

// post sends body to the simulation at f's path and returns its answer.
func post(t *testing.T, srv *httptest.Server, f Format, body string) reply {
	t.Helper()
	resp, err := http.Post(srv.URL+"/v1"+f.Path(), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: out}
}

func TestSimRefusesWhatTheAPIRefusesInItsErrorShape(t *testing.T) {
	srv := httptest.NewServer(NewSim(NewTokens(), 0))
	defer srv.Close()
	for _, tc := range []struct {
		rule   string
		format Format
		body   string
		want   string // in the error's message
	}{
		{"chat: a tool result answering no call", Chat,
			`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"call_1","content":"x"}]}`, "call_1"},
		{"chat: a call left unanswered", Chat,
			`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c7","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"and?"}]}`, "c7"},
		{"chat: no model", Chat, `{"messages":[{"role":"user","content":"hi"}]}`, "model"},
		{"Responses: an output for no call", Responses,
			`{"model":"m","input":[{"role":"user","content":"hi"},{"type":"function_call_output","call_id":"call_2","output":"x"}]}`, "call_2"},
		{"Messages: a key the API does not know", Messages,
			`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"stream_options":{}}`, "stream_options"},
		{"Messages: no max_tokens", Messages, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			r := post(t, srv, tc.format, tc.body)
			if r.status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", r.status, r.body)
			}
			msg, typ := gjson.GetBytes(r.body, "error.message").String(), gjson.GetBytes(r.body, "error.type").String()
			if !strings.Contains(msg, tc.want) || typ != "invalid_request_error" {
				t.Errorf("error %s: want an invalid_request_error naming %q", r.body, tc.want)
			}
			if got := gjson.GetBytes(r.body, "type").String(); (tc.format == Messages) != (got == "error") {
				t.Errorf("error %s: not in the %s API's shape", r.body, tc.format)
			}
		})
	}
}

// Each format's answer, whole or streamed, carries the usage where its API
// puts it, and the meter reads it back: the prompt, and on a second turn
// its cached part.
func TestSimReportsUsageAsEachAPIDoes(t *testing.T) {
	long := strings.Repeat("history ", 1500)
	bodies := map[Format][2]string{
		Chat: {`{"model":"m","messages":[{"role":"user","content":"` + long + `"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"` + long + `"},{"role":"assistant","content":"Done."},{"role":"user","content":"more"}]}`},
		Responses: {`{"model":"m","input":[{"role":"user","content":"` + long + `"}]}`,
			`{"model":"m","input":[{"role":"user","content":"` + long + `"},{"role":"assistant","content":"Done."},{"role":"user","content":"more"}]}`},
		Messages: {`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"` + long + `"}]}`,
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"` + long + `"},{"role":"assistant","content":"Done."},{"role":"user","content":"more"}]}`},
	}
	tok := NewTokens()
	for f, turns := range bodies {
		for _, stream := range []bool{false, true} {
			srv := httptest.NewServer(NewSim(tok, 0))
			var got [2]reply
			for i, b := range turns {
				if stream {
					b = strings.Replace(b, `"model":"m"`, `"model":"m","stream":true`, 1)
					if f == Chat {
						b = strings.Replace(b, `"stream":true`, `"stream":true,"stream_options":{"include_usage":true}`, 1)
					}
				}
				got[i] = post(t, srv, f, b)
			}
			srv.Close()
			first, err := tok.prompt(f, []byte(turns[0]))
			if err != nil {
				t.Fatal(err)
			}
			second, _ := tok.prompt(f, []byte(turns[1]))
			u0, u1 := usageOf(f, got[0]), usageOf(f, got[1])
			if u0.InputTokens != first.tokens || u0.CachedTokens != 0 || u0.OutputTokens != tok.Count(AgentReply) {
				t.Errorf("%s stream=%v: first turn usage %+v, want %d in, none cached", f, stream, u0, first.tokens)
			}
			if want := first.tokens - first.conv.Priming; u1.InputTokens != second.tokens || u1.CachedTokens != want {
				t.Errorf("%s stream=%v: second turn usage %+v, want %d in, %d cached", f, stream, u1, second.tokens, want)
			}
			if f == Messages && !stream {
				// Anthropic's input_tokens is the part neither read nor written.
				if in := gjson.GetBytes(got[1].body, "usage.input_tokens").Int(); int(in) != second.tokens-u1.CachedTokens {
					t.Errorf("Messages input_tokens %d, want the uncached %d", in, second.tokens-u1.CachedTokens)
				}
			}
		}
	}
}

// Anthropic bills the part of a prompt it writes to its cache, up to the
// last cache_control marker, above an input token: the simulation reports
// it as written, and nothing for a request without markers.
func TestSimReportsMessagesCacheWritesUpToTheLastMarker(t *testing.T) {
	long := strings.Repeat("history ", 1500)
	marked := `{"type":"text","text":"` + long + `","cache_control":{"type":"ephemeral"}}`
	tok := NewTokens()
	for _, tc := range []struct {
		rule      string
		turns     [2]string
		wantWrite func(first, second prompt, cached int) [2]int
	}{
		{"a marker on the last message: all of the first turn is written, then what the second adds up to it",
			[2]string{`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[` + marked + `]}]}`,
				`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"` + long + `"},{"role":"assistant","content":"Done."},` +
					`{"role":"user","content":[{"type":"text","text":"more","cache_control":{"type":"ephemeral"}}]}]}`},
			func(first, second prompt, cached int) [2]int {
				return [2]int{first.tokens - first.conv.Priming, second.tokens - second.conv.Priming - cached}
			}},
		{"no marker: nothing is written", [2]string{`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"` + long + `"}]}`,
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"` + long + `"},{"role":"assistant","content":"Done."},{"role":"user","content":"more"}]}`},
			func(prompt, prompt, int) [2]int { return [2]int{0, 0} }},
	} {
		srv := httptest.NewServer(NewSim(tok, 0))
		u0, u1 := usageOf(Messages, post(t, srv, Messages, tc.turns[0])), usageOf(Messages, post(t, srv, Messages, tc.turns[1]))
		srv.Close()
		first, _ := tok.prompt(Messages, []byte(tc.turns[0]))
		second, _ := tok.prompt(Messages, []byte(tc.turns[1]))
		want := tc.wantWrite(first, second, u1.CachedTokens)
		if u0.CacheWriteTokens != want[0] || u1.CacheWriteTokens != want[1] || u1.CachedTokens == 0 {
			t.Errorf("%s: written %d then %d (%d read), want %d then %d", tc.rule, u0.CacheWriteTokens, u1.CacheWriteTokens,
				u1.CachedTokens, want[0], want[1])
		}
	}
}

func TestSimAnswersSummaryCallsWithASummaryOfItsLength(t *testing.T) {
	tok := NewTokens()
	srv := httptest.NewServer(NewSim(tok, 400))
	defer srv.Close()
	prompt := compactor.BuildPromptFor(0, "", "[user] fix the bug\n[assistant] done")
	transcript := `{"model":"m","messages":[{"role":"user","content":` + jsonString(prompt) + `}]}`
	// The cache-reusing form: the history as sent, then the instruction.
	reused := `{"model":"m","messages":[{"role":"system","content":"agent"},{"role":"user","content":"fix it"},` +
		`{"role":"assistant","content":"on it"},{"role":"user","content":` + jsonString(prompt) + `}]}`
	// ctxpress's own instruction after the conversation as it forwarded it:
	// a message of its own after tool results, a line after the user's
	// last text, or a text part of its own.
	instruction := compactor.HistoryPrompt(compactor.HistoryInput{})
	history := `{"model":"m","messages":[{"role":"system","content":"agent"},{"role":"user","content":"fix it"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"ok"},{"role":"assistant","content":"Pausing the task here for a context checkpoint."},` +
		`{"role":"user","content":` + jsonString(instruction) + `}]}`
	joined := `{"model":"m","messages":[{"role":"user","content":` + jsonString("fix it\n\n"+instruction) + `}]}`
	part := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"fix it"},{"type":"text","text":` + jsonString(instruction) + `}]}]}`
	for _, tc := range []struct {
		rule      string
		body      string
		wantOut   int
		truncated bool
	}{
		{"the transcript form: a summary of -summary-tokens", transcript, 400, false},
		{"the history then the instruction: a summary too", reused, 400, false},
		{"ctxpress's history instruction in a message of its own: a summary", history, 400, false},
		{"the instruction on a line after the user's text: a summary", joined, 400, false},
		{"the instruction as a text part of its own: a summary", part, 400, false},
		{"a cap under the length: cut at it", strings.Replace(transcript, `"model":"m"`, `"model":"m","max_tokens":50`, 1), 50, true},
		{"an agent turn quoting the lead mid-message: the agent reply", `{"model":"m","messages":[{"role":"user","content":"see: ` +
			compactor.SummarizerLead + `"}]}`, tok.Count(AgentReply), false},
	} {
		r := post(t, srv, Chat, tc.body)
		u := usageOf(Chat, r)
		finish := gjson.GetBytes(r.body, "choices.0.finish_reason").String()
		if u.OutputTokens != tc.wantOut || (finish == "length") != tc.truncated {
			t.Errorf("%s: %d output tokens, finish %s; want %d, truncated %v", tc.rule, u.OutputTokens, finish, tc.wantOut, tc.truncated)
		}
	}
}

func jsonString(s string) string {
	var b bytes.Buffer
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
