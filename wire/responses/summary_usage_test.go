package responses

import (
	"testing"

	"github.com/ctxpress/ctxpress/wire"
)

// A summary call's reply usage is read whole, the cached part included.
func TestSummaryReplyUsageIsReadWhole(t *testing.T) {
	ok := `{"object":"response","status":"completed","output":[{"type":"message","role":"assistant",` +
		`"content":[{"type":"output_text","text":"## Active Task\nfix it"}]}],` +
		`"usage":{"input_tokens":9000,"input_tokens_details":{"cached_tokens":8500},"output_tokens":40}}`
	s, err := ReadSummary(200, []byte(ok), "")
	if want := (wire.Usage{InputTokens: 9000, CachedTokens: 8500, OutputTokens: 40, Found: true}); err != nil || s.Usage != want {
		t.Fatalf("usage %+v, %v; want %+v", s.Usage, err, want)
	}
}
