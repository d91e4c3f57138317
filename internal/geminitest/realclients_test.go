package geminitest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What real clients sent (testdata/README.md) is taken as Google takes it,
// and Gemini CLI's resumed session is refused as Google refuses it.
func TestRealClientRequests(t *testing.T) {
	for _, tc := range []struct {
		file, want string // want "": accepted
	}{
		{"gemini-cli-0.61.0-turn3.json", ""},
		{"pi-0.73.1-second-ask.json", ""},
		{"gemini-cli-0.61.0-resume.json", "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn."},
	} {
		t.Run(tc.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			r, cerr := Check(body, Options{Signatures: true})
			switch {
			case tc.want == "" && cerr != nil:
				t.Fatalf("refused: %v", cerr)
			case tc.want == "" && (r.Tools == nil || r.LastUser == ""):
				t.Fatalf("read %d tools, last user %q", len(r.Tools), r.LastUser)
			case tc.want != "" && (cerr == nil || cerr.Message != tc.want):
				t.Fatalf("got %v, want %q", cerr, tc.want)
			}
		})
	}
}

// Gemini CLI's request with its latest call's signature dropped is the
// missing-signature refusal at that call's position.
func TestRealRequestWithoutItsSignature(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "gemini-cli-0.61.0-turn3.json"))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndex(body, []byte(`,"thoughtSignature":"`))
	if i < 0 {
		t.Fatal("no signature in the fixture")
	}
	end := i + len(`,"thoughtSignature":"`) + bytes.IndexByte(body[i+len(`,"thoughtSignature":"`):], '"') + 1
	stripped := append(append([]byte{}, body[:i]...), body[end:]...)
	_, cerr := Check(stripped, Options{Signatures: true})
	if cerr == nil || !strings.Contains(cerr.Message, "function call `default_api:run_shell_command` , position 4.") {
		t.Fatalf("got %v", cerr)
	}
}
