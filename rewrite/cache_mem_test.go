package rewrite

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
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
		if _, used := p.cache.stats(); used >= bound*19/20 {
			extra--
		}
	}
	held := int64(heap()) - int64(before)
	_, used := p.cache.stats()
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
