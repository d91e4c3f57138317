package admin

import "testing"

func TestAgentOf(t *testing.T) {
	for ua, want := range map[string]string{
		"claude-cli/2.0.14 (external, cli)":                           "claude-cli/2.0.14",
		"codex_cli_rs/0.98.0 (Mac OS 15.1.0; arm64) iTerm.app/3.5.10": "codex_cli_rs/0.98.0",
		"opencode/0.15.2":                "opencode/0.15.2",
		"OpenAI/Python 1.40.0":           "OpenAI/Python",
		"  qwen-code/0.0.9  ":            "qwen-code/0.0.9",
		"":                               "",
		"(compatible)":                   "",
		"bad\x00agent/1":                 "",
		"x/" + string(make([]byte, 100)): "",
	} {
		if got := string(AgentOf([]byte(ua))); got != want {
			t.Errorf("AgentOf(%q) = %q, want %q", ua, got, want)
		}
	}
	long := "agent/" + string(bytesOf('9', 100))
	if got := AgentOf([]byte(long)); len(got) != maxAgent {
		t.Errorf("a long token kept as %d bytes, want %d", len(got), maxAgent)
	}
}

func bytesOf(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}
