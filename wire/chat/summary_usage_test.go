package chat

import "testing"

// A summary call is billed like any other: its reply's usage is read
// whole, the cached part included, and an error reply that still spent
// tokens (only reasoning came back) keeps them.
func TestSummaryReplyUsageIsReadWhole(t *testing.T) {
	ok := `{"choices":[{"message":{"role":"assistant","content":"## Active Task\nfix it"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":9000,"completion_tokens":400,"prompt_tokens_details":{"cached_tokens":8000}}}`
	s, err := ReadSummary(200, []byte(ok), "")
	if want := (Usage{InputTokens: 9000, CachedTokens: 8000, OutputTokens: 400, Found: true}); err != nil || s.Usage != want {
		t.Fatalf("usage %+v, %v; want %+v", s.Usage, err, want)
	}
	thinking := `{"choices":[{"message":{"role":"assistant","content":"","reasoning_content":"hmm"},"finish_reason":"length"}],` +
		`"usage":{"prompt_tokens":9000,"completion_tokens":4000}}`
	if s, err := ReadSummary(200, []byte(thinking), ""); err == nil || s.Usage.OutputTokens != 4000 {
		t.Fatalf("a reply with only reasoning: usage %+v, %v", s.Usage, err)
	}
	if s, _ := ReadSummary(200, []byte(`{"choices":[{"message":{"content":"## Goal\nx"}}]}`), ""); s.Usage.Found {
		t.Fatalf("no usage reported, yet %+v", s.Usage)
	}
}
