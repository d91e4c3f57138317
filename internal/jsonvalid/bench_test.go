package jsonvalid

import (
	"encoding/json"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// benchBody is a ~500 KB chat-completions request (see chatBody): source
// code, logs, HTML, prose and doubly escaped tool arguments, with a
// backslash or quote every ~10 bytes on average.
var benchBody = chatBody(42, 380<<10)

func benchmark(b *testing.B, valid func([]byte) bool, body []byte) {
	if !valid(body) {
		b.Fatal("benchmark body is not valid")
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		valid(body)
	}
}

func BenchmarkValid(b *testing.B)      { benchmark(b, Valid, benchBody) }
func BenchmarkGjsonValid(b *testing.B) { benchmark(b, gjson.ValidBytes, benchBody) }

// BenchmarkSpeedup alternates both validators on benchBody and reports how
// many times faster Valid is. Unlike comparing the two benchmarks above, it
// is not skewed when the machine's speed drifts during the run (as it does
// on shared VMs).
func BenchmarkSpeedup(b *testing.B) {
	var tValid, tGjson time.Duration
	for b.Loop() {
		t0 := time.Now()
		Valid(benchBody)
		t1 := time.Now()
		gjson.ValidBytes(benchBody)
		tGjson += time.Since(t1)
		tValid += t1.Sub(t0)
	}
	b.ReportMetric(float64(tGjson)/float64(tValid), "x-faster")
}

// freshBodies are 8 different ~500 KB chat bodies. Validating the same body
// over and over lets the CPU's branch predictor learn it, which flatters
// both validators; rotating through several bodies (4 MB in all) is closer
// to a proxy that sees every body once.
var freshBodies = sync.OnceValue(func() (bodies [][]byte) {
	for seed := range uint64(8) {
		bodies = append(bodies, chatBody(1000+seed, 380<<10))
	}
	return bodies
})

func benchmarkFresh(b *testing.B, valid func([]byte) bool) {
	bodies := freshBodies()
	n := 0
	for _, body := range bodies {
		if !valid(body) {
			b.Fatal("benchmark body is not valid")
		}
		n += len(body)
	}
	b.SetBytes(int64(n / len(bodies)))
	i := 0
	for b.Loop() {
		valid(bodies[i%len(bodies)])
		i++
	}
}

func BenchmarkValidFresh(b *testing.B)      { benchmarkFresh(b, Valid) }
func BenchmarkGjsonValidFresh(b *testing.B) { benchmarkFresh(b, gjson.ValidBytes) }

// BenchmarkShapes compares both validators on other body shapes:
// pretty-printed, ASCII-only (\uXXXX escapes for all non-ASCII), a single
// tool output of source code (escape-dense), a single log-free prose
// message (escape-sparse) and a small request.
func BenchmarkShapes(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 9))
	code, _ := json.Marshal(map[string]any{"messages": []chatMessage{{Role: "tool", ToolCallID: "c", Content: codeText(r, 500)}}})
	prose, _ := json.Marshal(map[string]any{"messages": []chatMessage{{Role: "user", Content: proseText(r, 4000)}}})
	shapes := []struct {
		name string
		body []byte
	}{
		{"pretty", prettyBody(benchBody)},
		{"ascii", asciiBody(benchBody)},
		{"code", code},
		{"prose", prose},
		{"small", smallChatBody(1)},
	}
	for _, s := range shapes {
		b.Run(s.name+"/jsonvalid", func(b *testing.B) { benchmark(b, Valid, s.body) })
		b.Run(s.name+"/gjson", func(b *testing.B) { benchmark(b, gjson.ValidBytes, s.body) })
	}
}
