package chat

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestReadUsageReadsWhatEachNamingReports pins ReadUsage's rules: the chat
// names win over the Responses ones wherever they sit, a name written
// twice keeps its first value, and without an input count nothing was
// reported.
func TestReadUsageReadsWhatEachNamingReports(t *testing.T) {
	for _, c := range []struct {
		name, usage string
		want        Usage
	}{
		{"chat names", `{"prompt_tokens":260,"completion_tokens":2,"total_tokens":262}`,
			Usage{InputTokens: 260, OutputTokens: 2, Found: true}},
		{"chat cached tokens", `{"prompt_tokens":260,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":256}}`,
			Usage{InputTokens: 260, OutputTokens: 2, CachedTokens: 256, Found: true}},
		{"Responses names", `{"input_tokens":90,"output_tokens":7,"input_tokens_details":{"cached_tokens":64}}`,
			Usage{InputTokens: 90, OutputTokens: 7, CachedTokens: 64, Found: true}},
		{"the chat name wins, written after", `{"input_tokens":1,"output_tokens":2,"prompt_tokens":3,"completion_tokens":4}`,
			Usage{InputTokens: 3, OutputTokens: 4, Found: true}},
		{"the chat name wins, written before", `{"prompt_tokens":3,"input_tokens":1}`,
			Usage{InputTokens: 3, Found: true}},
		{"chat details without cached tokens fall back to the Responses ones",
			`{"prompt_tokens":10,"prompt_tokens_details":{"audio_tokens":0},"input_tokens_details":{"cached_tokens":8}}`,
			Usage{InputTokens: 10, CachedTokens: 8, Found: true}},
		{"a name written twice keeps its first value", `{"prompt_tokens":5,"prompt_tokens":6}`,
			Usage{InputTokens: 5, Found: true}},
		{"no input count", `{"completion_tokens":4,"total_tokens":4}`, Usage{}},
		{"null input count exists", `{"prompt_tokens":null}`, Usage{Found: true}},
		{"not an object", `[1,2]`, Usage{}},
		{"null", `null`, Usage{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ReadUsage(gjson.Parse(c.usage)); got != c.want {
				t.Errorf("ReadUsage(%s) = %+v, want %+v", c.usage, got, c.want)
			}
		})
	}
}

// BenchmarkUsageFromJSON reads the usage of a whole chat answer, as every
// non-streamed turn does: a short one, and one with 8 KB of code in its
// content (newlines and quotes escaped), as a coding agent's answers are.
func BenchmarkUsageFromJSON(b *testing.B) {
	short := []byte(`{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Done."},"finish_reason":"stop"}],"usage":{"prompt_tokens":260,"completion_tokens":2,"total_tokens":262}}`)
	code := strings.Repeat(`func handler(w http.ResponseWriter, r *http.Request) {\n\tfmt.Fprintf(w, \"hello %s\", r.URL.Path)\n}\n`, 90)
	long := []byte(`{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"` + code + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":260,"completion_tokens":2,"total_tokens":262}}`)
	for _, c := range []struct {
		name string
		body []byte
	}{{"short", short}, {"long", long}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				if !UsageFromJSON(c.body).Found {
					b.Fatal("no usage")
				}
			}
		})
	}
}
