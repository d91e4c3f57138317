package messages

import (
	"testing"

	"github.com/ctxpress/ctxpress/wire"
)

// A summary call's reply usage is read whole: Anthropic's three parts of
// the prompt, cache reads and writes apart.
func TestSummaryReplyUsageIsReadWhole(t *testing.T) {
	ok := `{"type":"message","content":[{"type":"text","text":"## Active Task\nship it"}],"stop_reason":"end_turn",` +
		`"usage":{"input_tokens":900,"cache_read_input_tokens":8000,"cache_creation_input_tokens":100,"output_tokens":40}}`
	s, err := ReadSummary(200, []byte(ok), "")
	if want := (wire.Usage{InputTokens: 9000, CachedTokens: 8000, CacheWriteTokens: 100, OutputTokens: 40, Found: true}); err != nil || s.Usage != want {
		t.Fatalf("usage %+v, %v; want %+v", s.Usage, err, want)
	}
}
