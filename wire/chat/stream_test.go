package chat

import (
	"testing"
)

func TestEnsureStreamUsage(t *testing.T) {
	tests := []struct {
		name, in, want string
		injected       bool
	}{
		{"not streamed", `{"model":"m","messages":[]}`, `{"model":"m","messages":[]}`, false},
		{"stream false", `{"stream":false,"messages":[]}`, `{"stream":false,"messages":[]}`, false},
		{"stream as string is not a stream", `{"stream":"true"}`, `{"stream":"true"}`, false},
		{"already asks for usage", `{"stream":true,"stream_options":{"include_usage":true}}`, `{"stream":true,"stream_options":{"include_usage":true}}`, false},
		{"no stream_options: appended", `{"model":"m","stream":true,"messages":[]}`, `{"model":"m","stream":true,"messages":[],"stream_options":{"include_usage":true}}`, true},
		{"null stream_options", `{"stream":true,"stream_options":null,"x":1}`, `{"stream":true,"stream_options":{"include_usage":true},"x":1}`, true},
		{"other fields kept", `{"stream":true,"stream_options":{"include_obfuscation":false},"x":1}`, `{"stream":true,"stream_options":{"include_obfuscation":false,"include_usage":true},"x":1}`, true},
		{"include_usage false", `{"stream":true,"stream_options":{"include_usage":false,"a":1}}`, `{"stream":true,"stream_options":{"include_usage":true,"a":1}}`, true},
		{"stream_options not an object", `{"stream":true,"stream_options":[1]}`, `{"stream":true,"stream_options":[1]}`, false},
		{"invalid JSON", `{"stream":true`, `{"stream":true`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			out, injected := EnsureStreamUsage(in)
			if string(out) != tt.want || injected != tt.injected {
				t.Errorf("got %s %v, want %s %v", out, injected, tt.want, tt.injected)
			}
			if string(in) != tt.in {
				t.Error("input modified")
			}
		})
	}
}

func TestStreamAsks(t *testing.T) {
	for _, tt := range []struct {
		name, body    string
		stream, usage bool
	}{
		{"not streamed", `{"model":"m"}`, false, false},
		{"stream false asks no usage, whatever its options", `{"stream":false,"stream_options":{"include_usage":true}}`, false, false},
		{"a stream without options", `{"stream":true}`, true, false},
		{"a stream asking for usage", `{"stream":true,"stream_options":{"include_usage":true}}`, true, true},
		{"include_usage false", `{"stream":true,"stream_options":{"include_usage":false}}`, true, false},
		{"a nested stream key is not the request's", `{"messages":[{"stream":true}]}`, false, false},
	} {
		if stream, usage := StreamAsks([]byte(tt.body)); stream != tt.stream || usage != tt.usage {
			t.Errorf("%s: StreamAsks = %v, %v; want %v, %v", tt.name, stream, usage, tt.stream, tt.usage)
		}
	}
}

// Each refusal row is an answer a real server gives to a field it does not
// know; the others are answers that must not stop ctxpress asking for usage.
func TestStreamOptionsRefused(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		body   string
		want   bool
	}{
		{"pydantic extra_forbidden (FastAPI servers, Mistral)", 422,
			`{"detail":[{"type":"extra_forbidden","loc":["body","stream_options"],"msg":"Extra inputs are not permitted","input":{"include_usage":true}}]}`, true},
		{"pydantic with a 400", 400,
			`{"detail":[{"type":"extra_forbidden","loc":["body","stream_options"],"msg":"Extra inputs are not permitted"}]}`, true},
		{"OpenAI-shaped unrecognized argument", 400,
			`{"error":{"message":"Unrecognized request argument supplied: stream_options","type":"invalid_request_error","param":null,"code":null}}`, true},
		{"OpenAI-shaped error naming the param", 400,
			`{"error":{"message":"Unsupported parameter.","type":"invalid_request_error","param":"stream_options","code":"unsupported_parameter"}}`, true},
		{"plain message field", 400, `{"message":"property 'stream_options' is unsupported"}`, true},
		{"error as a string", 400, `{"error":"unknown field stream_options"}`, true},
		{"serde plain text (axum, TGI)", 422,
			"Failed to deserialize the JSON body into the target type: unknown field `stream_options`, expected one of `model`, `messages` at line 1 column 120", true},
		{"another field's error that echoes stream_options in its input", 422,
			`{"detail":[{"type":"missing","loc":["body","messages"],"msg":"Field required","input":{"model":"m","stream_options":{"include_usage":true}}}]}`, false},
		{"a context overflow", 400,
			`{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`, false},
		{"a server error naming the field is not a refusal of it", 500,
			`{"error":{"message":"stream_options handling crashed"}}`, false},
		{"unauthorized", 401, `{"error":{"message":"Incorrect API key provided"}}`, false},
		{"a success", 200, `{"stream_options":1}`, false},
	} {
		if got := StreamOptionsRefused(tt.status, []byte(tt.body)); got != tt.want {
			t.Errorf("%s: StreamOptionsRefused = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// The proxy trusts a chat request's parse to say it is not streamed and
// then does not look for "stream" again (api.parseSeesStream): the parse
// must read it exactly as StreamAsks does, duplicates and odd values too.
func TestParseReadsStreamAsStreamAsks(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	for _, body := range []string{
		`{` + msgs + `}`,
		`{"stream":true,` + msgs + `}`,
		`{"stream":false,` + msgs + `}`,
		`{` + msgs + `,"stream": true }`,
		`{"stream":false,` + msgs + `,"stream":true}`,
		`{"stream":true,` + msgs + `,"stream":false}`,
		`{"stream":"true",` + msgs + `}`,
		`{"stream":1,` + msgs + `}`,
		`{"stream":null,` + msgs + `}`,
		`{"str\u0065am":true,` + msgs + `}`,
		`{"Stream":true,` + msgs + `}`,
		`{"messages":[{"role":"user","content":"hi","stream":true}]}`,
	} {
		c, ok := Format{}.Parse([]byte(body))
		if !ok {
			t.Fatalf("%s: not parsed", body)
		}
		if stream, _ := StreamAsks([]byte(body)); c.Stream != stream {
			t.Errorf("%s: parsed Stream %v, StreamAsks %v", body, c.Stream, stream)
		}
	}
}
