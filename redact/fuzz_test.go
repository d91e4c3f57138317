package redact

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSecrets: Secrets never panics, keeps valid UTF-8 valid, and
// redacting twice changes nothing.
func FuzzSecrets(f *testing.F) {
	for _, seed := range []string{
		"",
		"plain text",
		"Authorization: Bearer " + fakeJWT,
		"key " + fakeOpenAI + " and " + fakeGitHub,
		fakePEM,
		"-----BEGIN EC PRIVATE KEY-----\nabc",
		`{"api_key": "abcdefgh12345678", "password":"x"}`,
		"token=token=token: password:\"",
		"é€日本" + strings.Repeat("x", 8000) + "€",
		"sk-" + strings.Repeat("é", 30),
		"AKIA" + "IOSFODNN7EXAMPL€",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := Secrets(s)
		if utf8.ValidString(s) && !utf8.ValidString(r) {
			t.Fatalf("Secrets broke UTF-8: %q -> %q", s, r)
		}
		if again := Secrets(r); again != r {
			t.Fatalf("Secrets not idempotent: %q -> %q -> %q", s, r, again)
		}
	})
}
