package proxy

import (
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/ctxpress/ctxpress/internal/openaitest"
)

// An upstream on the IPv6 loopback (http://[::1]:PORT/v1): chat goes
// through, and so does the summary call of a compaction, which has its own
// client (fasthttp's default dialer is IPv4 only).
func TestIPv6Upstream(t *testing.T) {
	up := openaitest.NewIPv6(t)
	if !strings.Contains(up.URL, "[::1]") {
		t.Fatalf("upstream at %s", up.URL)
	}
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Precompact = false
	p, _ := startWithStore(t, cfg)
	a := newAgent(t, p.BaseURL(), "ipv6")
	for range 3 {
		a.turn(false)
	}
	if h := a.turn(false, option.WithHeader(HeaderCompact, "force")); h.Get(HeaderCompacted) != "true" {
		t.Fatalf("no compaction against an IPv6 upstream:\n%s", lastLines(p.logs.String(), 5))
	}
	if _, summaries := up.ChatRequests(); len(summaries) != 1 {
		t.Fatalf("%d summary calls reached the upstream", len(summaries))
	}
}
