package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ctxpress/ctxpress/compaction"
	"github.com/ctxpress/ctxpress/internal/chatcheck"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/state"
)

// strictUpstream answers like a strict provider: 400 in the OpenAI shape
// for a body that is not valid UTF-8 JSON, not a well-formed chat request
// (strictChat), or larger than a 128k context; a normal completion
// otherwise. ValidateChat is added for tool pairing.
func strictUpstream(t *testing.T) *openaitest.Server {
	up := openaitest.New(t)
	up.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		reject := func(code, msg string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": code}})
			w.Write(b)
		}
		if !utf8.Valid(body) {
			reject("invalid_body", "body is not valid UTF-8")
			return
		}
		if err := strictChat(body); err != nil {
			reject("invalid_request", err.Error())
			return
		}
		if err := chatcheck.ValidateChat(body); err != nil {
			reject("invalid_request", err.Error())
			return
		}
		if openaitest.PromptTokens(body) > 128000 {
			reject("context_length_exceeded", "too many tokens")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":1}}`, openaitest.PromptTokens(body))
	})
	return up
}

// strictChat checks the parts of a chat request a strict server types:
// known top-level keys, model a string, stream a bool, messages objects
// with a known role, content a string, null or text parts, tool calls with
// string ids and JSON-object arguments, no duplicate keys.
func strictChat(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := checkNoDuplicateKeys(dec); err != nil {
		return err
	}
	var req struct {
		Model    *string           `json:"model"`
		Stream   *bool             `json:"stream"`
		Messages []json.RawMessage `json:"messages"`
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return err
	}
	for k := range top {
		switch k {
		case "model", "messages", "stream", "stream_options", "temperature", "max_tokens", "tools", "tool_choice", "prompt_cache_key":
		default:
			return fmt.Errorf("unrecognized request argument %q", k)
		}
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return err
	}
	if req.Model == nil || len(req.Messages) == 0 {
		return fmt.Errorf("model and messages are required")
	}
	for i, raw := range req.Messages {
		var m struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID *string         `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function *struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("messages[%d]: %w", i, err)
		}
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return fmt.Errorf("messages[%d].role %q", i, m.Role)
		}
		var text *string
		var parts []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if len(m.Content) > 0 && string(m.Content) != "null" && json.Unmarshal(m.Content, &text) != nil {
			if err := json.Unmarshal(m.Content, &parts); err != nil {
				return fmt.Errorf("messages[%d].content: %w", i, err)
			}
			for _, p := range parts {
				if p.Type != "text" || p.Text == nil {
					return fmt.Errorf("messages[%d].content: a part is not text", i)
				}
			}
		}
		if m.Role == "tool" && m.ToolCallID == nil {
			return fmt.Errorf("messages[%d]: tool_call_id is required", i)
		}
		for _, c := range m.ToolCalls {
			var args map[string]any
			if c.ID == "" || c.Function == nil || json.Unmarshal([]byte(c.Function.Arguments), &args) != nil {
				return fmt.Errorf("messages[%d].tool_calls: id, function and JSON-object arguments required", i)
			}
		}
	}
	return nil
}

// checkNoDuplicateKeys walks the JSON tokens of dec and fails on an object
// that repeats a key (parsers disagree on which one wins) or on nesting
// deeper than encoding/json's own limit.
func checkNoDuplicateKeys(dec *json.Decoder) error {
	var walk func(depth int) error
	walk = func(depth int) error {
		if depth > 10000 {
			return errors.New("nesting too deep")
		}
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				if seen[k.(string)] {
					return fmt.Errorf("duplicate key %q", k)
				}
				seen[k.(string)] = true
				if err := walk(depth + 1); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for dec.More() {
				if err := walk(depth + 1); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	return walk(0)
}

// nested returns depth levels of open, then inner, then the closings.
func nested(open, close, inner string, depth int) string {
	return strings.Repeat(open, depth) + inner + strings.Repeat(close, depth)
}

func chatWith(messages string) string {
	return `{"model":"gpt-4o","messages":` + messages + `}`
}

const okUser = `{"role":"user","content":"hi"}`

var asstCall = func(id, args string) string {
	return `{"role":"assistant","content":null,"tool_calls":[{"id":"` + id + `","type":"function","function":{"name":"bash","arguments":` + args + `}}]}`
}

// A hostile request is answered (pass-through, byte-exact, or a clear 4xx in
// the OpenAI shape), never crashes, hangs nor writes to the db: ctxpress
// records only turns the upstream accepted, and every one of these is
// refused by a strict provider.
func TestBadInput(t *testing.T) {
	up := strictUpstream(t)
	deps, st := chatDeps(t)
	cfg := Config{Upstream: up.BaseURL(), MaxBodyBytes: 80 << 20, Compaction: compaction.Config{Enabled: true}}
	p := startProxyWith(t, cfg, deps)

	manyTiny := make([]string, 100_000)
	for i := range manyTiny {
		manyTiny[i] = `{"role":"user","content":"a"}`
	}
	// Tokenizing 50 MiB takes ~12 s of one core (tiktoken, ~4 MB/s), ~60 s
	// under the race detector.
	hugeSize := 50 << 20
	if raceEnabled {
		hugeSize = 8 << 20
	}
	huge := strings.Repeat("a", hugeSize)
	// Nesting deep enough that a recursive reader (gjson's validator, a
	// recursive canonicaliser) overflows the 1 GB goroutine stack, which
	// kills the process: 24 MB of brackets, well under max_body_bytes.
	deep := 12_000_000
	if raceEnabled {
		deep = 1_000_000
	}

	type tc struct {
		name   string
		body   string
		header string // extra raw header lines, each ending in \r\n
		path   string // default /v1/chat/completions
		// valid: a well-formed chat a strict server accepts; ctxpress may
		// compact and record it like any conversation.
		valid bool
		// ownHeader: the client itself sends X-Injected as a header line
		// (HTTP lets a bare LF end a line), so the upstream may see it.
		ownHeader bool
	}
	cases := []tc{
		{name: "empty body", body: ""},
		{name: "truncated JSON", body: `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"`},
		{name: "array body", body: `[` + okUser + `]`},
		{name: "string body", body: `"messages"`},
		{name: "number body", body: `42`},
		{name: "null body", body: `null`},
		{name: "messages object", body: chatWith(okUser)},
		{name: "messages string", body: chatWith(`"hello"`)},
		{name: "messages null", body: chatWith(`null`)},
		{name: "message without role", body: chatWith(`[{"content":"hi"}]`)},
		{name: "unknown role", body: chatWith(`[{"role":"wizard","content":"hi"}]`)},
		{name: "numeric role", body: chatWith(`[{"role":7,"content":"hi"}]`)},
		{name: "message not an object", body: chatWith(`[1,"two",null]`)},
		{name: "content number", body: chatWith(`[{"role":"user","content":3.14}]`)},
		{name: "content object", body: chatWith(`[{"role":"user","content":{"text":"hi"}}]`)},
		{name: "content bool", body: chatWith(`[{"role":"user","content":true}]`)},
		{name: "content parts not objects", body: chatWith(`[{"role":"user","content":[1,"a",null]}]`)},
		{name: "content part text not a string", body: chatWith(`[{"role":"user","content":[{"type":"text","text":5}]}]`)},
		{name: "tool content object", body: chatWith(`[` + okUser + `,` + asstCall("c1", `"{}"`) + `,{"role":"tool","tool_call_id":"c1","content":{"x":1}}]`)},
		{name: "tool_calls not an array", body: chatWith(`[` + okUser + `,{"role":"assistant","tool_calls":"bash"}]`)},
		{name: "arguments not a string", body: chatWith(`[` + okUser + `,` + asstCall("c1", `{"command":"ls"}`) + `,{"role":"tool","tool_call_id":"c1","content":"x"}]`)},
		{name: "arguments invalid JSON", body: chatWith(`[` + okUser + `,` + asstCall("c1", `"{\"command\": ls"`) + `,{"role":"tool","tool_call_id":"c1","content":"x"}]`)},
		{name: "tool call without function", body: chatWith(`[` + okUser + `,{"role":"assistant","tool_calls":[{"id":"c1","type":"function"}]},{"role":"tool","tool_call_id":"c1","content":"x"}]`)},
		{name: "duplicate tool_call ids", body: chatWith(`[` + okUser + `,{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}},{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"a"},{"role":"tool","tool_call_id":"c1","content":"b"}]`)},
		{name: "orphan tool message", body: chatWith(`[` + okUser + `,{"role":"tool","tool_call_id":"nobody","content":"x"}]`)},
		{name: "tool message without id", body: chatWith(`[` + okUser + `,` + asstCall("c1", `"{}"`) + `,{"role":"tool","content":"x"}]`)},
		{name: "50 MiB single string (8 MiB under -race)", body: chatWith(`[{"role":"user","content":"` + huge + `"}]`)},
		{name: "10000-deep arrays in content", body: chatWith(`[{"role":"user","content":` + nested("[", "]", "1", 10000) + `}]`)},
		{name: "10000-deep objects beside messages", body: `{"model":"gpt-4o","x":` + nested(`{"a":`, "}", "1", 10000) + `,"messages":[` + okUser + `]}`},
		{name: "10000-deep messages", body: `{"model":"gpt-4o","messages":` + nested("[", "]", "", 10000) + `}`},
		{name: "12M-deep arrays in content", body: chatWith(`[{"role":"user","content":` + nested("[", "]", "1", deep) + `}]`)},
		{name: "12M-deep messages", body: `{"model":"gpt-4o","messages":` + nested("[", "]", "", deep) + `}`},
		{name: "12M-deep body", body: nested("[", "]", "", deep)},
		{name: "12M-deep tool arguments", body: chatWith(`[` + okUser + `,` + asstCall("c1", `"`+nested("[", "]", "1", deep)+`"`) + `,{"role":"tool","tool_call_id":"c1","content":"x"}]`)},
		{name: "12M-deep JSON as a tool output", body: chatWith(`[{"role":"user","content":"a conversation of its own"},` + asstCall("c1", `"{}"`) + `,{"role":"tool","tool_call_id":"c1","content":"` + nested("[", "]", "1", deep) + `"}]`), valid: true},
		{name: "12M-deep JSON as a user message", body: chatWith(`[{"role":"user","content":"` + nested(`{\"a\":`, "}", "1", deep/4) + `"}]`)},
		{name: "4 MiB of whitespace in content", body: chatWith(`[{"role":"user","content":"` + strings.Repeat(` \n`, 2<<20) + `x"}]`)},
		{name: "invalid UTF-8 in content", body: chatWith(`[{"role":"user","content":"bad \xff\xfe\xfd bytes"}]`)},
		{name: "invalid UTF-8 in role", body: chatWith(`[{"role":"us\xc3er","content":"hi"}]`)},
		{name: "raw NUL bytes", body: chatWith("[{\"role\":\"user\",\"content\":\"a\x00b\"}]")},
		{name: "lone surrogate escape", body: chatWith(`[{"role":"user","content":"\ud800"}, {"role":"tool","tool_call_id":"x","content":"y"}]`)},
		{name: "100000 tiny messages", body: chatWith(`[` + strings.Join(manyTiny, ",") + `]`), valid: true},
		{name: "model not a string", body: `{"model":{"id":1},"messages":[` + okUser + `],"stream":"yes"}`},
		{name: "duplicate messages key", body: `{"model":"gpt-4o","messages":[` + okUser + `],"messages":"again"}`},
		{name: "number out of range", body: `{"model":"gpt-4o","temperature":1e999999,"messages":"x"}`},
		{name: "CRLF in path", path: "/v1/chat/completions%0d%0aX-Injected:%20yes", body: chatWith(`"x"`)},
		{name: "CRLF in query", path: "/v1/chat/completions?a=%0D%0AX-Injected:%20yes", body: chatWith(`"x"`)},
		{name: "obs-fold header continuation", header: "X-Session-ID: abc\r\n X-Injected: yes\r\n", body: chatWith(`"x"`)},
		{name: "bare CR in header value", header: "X-Session-ID: abc\rX-Injected: yes\r\n", body: chatWith(`"x"`)},
		{name: "bare LF in header value", header: "X-Session-ID: abc\nX-Injected: yes\r\n", body: chatWith(`"x"`), ownHeader: true},
		{name: "CRLF in prompt_cache_key", body: `{"model":"gpt-4o","prompt_cache_key":"abc\r\nX-Injected: yes","messages":[` + okUser + `]}`, valid: true},
		{name: "CRLF in X-Session-ID percent-encoded", header: "X-Session-ID: abc%0d%0aX-Injected:%20yes\r\n", body: chatWith(`"x"`)},
		{name: "NUL in header value", header: "X-Session-ID: abc\x00X-Injected: yes\r\n", body: chatWith(`"x"`)},
	}
	addr := strings.TrimPrefix(p.URL, "http://")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(up.Requests())
			recsBefore, _ := st.List(state.ListOptions{})
			path := c.path
			if path == "" {
				path = "/v1/chat/completions"
			}
			var resp *http.Response
			var respBody []byte
			// A hang guard, not a bound: counting the 50 MiB string's
			// tokens alone takes over 30 s.
			within(t, 5*time.Minute, "the answer", func() {
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close()
				w := bufio.NewWriterSize(conn, 1<<20)
				fmt.Fprintf(w, "POST %s HTTP/1.1\r\nHost: ctxpress\r\nAuthorization: Bearer sk-hostile\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n", path, c.header, len(c.body))
				w.WriteString(c.body)
				if err := w.Flush(); err != nil {
					t.Error(err)
					return
				}
				resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Errorf("no HTTP answer: %v", err)
					return
				}
				respBody, err = io.ReadAll(resp.Body)
				if err != nil {
					t.Errorf("answer cut: %v", err)
				}
			})
			if resp == nil {
				return
			}
			if resp.Header.Get("X-Injected") != "" {
				t.Fatal("an injected header reached the client")
			}
			reqs := up.Requests()[before:]
			for _, r := range reqs {
				if !c.ownHeader && r.Header.Get("X-Injected") != "" {
					t.Fatal("an injected header reached the upstream")
				}
			}
			switch {
			case c.valid:
				// Compacted or not, it is answered by the upstream.
				if resp.StatusCode != 200 {
					t.Fatalf("a valid request got %d: %.300s", resp.StatusCode, respBody)
				}
				t.Logf("%d upstream requests (a summary call when compacted), X-Ctxpress-Compacted: %s", len(reqs), resp.Header.Get(HeaderCompacted))
				// Its record is written off the request path: let it land
				// before the next case counts records.
				waitFor(t, func() bool { recs, _ := st.List(state.ListOptions{}); return len(recs) > len(recsBefore) }, "the valid turn recorded")
			case len(reqs) == 0:
				// Refused by ctxpress itself: a 4xx in the OpenAI shape.
				if resp.StatusCode < 400 || resp.StatusCode > 499 {
					t.Fatalf("not forwarded, yet status %d: %.300s", resp.StatusCode, respBody)
				}
				resp.Body = io.NopCloser(bytes.NewReader(respBody))
				decodeError(t, resp)
			case len(reqs) == 1:
				// Forwarded exactly as sent; the upstream's refusal comes back.
				if !bytes.Equal(reqs[0].Body, []byte(c.body)) {
					t.Fatalf("forwarded body differs from the client's (%d vs %d bytes)", len(reqs[0].Body), len(c.body))
				}
				if resp.StatusCode < 400 || resp.StatusCode > 499 || !bytes.Contains(respBody, []byte(`"invalid_request_error"`)) {
					t.Fatalf("the strict upstream's refusal did not come back: %d %.300s", resp.StatusCode, respBody)
				}
			default:
				t.Fatalf("%d upstream requests for one client request", len(reqs))
			}
			if !c.valid {
				// The answer is sent after the turn is handed to the
				// recorder, which writes it off the request path.
				waitFor(t, p.recorderDrained, "the recorder's queue written")
				if recs, _ := st.List(state.ListOptions{}); len(recs) != len(recsBefore) {
					t.Fatalf("a refused request wrote a record: %d -> %d", len(recsBefore), len(recs))
				}
			}
			if strings.Contains(p.logs.String(), `"level":"error"`) {
				t.Fatalf("an error was logged (a recovered panic?):\n%s", lastLines(p.logs.String(), 3))
			}
		})
	}
	if status, _, _ := send(t, "GET", p.URL+"/ctxpress/healthz", "", nil); status != 200 {
		t.Fatalf("healthz after the hostile requests: %d", status)
	}
}
