package rewrite

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
