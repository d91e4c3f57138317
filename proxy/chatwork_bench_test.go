package proxy

import (
	"io"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"github.com/ctxpress/ctxpress/compaction"
	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/internal/corpustest"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire/chat"
)

// BenchmarkChatTurnWork is a chat turn's own work without the network,
// with the default compaction config and a bbolt store: authenticated,
// prepared (parse, identify, record, rewrite, plan) and finished on a
// small non-streamed answer (usage, metrics, record queued, log line).
// Two requests: "session" is deploy/bench-passthrough.sh's (a system and
// a ~1 KiB user message, X-Session-ID over 64 conversations), "agent" the
// load tool's comparison request (tools, a tool call and its result,
// identified by its opening, as most agents are: one conversation). The
// recorder's writes are drained with the timer stopped every 64 turns, so
// ns/op is the turn's own work (B/op and allocs/op still count what the
// writer allocates while the timer runs).
// Run: go test -run '^$' -bench ChatTurnWork -benchmem ./proxy/
func BenchmarkChatTurnWork(b *testing.B) {
	unit := "The build fails in pkg/server with undefined: handler. "
	session := []byte(`{"model":"gpt-4o","messages":[{"role":"system","content":"You are a coding agent."},{"role":"user","content":"` +
		strings.Repeat(unit, 16) + `"}]}`)
	agent := []byte(`{"model":"gpt-4o","stream":false,"tools":[{"type":"function","function":{"name":"bash","description":"Run a shell command","parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}},{"type":"function","function":{"name":"read_file","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}}],` +
		`"messages":[{"role":"system","content":"You are a coding agent working in a Go repository. Use the tools to inspect files, run commands and fix bugs. Keep answers short."},{"role":"user","content":"Task 1000000-1: the test suite fails after the last refactor; find the cause and fix it."},` +
		`{"role":"assistant","content":"Checking.","tool_calls":[{"id":"call_1_1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"git status --short # 1\"}"}}]},{"role":"tool","tool_call_id":"call_1_1","content":" M parse/date.go\n M parse/date_test.go\n?? parse/leap_1.go"}]}`)
	b.Run("session", func(b *testing.B) { benchmarkChatTurnWork(b, [][]byte{session}, true) })
	b.Run("agent", func(b *testing.B) { benchmarkChatTurnWork(b, [][]byte{agent}, false) })
	// The corpus's agent requests (real histories of up to hundreds of
	// messages), each its own conversation, each turn seen before.
	b.Run("corpus", func(b *testing.B) {
		var bodies [][]byte
		for _, tr := range corpustest.Traces(b) {
			bodies = append(bodies, tr.Body)
		}
		benchmarkChatTurnWork(b, bodies, false)
	})
	// The same with originals kept as a ctxpress on the agent's machine
	// keeps them (markers naming a file; store and files written once).
	b.Run("corpus-originals", func(b *testing.B) {
		var bodies [][]byte
		for _, tr := range corpustest.Traces(b) {
			bodies = append(bodies, tr.Body)
		}
		benchmarkChatTurnWork(b, bodies, false, keepingOriginals)
	})
}

// keepingOriginals makes a bench server keep originals, with files.
func keepingOriginals(b *testing.B, deps *Deps) {
	files, err := state.OpenOriginalFiles(filepath.Join(b.TempDir(), "originals"), 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	deps.Pipeline = rewrite.New(rewrite.Config{Format: chat.Format{}, Squash: &squash.Config{},
		Dedup: rewrite.DefaultDedupConfig(), Expand: &expand.Ways{Dir: files.Dir}})
	deps.Files = files
}

// benchmarkChatTurnWork runs turns of bodies in turn, 64 conversations
// (each with its own X-Session-ID when sessions) or one per body.
func benchmarkChatTurnWork(b *testing.B, bodies [][]byte, sessions bool, opts ...func(*testing.B, *Deps)) {
	deps, _ := chatDeps(b)
	for _, o := range opts {
		o(b, &deps)
	}
	cfg := Config{Upstream: "http://127.0.0.1:1/v1", Compaction: compaction.Config{Enabled: true,
		Trigger:     rewrite.TriggerConfig{ThresholdRatio: rewrite.DefaultThresholdRatio, DefaultContextWindow: rewrite.DefaultContextWindow},
		TargetRatio: DefaultTargetRatio, KeepRecent: DefaultKeepRecent, Precompact: true}}
	s, err := New(unprobed(cfg), zerolog.New(io.Discard), deps)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.rec.Close() })
	answer := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":250,"completion_tokens":1,"total_tokens":251}}`)
	ctxs := make([]*fasthttp.RequestCtx, max(64, len(bodies)))
	for i := range ctxs {
		ctx := &fasthttp.RequestCtx{}
		ctx.Request.SetRequestURI("/v1/chat/completions")
		ctx.Request.Header.SetMethod(fasthttp.MethodPost)
		ctx.Request.Header.SetContentType("application/json")
		ctx.Request.Header.Set("Authorization", "Bearer sk-bench")
		if sessions {
			ctx.Request.Header.Set("X-Session-ID", "bench-"+strconv.Itoa(i))
		}
		ctxs[i] = ctx
	}
	turn := func(i int) {
		ctx := ctxs[i%len(ctxs)]
		ctx.Request.SetBodyRaw(bodies[i%len(bodies)])
		ctx.Response.Reset()
		s.handle0(ctx, answer)
	}
	for i := range 2 * len(ctxs) {
		turn(i)
	}
	s.rec.Wait()
	// The turns run on one thread, whose CPU time is the turn's own work
	// (what it allocates and its GC assists included), the recorder's
	// writer and the GC's workers left out: a steadier number than ns/op
	// on a shared machine.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	t0 := threadCPU()
	for i := range b.N {
		turn(i)
		if i%len(ctxs) == len(ctxs)-1 {
			cpu += threadCPU() - t0
			b.StopTimer()
			s.rec.Wait()
			b.StartTimer()
			t0 = threadCPU()
		}
	}
	cpu += threadCPU() - t0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "thread-cpu-ns/op")
}

// threadCPU is the CPU time the calling thread has used
// (CLOCK_THREAD_CPUTIME_ID, to the nanosecond).
func threadCPU() time.Duration {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// clockThreadCPUTime is Linux's CLOCK_THREAD_CPUTIME_ID.
const clockThreadCPUTime = 3

// handle0 is handle and handleTurn for a chat request without the
// upstream: answer stands for the upstream's whole, non-streamed reply.
func (s *Server) handle0(ctx *fasthttp.RequestCtx, answer []byte) {
	x := s.newExchange(ctx)
	if !s.authenticate(ctx, x) {
		panic("not authenticated")
	}
	a := apiOf(ctx.Path())
	t, ok := s.turns.Begin(&a.turn, ctx.Request.Body(), (*requestHeader)(&ctx.Request.Header), s.namespaces.of(x.credential))
	if !ok {
		panic("not understood")
	}
	x.turn = t
	setTurnHeaders(&ctx.Response.Header, t)
	t.Sent(t.Body())
	x.status = fasthttp.StatusOK
	x.usage = usageFromBody(a, answer, nil)
	x.bytesOut = int64(len(answer))
	s.finish(x)
}
