package proxy

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ctxpress/ctxpress/compaction"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/internal/redistest"
	"github.com/ctxpress/ctxpress/state"
)

// startRedis starts a real redis-server for the test, stopped when it
// ends (internal/redistest: skipped without the binary, unless
// CTXPRESS_REQUIRE_REDIS=1).
func startRedis(t *testing.T) (url string) { return redistest.Need(t).URL() }

// startReplica is a ctxpress of cfg on its own connection to the Redis at
// url: one replica of several sharing their state.
func startReplica(t *testing.T, cfg Config, url string) *testProxy {
	t.Helper()
	return startProxyWith(t, cfg, Deps{Pipeline: pipelineForTest(), Store: openReplicaStore(t, url)})
}

func openReplicaStore(t *testing.T, url string) state.Store {
	t.Helper()
	st, err := state.OpenRedis(state.RedisOptions{URL: url, Prefix: "replicas:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func TestTurnsOnTwoReplicasCompactOnce(t *testing.T) {
	url := startRedis(t)
	up := openaitest.New(t)
	release := holdSummaries(up)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Trigger.ThresholdTokens = 2500
	replicas := []*testProxy{startReplica(t, cfg, url), startReplica(t, cfg, url)}
	t.Cleanup(release) // before the Shutdowns, which wait for the summary call
	a := newAgent(t, replicas[0].BaseURL(), "two replicas")
	for i := 0; i < 12; i++ { // grow past the trigger without compacting yet
		a.history = append(a.history,
			openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: "c" + strconv.Itoa(i), Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "bash", Arguments: `{"command":"ls"}`}}}}}},
			openai.ToolMessage(toolOutput(i), "c"+strconv.Itoa(i)))
	}
	const perReplica = 2
	var wg sync.WaitGroup
	errs := make(chan error, 2*perReplica)
	for _, p := range replicas {
		client := openai.NewClient(option.WithBaseURL(p.BaseURL()), option.WithAPIKey("sk-agent"), option.WithMaxRetries(0))
		for range perReplica {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: a.history},
					option.WithHeader("X-Session-ID", a.convID))
				errs <- err
			}()
		}
	}
	waitFor(t, func() bool { _, s := up.ChatRequests(); return len(s) >= 1 }, "the summary call")
	// Every other turn waits for that one compaction, on its replica's
	// lock or on the other replica's lease; a second summary call fails
	// the test at once.
	waitFor(t, func() bool {
		if _, s := up.ChatRequests(); len(s) > 1 {
			t.Fatalf("%d summary calls running, want 1", len(s))
		}
		return replicas[0].comp.Waiting()+replicas[1].comp.Waiting() == 2*perReplica-1
	}, "the other turns waiting on the compaction")
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	chats, summaries := up.ChatRequests()
	if len(summaries) != 1 {
		t.Fatalf("%d summary calls, want 1", len(summaries))
	}
	if len(chats) != 2*perReplica {
		t.Fatalf("%d chat requests answered, want %d", len(chats), 2*perReplica)
	}
	for i, c := range chats {
		if !strings.Contains(string(c.Body), "<conversation_summary>") {
			t.Errorf("chat request %d was forwarded without the summary", i)
		}
	}
}

// A replica that took a branch's lease and ended without a summary (its
// summary call failed, or it died and the lease expired) leaves the
// turn waiting on the other replica to compact it itself.
func TestTurnWaitingOnAnotherReplicasLeaseCompactsWhenItEnds(t *testing.T) {
	url := startRedis(t)
	up := openaitest.New(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Trigger.ThresholdTokens = 2500
	p := startReplica(t, cfg, url)
	other := openReplicaStore(t, url) // the replica holding the lease
	a := newAgent(t, p.BaseURL(), "lease held")
	key := state.NewKey([]byte("Bearer sk-agent"), a.convID)
	a.turn(false)
	var rec state.Record
	waitFor(t, func() bool { rec, _, _ = other.Get(key); return rec.Requests == 1 }, "the first turn recorded")
	held, ok, err := other.(state.Leaser).Acquire(compaction.LeaseName(state.LineKey{Key: key, Line: rec.CurrentLine().ID}), time.Minute)
	if err != nil || !ok {
		t.Fatalf("the other replica's lease: %v, %v", ok, err)
	}
	// When the turn over the trigger waits, the other replica gives up.
	summariesWhileHeld := make(chan int, 1)
	go func() {
		if !poll(func() bool { return p.comp.Waiting() == 1 }) {
			summariesWhileHeld <- -1
		} else {
			_, s := up.ChatRequests()
			summariesWhileHeld <- len(s)
		}
		_ = held.Release()
	}()
	for a.turns < 30 {
		h := a.turn(false)
		if h.Get(HeaderCompacted) == "true" {
			break
		}
		waitFor(t, func() bool { rec, _, _ := other.Get(key); return rec.Requests == int64(a.turns) }, "the turn recorded")
	}
	if n := <-summariesWhileHeld; n != 0 {
		t.Fatalf("%d summary calls while the other replica held the lease (-1: no turn waited), want 0", n)
	}
	chats, summaries := up.ChatRequests()
	if len(summaries) != 1 || !strings.Contains(string(chats[len(chats)-1].Body), "<conversation_summary>") {
		t.Fatalf("%d summary calls after the lease ended, want 1 applied to the turn", len(summaries))
	}
}

// With Redis gone (killed, then a Redis that stops answering), every turn
// is still answered and squashed, state-less; each failed store operation
// is counted in ctxpress_store_failures_total and the warning is logged
// once per interval, not once per request.
func TestRedisDownTurnsStillGoThroughAndFailuresAreCounted(t *testing.T) {
	for _, how := range []string{"killed", "stopped"} {
		t.Run(how, func(t *testing.T) {
			redis := redistest.Need(t)
			up := openaitest.New(t)
			cfg := compactionConfig(up.BaseURL())
			cfg.Clock = newTestClock().Now // all turns within one warning interval
			p := startReplica(t, cfg, redis.URL())
			a := newAgent(t, p.BaseURL(), "redis down "+how)
			for i := 0; i < 3; i++ {
				a.turn(i%2 == 0)
			}
			p.WaitIdle()
			if how == "killed" {
				redis.Stop()
			} else if err := redis.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			} else {
				t.Cleanup(func() { _ = redis.Signal(syscall.SIGCONT) })
			}
			a.history = append(a.history, openai.UserMessage("the build log:\n"+bigLog()))
			const down = 6
			for i := 0; i < down; i++ {
				a.turn(i%2 == 0)
			}
			p.WaitIdle()
			chats, summaries := up.ChatRequests()
			if len(summaries) != 0 {
				t.Errorf("%d summary calls while the store was down: a summary it cannot keep must not be paid for", len(summaries))
			}
			last := chats[len(chats)-1].Body
			if strings.Contains(string(last), bigLog()) {
				t.Error("the big log was forwarded whole: with the store down, squash must still run")
			}
			fams := scrape(t, p.URL)
			if n := value(fams, "ctxpress_store_failures_total", "op", "read"); n < down {
				t.Errorf("%v failed reads counted, want at least %d (one per turn)", n, down)
			}
			if n := value(fams, "ctxpress_store_failures_total", "op", "write"); n < down {
				t.Errorf("%v failed writes counted, want at least %d (one per turn's record)", n, down)
			}
			if warns := warnLines(p.logs.String()); len(warns) == 0 || len(warns) > 4 {
				t.Errorf("%d warnings for %d failing turns; want a handful (once per interval):\n%s", len(warns), down, strings.Join(warns, "\n"))
			}
		})
	}
}
