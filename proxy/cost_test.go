package proxy

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/state"
)

// A file read again several turns after the first read: deduping the
// first rewrites history the provider has cached. In front of a hosted
// upstream that caches, ctxpress keeps sending it while the cache it would
// break is worth more than the tokens saved; in front of one that reports
// nothing cached, it sends the file once.
func TestDedupOfAnOldReadWaitsWhileTheUpstreamCaches(t *testing.T) {
	hosted := false
	for _, noCache := range []bool{false, true} {
		t.Run("noCache="+strconv.FormatBool(noCache), func(t *testing.T) {
			up := newResponsesUpstream(t)
			up.noCache = noCache
			up.cmds = []string{"cat dateparse/parse.go", "make", "go vet ./...", "grep -rn isLeap .", "cat dateparse/parse.go"}
			deps, st := responsesDeps(t)
			p := startProxyWith(t, Config{Upstream: up.BaseURL(), LocalUpstream: &hosted}, deps)
			a := newResponsesAgent(t, p.BaseURL(), "codex-cost-"+strconv.FormatBool(noCache))
			source, log := goSource(), bigBuildLog()
			a.output = func(n int) string {
				switch n {
				case 1, 5:
					return source
				case 2:
					return log
				}
				return toolOutput(n)
			}
			for i := range 6 {
				a.turn(false)
				// What the cost model knows of the cache comes from the
				// recorded turns: each is written before the next is sent.
				waitFor(t, func() bool { return recordedRequests(t, st) == int64(i+1) }, "the turn recorded")
			}
			turns, _ := up.turns()
			if len(turns) != 6 {
				t.Fatalf("%d requests upstream", len(turns))
			}
			if !noCache && turns[5].cached == 0 {
				t.Fatalf("the upstream's cache read nothing on the last turn: the test proves nothing")
			}
			sent := strings.Count(string(turns[5].body), "func daysIn7(")
			if want := map[bool]int{false: 2, true: 1}[noCache]; sent != want {
				t.Errorf("the file read twice was sent %d times, want %d (upstream caches: %v)", sent, want, !noCache)
			}
		})
	}
}

// recordedRequests is the requests the store's one record counts.
func recordedRequests(t *testing.T, st state.Store) int64 {
	t.Helper()
	recs, err := st.List(state.ListOptions{})
	if err != nil || len(recs) != 1 {
		return 0
	}
	return recs[0].Requests
}
