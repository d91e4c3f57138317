package compactor

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ctxpress/ctxpress/wire"
)

// FuzzTranscript: Transcript, which redacts what it renders, never panics,
// keeps valid UTF-8 valid and respects maxChars.
func FuzzTranscript(f *testing.F) {
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
		f.Add(seed, 0)
		f.Add(seed, 40)
	}
	f.Fuzz(func(t *testing.T, s string, maxChars int) {
		maxChars %= 20000
		msgs := []Message{
			{Role: wire.RoleUser, Text: s},
			{Role: wire.RoleAssistant, Text: s, ToolCalls: []ToolCall{{ID: s, Name: s, Arguments: s}}},
			{Role: wire.RoleTool, ToolCallID: "c", Text: s + s},
		}
		out := Transcript(msgs, maxChars)
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("Transcript broke UTF-8 (maxChars %d)", maxChars)
		}
		if maxChars > 0 && len(out) > maxChars {
			t.Fatalf("Transcript: %d chars over maxChars %d", len(out), maxChars)
		}
	})
}
