package rewrite

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

func newCorpusPipeline() *Pipeline {
	return New(Config{Format: chatFormat, Squasher: corpusSquash, Dedup: DefaultDedupConfig()})
}

// sharedCorpusPipeline is one pipeline for all corpus tests, so each corpus
// text is tokenised once per test binary (slow under -race). Sharing is
// sound because a cache never changes an answer; TestCorpusPrefixStability
// checks that against fresh pipelines.
var sharedCorpusPipeline = sync.OnceValue(newCorpusPipeline)

// Every corpus request goes through the pipeline: the output is valid JSON,
// differs from the input only inside tool results, keeps every tool call
// paired with its result, and is never bigger in tokens.
func TestCorpusTraces(t *testing.T) {
	traces := loadTraces(t)
	t.Logf("squasher: %s", corpusSquashName)
	var rows []string
	var totBefore, totAfter, totSquashed, totDeduped, totBytesBefore, totBytesAfter int
	p := sharedCorpusPipeline()
	for _, tr := range traces {
		res := p.Rewrite(tr.body)
		if !res.Understood {
			t.Errorf("%s: not understood", tr.name)
			continue
		}
		assertOnlyContentsChanged(t, tr.body, res.Body)
		for _, f := range []string{"model", "tools"} {
			if gjson.GetBytes(tr.body, f).Raw != gjson.GetBytes(res.Body, f).Raw {
				t.Errorf("%s: %s changed", tr.name, f)
			}
		}
		checkToolPairs(t, tr.name, res.Body)
		if res.TokensAfter > res.TokensBefore {
			t.Errorf("%s: tokens grew %d -> %d", tr.name, res.TokensBefore, res.TokensAfter)
		}
		if n, err := p.Counter().CountRequest(chatFormat, res.Body); err != nil || n != res.TokensAfter {
			t.Errorf("%s: TokensAfter %d, counting the output gives %d (%v)", tr.name, res.TokensAfter, n, err)
		}
		if again := p.Rewrite(tr.body); string(again.Body) != string(res.Body) || again.TokensAfter != res.TokensAfter {
			t.Errorf("%s: a second, cached, rewrite differs", tr.name)
		}
		rows = append(rows, fmt.Sprintf("%-62s %4d %8d %8d %6.1f%% %3d %3d", tr.name, res.Messages, res.TokensBefore, res.TokensAfter,
			100*float64(res.TokensBefore-res.TokensAfter)/float64(res.TokensBefore), res.Squashed, res.Deduped))
		totBefore += res.TokensBefore
		totAfter += res.TokensAfter
		totSquashed += res.Squashed
		totDeduped += res.Deduped
		totBytesBefore += res.BytesBefore
		totBytesAfter += res.BytesAfter
	}
	t.Logf("%-62s %4s %8s %8s %7s %3s %3s", "trace", "msgs", "before", "after", "saved", "sq", "dd")
	for _, r := range rows {
		t.Log(r)
	}
	t.Logf("TOTAL %d traces: tokens %d -> %d (-%.1f%%), bytes %d -> %d, %d squashed, %d deduped",
		len(traces), totBefore, totAfter, 100*float64(totBefore-totAfter)/float64(totBefore),
		totBytesBefore, totBytesAfter, totSquashed, totDeduped)
}

// checkToolPairs fails unless every assistant tool_call id has a tool
// result and every tool result answers a call.
func checkToolPairs(tb testing.TB, name string, body []byte) {
	tb.Helper()
	req, ok := parseRequest(body)
	if !ok {
		tb.Fatalf("%s: output not a chat request", name)
	}
	calls, results := map[string]int{}, map[string]int{}
	for i := range req.messages {
		m := &req.messages[i]
		m.result(m.toolCalls).ForEach(func(_, tc gjson.Result) bool {
			calls[tc.Get("id").String()]++
			return true
		})
		if m.role == "tool" {
			results[m.toolCallID]++
		}
	}
	for id := range calls {
		if results[id] == 0 {
			tb.Errorf("%s: call %s has no result", name, id)
		}
	}
	for id := range results {
		if calls[id] == 0 {
			tb.Errorf("%s: result %s answers no call", name, id)
		}
	}
}

// Prompt-cache stability over the corpus: replaying a trace turn by turn
// (turn k = its first k messages, as the client would have sent them), the
// rewritten messages of an earlier turn are a byte-identical prefix of a
// later turn's, except tool results a dedup (saving at least MinTokens)
// replaced by the placeholder in the later turn. Every turn is checked for a
// few traces, a sample of turns for all of them.
func TestCorpusPrefixStability(t *testing.T) {
	every := map[string]bool{
		"sweagent-ctf-crypto-eps.json":                         true,
		"openhands-resolver-pr-viewer-issue1.json":             true,
		"autogpt-debug_code_challenge_a.json":                  true,
		"ohsdk-claude-sonnet-4-fncall.json":                    true,
		"mini-gemini3pro-sympy__sympy-13878.json":              true,
		"sweagent-demo-marshmallow-1867-function_calling.json": true,
	}
	traces := loadTraces(t)
	t.Run("default", func(t *testing.T) {
		checkPrefixStability(t, traces, sharedCorpusPipeline(), every)
	})
	// No dedup minimum: the corpus's byte-identical repeats are collapsed as
	// soon as they occur, exercising the exception on real data.
	t.Run("dedup without minimum", func(t *testing.T) {
		p := New(Config{Format: chatFormat, Squasher: corpusSquash, Dedup: DedupConfig{Enabled: true, MinTokens: -1}})
		p.counter = sharedCorpusPipeline().Counter() // reuse the token counts
		checkPrefixStability(t, traces, p, nil)
	})
	// A stored summary applied from a turn on: the block stays fixed, so
	// the prefix does too.
	t.Run("with a summary", func(t *testing.T) {
		checkSummaryPrefixStability(t, traces, sharedCorpusPipeline(), every)
	})
}

func checkPrefixStability(t *testing.T, traces []trace, p *Pipeline, every map[string]bool) {
	dedupTurns, turnsChecked := 0, 0
	for _, tr := range traces {
		n := len(rawMessages(t, tr.body))
		var turns []int
		if every[tr.name] && !(testing.Short() && n > 60) {
			for k := 1; k <= n; k++ {
				turns = append(turns, k)
			}
		} else {
			for _, f := range []int{1, 2, 3, 5, 7, 8} {
				turns = append(turns, (n*f+7)/8, (n*f+7)/8+1)
			}
		}
		var prev []string
		prevDeduped := 0
		last := 0
		for _, k := range turns {
			if k <= last || k > n {
				continue
			}
			last = k
			turnsChecked++
			in := prefixBody(t, tr.body, k)
			res := p.Rewrite(in)
			if !res.Understood {
				t.Fatalf("%s turn %d: not understood", tr.name, k)
			}
			assertOnlyContentsChanged(t, in, res.Body)
			cur := rawMessages(t, res.Body)
			for i := range prev {
				if prev[i] == cur[i] {
					continue
				}
				if contentOf(res.Body, i) != DedupPlaceholder || res.Deduped == 0 {
					t.Fatalf("%s: message %d of turn %d changed in turn %d and is not a dedup placeholder:\nwas %.200s\nnow %.200s",
						tr.name, i, len(prev), k, prev[i], cur[i])
				}
			}
			if res.Deduped > prevDeduped && len(prev) > 0 {
				dedupTurns++
			}
			if res.Deduped < prevDeduped {
				t.Errorf("%s turn %d: fewer dedups (%d) than an earlier turn (%d)", tr.name, k, res.Deduped, prevDeduped)
			}
			prev, prevDeduped = cur, res.Deduped
		}
		// The cache never changes an answer: a fresh pipeline (cold caches,
		// its own token counter) agrees, for the small traces.
		if len(tr.body) < 30000 {
			fresh := New(p.cfg)
			in := prefixBody(t, tr.body, last)
			if a, b := p.Rewrite(in), fresh.Rewrite(in); string(a.Body) != string(b.Body) || a.TokensAfter != b.TokensAfter {
				t.Errorf("%s: warm and cold pipelines disagree on turn %d", tr.name, last)
			}
		}
	}
	t.Logf("%d turns checked; turns where a dedup rewrote earlier messages (the allowed exception): %d", turnsChecked, dedupTurns)
}

// A conversation shaped like the benchmark's, from the corpus, for other
// tests to share.
func corpusToolOutputs(tb testing.TB) []string {
	tb.Helper()
	var outs []string
	for _, tr := range loadTraces(tb) {
		req, _ := parseRequest(tr.body)
		for i := range req.messages {
			m := &req.messages[i]
			if c := m.result(m.content).Str; m.role == "tool" && len(c) > 200 && !strings.Contains(c, "\x00") {
				outs = append(outs, c)
			}
		}
	}
	return outs
}

// Concurrent requests share one pipeline (and a cache small enough to
// evict under them) and get exactly what they get one at a time.
func TestRewriteConcurrent(t *testing.T) {
	var small []trace
	for _, tr := range loadTraces(t) {
		if len(tr.body) < 30000 {
			small = append(small, tr)
		}
	}
	want := make([][]byte, len(small))
	for i, tr := range small {
		want[i] = sharedCorpusPipeline().Rewrite(tr.body).Body
	}
	p := New(Config{Format: chatFormat, Squasher: corpusSquash, Dedup: DefaultDedupConfig(), CacheBytes: 1 << 20})
	p.counter = sharedCorpusPipeline().Counter() // counts are already known
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for r := 0; r < 3; r++ {
				for i := range small {
					j := (i + g) % len(small)
					if got := p.Rewrite(small[j].body).Body; string(got) != string(want[j]) {
						t.Errorf("%s: concurrent result differs", small[j].name)
						return
					}
				}
			}
		}(g)
	}
	wg.Wait()
}
