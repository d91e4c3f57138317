package rewrite

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/squash"
)

// The cache bound is a memory bound: with the cache full of real entries
// (token counts, squash results, message facts) the heap the pipeline
// holds stays near CacheBytes, so cache_bytes is what a user can budget.
func TestCacheBoundIsTheMemoryItHolds(t *testing.T) {
	const bound = 2 << 20
	conversation := func(n int) []byte {
		var msgs []string
		msgs = append(msgs, `{"role":"system","content":"You are a coding agent."}`)
		for turn := 0; turn < 12; turn++ {
			id := fmt.Sprintf("call_%d_%d", n, turn)
			msgs = append(msgs,
				fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":%q,"type":"function","function":{"name":"bash","arguments":"{\"cmd\":\"go test ./pkg%d/...\"}"}}]}`, id, turn),
				fmt.Sprintf(`{"role":"tool","tool_call_id":%q,"content":%q}`, id, toolLog(n, turn)))
		}
		return chat("gpt-4o", msgs...)
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	New(Config{Format: chatFormat, Squasher: squashWith(truncSquash)}).Rewrite(conversation(-1)) // loads the encoder
	before := heap()
	p := New(Config{Format: chatFormat, Squasher: squashWith(truncSquash), CacheBytes: bound})
	// Fill the cache, then keep going so that evictions churn it.
	for n, extra := 0, 40; extra > 0 && n < 2000; n++ {
		p.Rewrite(conversation(n))
		if _, used, _ := p.CacheStats(); used >= bound*19/20 {
			extra--
		}
	}
	held := int64(heap()) - int64(before)
	_, used, _ := p.CacheStats()
	runtime.KeepAlive(p)
	if used < bound*9/10 {
		t.Fatalf("the test did not fill the cache: %d of %d bytes", used, bound)
	}
	t.Logf("%d accounted bytes hold %d bytes of heap (%.2fx)", used, held, float64(held)/float64(used))
	if held > bound*23/20 {
		t.Fatalf("a full cache of %d accounted bytes holds %d bytes of heap (%.2fx)", used, held, float64(held)/float64(used))
	}
}

// toolLog is a distinct ~3 KB test-run log with quotes, tabs and newlines
// to escape.
func toolLog(n, turn int) string {
	var b strings.Builder
	for i := 0; b.Len() < 3000; i++ {
		fmt.Fprintf(&b, "=== RUN   TestCase%d_%d_%d\n\tcase_test.go:%d: got \"%d\", want \"%d\"\n--- FAIL: TestCase%d (0.0%ds)\n", n, turn, i, 10+i, n*i, turn, i, i%10)
	}
	return b.String()
}

// The same on the corpus: real agent conversations, each replayed turn by
// turn through the real squasher with dedup and prune on, fill the cache
// with what a daemon holds (token counts of real tool outputs and system
// prompts, squash results, per-message facts, pruned lines, digests). The
// heap that stays held is the bytes the cache accounts, within 15%.
func TestCacheAccountsTheHeapOfRealConversations(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the corpus")
	}
	traces := loadTraces(t)
	held, used, entries := corpusCacheHeap(t, traces, 256<<20)
	ratio := float64(held) / float64(used)
	t.Logf("%d entries account %d bytes and hold %d bytes of heap (%.2fx)", entries, used, held, ratio)
	if used < 3<<20 { // 14k entries: 4.5 MB with sha256 keys, 3.8 MB with maphash ones
		t.Fatalf("the corpus filled only %d bytes of cache", used)
	}
	if ratio < 0.85 || ratio > 1.15 {
		t.Fatalf("%d accounted bytes hold %d bytes of heap (%.2fx), want within 15%%", used, held, ratio)
	}
}

// corpusCacheHeap replays every trace's turns (each prefix ending in a
// tool result, as an agent sends them) through a pipeline with a cache of
// bound bytes, and returns the heap the pipeline holds after, the bytes its
// cache accounts and its entries.
func corpusCacheHeap(tb testing.TB, traces []trace, bound int64) (held, used int64, entries int) {
	tb.Helper()
	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	cfg := func(bound int64) Config {
		return Config{Format: chatFormat, Squash: &squash.Config{}, Dedup: DefaultDedupConfig(),
			Prune: PruneConfig{Enabled: true}, CacheBytes: bound}
	}
	New(cfg(bound)).Rewrite(traces[0].body) // loads the encoders and the squasher's tables
	// Each turn is a trace and the number of messages sent.
	var turns [][2]int
	for i, tr := range traces {
		req, ok := parseRequest(tr.body)
		if !ok {
			continue
		}
		for k := 2; k <= len(req.messages); k++ {
			if req.messages[k-1].role == "tool" || k == len(req.messages) {
				turns = append(turns, [2]int{i, k})
			}
		}
	}
	// Each body is garbage once rewritten, as a request's is: an entry that
	// kept a slice of one would be held heap the test sees.
	before := heap()
	p := New(cfg(bound))
	for _, tk := range turns {
		p.Rewrite(prefixBody(tb, traces[tk[0]].body, tk[1]))
	}
	held = heap() - before
	entries, used, _ = p.CacheStats()
	runtime.KeepAlive(p)
	runtime.KeepAlive(traces)
	return held, used, entries
}
