package baseurl

import "testing"

func TestTargetMapping(t *testing.T) {
	for _, tc := range []struct{ upstream, path, query, want string }{
		{"http://h:1/v1", "/v1/chat/completions", "", "http://h:1/v1/chat/completions"},
		{"http://h:1/v1", "/chat/completions", "", "http://h:1/v1/chat/completions"},
		{"http://h:1/v1/", "/v1/models", "a=1", "http://h:1/v1/models?a=1"},
		{"https://h/api/openai/v1", "/v1/embeddings", "", "https://h/api/openai/v1/embeddings"},
		{"http://h:1", "/v1/models", "", "http://h:1/models"},
		{"http://h:1/v1", "/v1", "", "http://h:1/v1"},
		{"http://h:1/v1", "/v10/x", "", "http://h:1/v1/v10/x"},
	} {
		u, err := Parse(tc.upstream)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(u.Target(nil, []byte(tc.path), []byte(tc.query))); got != tc.want {
			t.Errorf("%s + %s = %s, want %s", tc.upstream, tc.path, got, tc.want)
		}
	}
	for _, bad := range []string{"", "localhost:1234", "ftp://h/", "http:///v1", "http://h/v1?x=1"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestTargetVersioned(t *testing.T) {
	for _, tc := range []struct{ upstream, path, query, want string }{
		// One base URL for every format: Gemini's own version wins.
		{"http://h:1/v1", "/v1beta/models/m:generateContent", "", "http://h:1/v1beta/models/m:generateContent"},
		{"http://h:1/v1/", "/v1beta/models/m:streamGenerateContent", "alt=sse", "http://h:1/v1beta/models/m:streamGenerateContent?alt=sse"},
		{"http://h:1/v1", "/v1/models/m:generateContent", "", "http://h:1/v1/models/m:generateContent"},
		// Google's own API, given with or without a version.
		{"https://generativelanguage.googleapis.com", "/v1beta/models", "", "https://generativelanguage.googleapis.com/v1beta/models"},
		{"https://generativelanguage.googleapis.com/v1beta", "/v1/models/m:generateContent", "", "https://generativelanguage.googleapis.com/v1/models/m:generateContent"},
		// A gateway's prefix stays; only a version segment goes.
		{"https://gw/api/gemini", "/v1beta/models", "", "https://gw/api/gemini/v1beta/models"},
		{"https://gw/api/gemini/v1beta", "/v1beta/models", "", "https://gw/api/gemini/v1beta/models"},
		{"https://gw/v1x", "/v1beta/models", "", "https://gw/v1x/v1beta/models"},
	} {
		u, err := Parse(tc.upstream)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(u.TargetVersioned(nil, []byte(tc.path), []byte(tc.query))); got != tc.want {
			t.Errorf("%s + %s = %s, want %s", tc.upstream, tc.path, got, tc.want)
		}
	}
}

func TestWithVersion(t *testing.T) {
	for raw, want := range map[string]string{
		"http://h:1/v1":  "http://h:1/v1beta",
		"http://h:1/v1/": "http://h:1/v1beta",
		"https://generativelanguage.googleapis.com":        "https://generativelanguage.googleapis.com/v1beta",
		"https://generativelanguage.googleapis.com/v1beta": "https://generativelanguage.googleapis.com/v1beta",
		"https://gw/api/gemini":                            "https://gw/api/gemini/v1beta",
		"http://v1":                                        "http://v1/v1beta",
	} {
		if got := WithVersion(raw, "v1beta"); got != want {
			t.Errorf("WithVersion(%s) = %s, want %s", raw, got, want)
		}
	}
}

func TestSameUpstream(t *testing.T) {
	rows := []struct {
		a, b string
		want bool
	}{
		{"http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1/", true},
		{"https://API.openai.com/v1", "https://api.openai.com/v1", true},
		{"http://127.0.0.1:8080/v1", "http://127.0.0.1:8081/v1", false},
		{"http://127.0.0.1:8080/v1", "https://127.0.0.1:8080/v1", false},
		{"http://127.0.0.1:8080/v1", "http://127.0.0.1:8080", false},
		{"http://127.0.0.1:8080/v1", "not a url", false},
	}
	for _, r := range rows {
		if got := Same(r.a, r.b); got != r.want {
			t.Errorf("Same(%q, %q) = %v, want %v", r.a, r.b, got, r.want)
		}
	}
}
