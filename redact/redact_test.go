package redact

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Fake credentials are assembled at run time so secret scanners do not
// flag this file.
var (
	fakeOpenAI    = "sk-" + "proj-" + strings.Repeat("aB3dE5", 8)
	fakeAnthropic = "sk-" + "ant-api03-" + strings.Repeat("Xy9_-", 10)
	fakeLegacy    = "sk-" + strings.Repeat("T3BlbkFJ", 6)
	fakeAWSID     = "AKIA" + "IOSFODNN7EXAMPLE"
	fakeAWSTemp   = "ASIA" + "Y34FZKBOKMUTVV7A"
	fakeAWSSecret = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
	fakeGitHub    = "ghp_" + strings.Repeat("a1B2c3", 6)
	fakeGitHubPAT = "github_pat_" + "11ABCDEFG0" + strings.Repeat("x_Y9", 12)
	fakeSlack     = "xoxb-" + "1234567890-" + "0987654321-" + "AbCdEfGhIjKl"
	fakeJWT       = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjMifQ." + "c2lnbmF0dXJlMTIz"
	fakePEM       = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1234567890abcdef\nQWERTYuiop+/asdfGHJKL==\n-----END RSA PRIVATE KEY-----"
)

func TestSecretsCatches(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"bearer header", "Authorization: Bearer " + fakeJWT + "\n", "Authorization: Bearer [REDACTED]\n"},
		{"bearer lower case", `curl -H "authorization: bearer abc123def456ghi"`, `curl -H "authorization: bearer [REDACTED]"`},
		{"openai project key", "OPENAI_API_KEY=" + fakeOpenAI, "OPENAI_API_KEY=[REDACTED]"},
		{"openai key in prose", "use " + fakeLegacy + " here", "use [REDACTED] here"},
		{"anthropic key", `{"key": "` + fakeAnthropic + `"}`, `{"key": "[REDACTED]"}`},
		{"aws access key id", "aws_access_key_id = " + fakeAWSID, "aws_access_key_id = [REDACTED]"},
		{"aws temporary key id", "id:" + fakeAWSTemp + ".", "id:[REDACTED]."},
		{"aws secret", "aws_secret_access_key = " + fakeAWSSecret + "\n", "aws_secret_access_key = [REDACTED]\n"},
		{"github token", "git clone https://" + fakeGitHub + "@github.com/o/r", "git clone https://[REDACTED]@github.com/o/r"},
		{"github fine-grained", "GH=" + fakeGitHubPAT, "GH=[REDACTED]"},
		{"slack", "token " + fakeSlack, "token [REDACTED]"},
		{"private key block", "key:\n" + fakePEM + "\ndone", "key:\n[REDACTED]\ndone"},
		{"truncated private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAABG5vbmUAAAAEbm9uZQ==\n\nafter", "[REDACTED]\n\nafter"},
		{"password assignment", "DB_PASSWORD=hunter2hunter2", "DB_PASSWORD=[REDACTED]"},
		{"password quoted", `password = "correct horse battery"`, `password = "[REDACTED]"`},
		{"api_key json", `{"api_key":"abcdefgh12345678"}`, `{"api_key":"[REDACTED]"}`},
		{"api key escaped json", `"{\"api_key\": \"abcdefgh12345678\"}"`, `"{\"api_key\": \"[REDACTED]\"}"`},
		{"token yaml", "auth:\n  token: 9f8e7d6c5b4a3f2e1d0c", "auth:\n  token: [REDACTED]"},
		{"token url query", "GET /x?access_token=ya29a0AfH6SMBx&y=1", "GET /x?access_token=[REDACTED]&y=1"},
		{"camelCase key", `clientSecret: "s3cr3t-v4lue!"`, `clientSecret: "[REDACTED]"`},
		{"go short assignment", `token := "abcd1234efgh5678"`, `token := "[REDACTED]"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Secrets(tc.in); got != tc.want {
				t.Errorf("Secrets(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if got := Secrets(tc.want); got != tc.want {
				t.Errorf("Secrets is not idempotent: %q -> %q", tc.want, got)
			}
		})
	}
}

func TestSecretsLeavesAlone(t *testing.T) {
	for _, s := range []string{
		"commit 3f786850e387550fdab836ed7e6dc881de23001b",
		"git checkout e83c5163316f89bfbde7d9ab23ca2e25604af290 && git log -1",
		"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"request id 123e4567-e89b-12d3-a456-426614174000",
		"task-management-system-dashboard-view", // contains "sk-…" inside a word
		"The risk-assessment-for-the-whole-project is done.",
		"Bearer authentication is described in RFC 6750.",
		`headers["Authorization"] = "Bearer " + token`,
		"max_tokens=4000, prompt_tokens: 123456789",
		"token = self.generate_token(user)",
		"password = request.POST.get('password')",
		"def login(token: Optional[str] = None):",
		"if token == expected_token12345:",
		"api_key = os.environ['OPENAI_API_KEY']",
		"password: ${DB_PASSWORD}",
		"AKIAshort and ASIA is a continent-ish word",
		"-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----",
		"ghp_short gho_ xoxb-1 sk-1",
		"Über naïve café — 日本語のテキスト",
	} {
		if got := Secrets(s); got != s {
			t.Errorf("Secrets(%q) = %q, want unchanged", s, got)
		}
	}
}

// TestSecretsLarge runs a 1 MiB input of near-misses and real secrets; with
// a linear scan this takes milliseconds (no timing assertion: a quadratic
// scanner would make the suite visibly slow instead).
func TestSecretsLarge(t *testing.T) {
	chunk := "token=token=token: password:\"x\" Bearer short sk-short -----BEGIN X PRIVATE KEY----- AKIA " +
		"commit e83c5163316f89bfbde7d9ab23ca2e25604af290 " + fakeOpenAI + " héllo\n"
	var b strings.Builder
	for b.Len() < 1<<20 {
		b.WriteString(chunk)
	}
	in := b.String()
	out := Secrets(in)
	if strings.Contains(out, fakeOpenAI) {
		t.Error("a key survived")
	}
	if !strings.Contains(out, "e83c5163316f89bfbde7d9ab23ca2e25604af290") {
		t.Error("a git SHA was redacted")
	}
	if !utf8.ValidString(out) {
		t.Error("invalid UTF-8 out")
	}
	// One long run with no delimiter at all.
	long := "sk-" + strings.Repeat("a", 1<<20)
	if Secrets(long) != Marker {
		t.Error("a 1 MiB key was not redacted whole")
	}
	if s := strings.Repeat("password=", 1<<17); Secrets(s) != s {
		t.Error("repeated keys without values changed")
	}
}

func BenchmarkSecrets1MiB(b *testing.B) {
	in := strings.Repeat("plain log line with token=abc and Bearer x and commit e83c5163316f89bf\n", 1<<20/72)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		Secrets(in)
	}
}
