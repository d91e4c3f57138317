package geminipath

import "testing"

func TestParse(t *testing.T) {
	for _, r := range []struct {
		path string
		want Call
		ok   bool
	}{
		{"/v1beta/models/gemini-2.5-pro:generateContent", Call{"v1beta", "gemini-2.5-pro", MethodGenerate}, true},
		{"/v1beta/models/gemini-2.5-flash:streamGenerateContent", Call{"v1beta", "gemini-2.5-flash", MethodStream}, true},
		{"/v1/models/gemini-2.5-pro:generateContent", Call{"v1", "gemini-2.5-pro", MethodGenerate}, true},
		{"/v1alpha/models/m:countTokens", Call{"v1alpha", "m", "countTokens"}, true},
		{"/v1beta/models", Call{}, false},
		{"/v1beta/models/gemini-2.5-pro", Call{}, false},
		{"/v1beta/models/:generateContent", Call{}, false},
		{"/v1beta/models/m:", Call{}, false},
		{"/v1beta/models/a/b:generateContent", Call{}, false},
		{"/v1beta/tunedModels/m:generateContent", Call{}, false},
		{"/v1/chat/completions", Call{}, false},
		{"/models/m:generateContent", Call{}, false},
		{"/vbeta/models/m:generateContent", Call{}, false},
	} {
		got, ok := Parse([]byte(r.path))
		if got != r.want || ok != r.ok {
			t.Errorf("Parse(%s) = %+v, %v; want %+v, %v", r.path, got, ok, r.want, r.ok)
		}
	}
}

func TestCallKinds(t *testing.T) {
	for _, r := range []struct {
		method       string
		turn, stream bool
	}{
		{MethodGenerate, true, false},
		{MethodStream, true, true},
		{"countTokens", false, false},
		{"embedContent", false, false},
	} {
		c := Call{Method: r.method}
		if c.Turn() != r.turn || c.Stream() != r.stream {
			t.Errorf("%s: turn %v stream %v; want %v %v", r.method, c.Turn(), c.Stream(), r.turn, r.stream)
		}
	}
}

func TestIs(t *testing.T) {
	for _, r := range []struct {
		path string
		want bool
	}{
		{"/v1beta/models/m:generateContent", true},
		{"/v1beta/models", true},
		{"/v1beta/files", true},
		{"/upload/v1beta/files", true},
		{"/v1alpha/cachedContents", true},
		{"/v1/models/m:streamGenerateContent", true},
		{"/v1/models/m:countTokens", true},
		// OpenAI's, and the same on Gemini's /v1: where OpenAI's go.
		{"/v1/models", false},
		{"/v1/models/gpt-5", false},
		{"/v1/chat/completions", false},
		{"/v1/messages", false},
		{"/chat/completions", false},
		{"/", false},
		{"", false},
	} {
		if got := Is([]byte(r.path)); got != r.want {
			t.Errorf("Is(%s) = %v, want %v", r.path, got, r.want)
		}
	}
}

func TestVersioned(t *testing.T) {
	for seg, want := range map[string]bool{
		"v1": true, "v1beta": true, "v1alpha": true, "v1beta2": true, "v2": true, "v10": true,
		"v": false, "v1x": false, "vbeta": false, "models": false, "": false, "v1beta2x": false, "1": false,
	} {
		if got := Versioned([]byte(seg)); got != want {
			t.Errorf("Versioned(%q) = %v, want %v", seg, got, want)
		}
	}
}

func TestQueryKey(t *testing.T) {
	for _, r := range []struct {
		query, key string
		ok         bool
	}{
		{"key=AIza123", "AIza123", true},
		{"alt=sse&key=AIza%2B1", "AIza+1", true},
		{"alt=sse", "", false},
		{"", "", false},
		{"keys=x&akey=y", "", false},
	} {
		key, ok := QueryKey([]byte(r.query))
		if key != r.key || ok != r.ok {
			t.Errorf("QueryKey(%q) = %q, %v; want %q, %v", r.query, key, ok, r.key, r.ok)
		}
	}
}

func TestWithKeyAndRedacted(t *testing.T) {
	for _, r := range []struct{ query, with, redacted string }{
		{"key=client", "key=up+key", "key=REDACTED"},
		{"alt=sse&key=client&x=1", "alt=sse&key=up+key&x=1", "alt=sse&key=REDACTED&x=1"},
		{"alt=sse", "alt=sse", "alt=sse"},
		{"alt=sse&", "alt=sse&", "alt=sse&"},
		{"key", "key=up+key", "key=REDACTED"},
		{"", "", ""},
	} {
		if got := string(WithKey(nil, []byte(r.query), "up key")); got != r.with {
			t.Errorf("WithKey(%q) = %q, want %q", r.query, got, r.with)
		}
		if got := string(Redacted(nil, []byte(r.query))); got != r.redacted {
			t.Errorf("Redacted(%q) = %q, want %q", r.query, got, r.redacted)
		}
	}
}
