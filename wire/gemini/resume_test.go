package gemini

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/wire"
)

// TestResumeIsParse: a parse continued from an earlier one, at the end of
// any of its contents, is the parse of the body read whole (the pairing
// of the first new content with the calls of the last taken one
// included), and takes the earlier contents.
func TestResumeIsParse(t *testing.T) {
	f := Format{Model: "gemini-3-pro-preview", Stream: true}
	earlier := signedLoop
	// The next request: the model's answer and a new content appended,
	// members after contents as the genai SDK sends them.
	next := strings.TrimSuffix(signedLoop, "]}") +
		`,{"role":"model","parts":[{"functionCall":{"name":"ls","args":{"d":"x"}},"thoughtSignature":"RA=="},{"functionCall":{"name":"ls"}}]}` +
		`,{"role":"user","parts":[{"functionResponse":{"name":"ls","response":{"output":"1"}}},{"functionResponse":{"name":"ls","response":{"output":"2"}}}]}]` +
		`,"systemInstruction":{"parts":[{"text":"s"}]},"generationConfig":{"thinkingConfig":{"thinkingBudget":0}}}`
	prev, ok := f.Parse([]byte(earlier))
	if !ok {
		t.Fatal("not parsed")
	}
	whole, _ := f.Parse([]byte(next))
	for k := 1; k <= len(prev.Messages); k++ {
		at := prev.Messages[k-1].End
		c, chat, taken := f.Resume([]byte(next), prev, at)
		if !chat || taken != k {
			t.Fatalf("at content %d: chat %v taken %d", k, chat, taken)
		}
		if !reflect.DeepEqual(c.Messages, whole.Messages) || !reflect.DeepEqual(c.Items, whole.Items) ||
			c.Bound != whole.Bound || c.Model != whole.Model || !c.Stream || !reflect.DeepEqual(c.Counted, whole.Counted) {
			t.Fatalf("at content %d: the resumed parse differs", k)
		}
	}
	// A later contents member replaces the one read: the body is read whole.
	replaced := strings.TrimSuffix(earlier, "}") + `,"contents":[{"role":"user","parts":[{"text":"x"}]}]}`
	c, chat, taken := f.Resume([]byte(replaced), prev, prev.Messages[0].End)
	if !chat || taken != 0 || len(c.Messages) != 1 {
		t.Fatalf("a replaced contents: taken %d, %d contents", taken, len(c.Messages))
	}
	// Not at the end of a content: the body is read whole.
	if _, _, taken := f.Resume([]byte(next), prev, prev.Messages[0].End+1); taken != 0 {
		t.Fatal("resumed inside a content")
	}
	var _ wire.Resumer = f
}
