package messages

import (
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/wire"
)

// The latest compaction block the API reads (content not null) is where
// the provider's context starts; a context_management compact edit asks
// the server to compact, clearing edits do not; server tool blocks stay in
// the message of their results; all read alike whole and resumed.
func TestServerCompactionIsSeen(t *testing.T) {
	const (
		user      = `{"role":"user","content":"a"}`
		compacted = `{"role":"assistant","content":[{"type":"compaction","content":"Summary.","encrypted_content":"ZW5j"},{"type":"text","text":"ok"}]}`
		failed    = `{"role":"assistant","content":[{"type":"compaction","content":null},{"type":"text","text":"ok"}]}`
		server    = `{"role":"assistant","content":[{"type":"server_tool_use","id":"srv_1","name":"web_search","input":{}},{"type":"web_search_tool_result","tool_use_id":"srv_1","content":[]},{"type":"text","text":"found"}]}`
	)
	cases := []struct {
		name, top, msgs string
		after           int
		compacts        bool
	}{
		{"none", ``, user + "," + server + "," + user, 0, false},
		{"a compaction", ``, user + "," + compacted + "," + user, 2, false},
		{"the latest of two", ``, user + "," + compacted + "," + user + "," + compacted + "," + user, 4, false},
		{"a failed compaction is a no-op", ``, user + "," + failed + "," + user, 0, false},
		{"a compact edit", `"context_management":{"edits":[{"type":"clear_tool_uses_20250919"},{"type":"compact_20260112"}]},`, user, 0, true},
		{"clearing edits only", `"context_management":{"edits":[{"type":"clear_tool_uses_20250919"},{"type":"clear_thinking_20251015"}]},`, user, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := []byte(`{"model":"m",` + c.top + `"messages":[` + c.msgs + `]}`)
			conv, ok := Format{}.Parse(body)
			if !ok || conv.AfterCompaction != c.after || conv.ProviderCompacts != c.compacts {
				t.Fatalf("after %d, compacts %v", conv.AfterCompaction, conv.ProviderCompacts)
			}
			for m := range conv.Messages {
				for _, it := range conv.ItemsOf(m) {
					if it.Kind == wire.KindToolCall || it.Kind == wire.KindToolResult {
						t.Errorf("a server tool block read as %d", it.Kind)
					}
				}
			}
			first, _ := Format{}.Parse([]byte(`{"model":"m",` + c.top + `"messages":[` + user + `]}`))
			resumed, _, taken := Format{}.Resume(body, first, first.Messages[0].End)
			if resumed.AfterCompaction != c.after || resumed.ProviderCompacts != c.compacts || taken != 1 {
				t.Fatalf("resumed (%d taken): after %d, compacts %v", taken, resumed.AfterCompaction, resumed.ProviderCompacts)
			}
		})
	}
}

// A compaction block counts as its readable summary: the encrypted state
// beside it is not text the model reads.
func TestCompactionBlockCountsItsSummary(t *testing.T) {
	count := func(s string) int { return len(s) / 4 }
	blob := strings.Repeat("ZW5jcnlwdGVk", 1000)
	body := []byte(`{"model":"m","messages":[{"role":"assistant","content":[{"type":"compaction","content":"Ported the parser.","encrypted_content":"` + blob + `"}]}]}`)
	conv, _ := Format{}.Parse(body)
	if n := (Format{}).Overhead(conv, 0, count); n > 100 {
		t.Fatalf("the compaction block counts %d tokens", n)
	}
}
