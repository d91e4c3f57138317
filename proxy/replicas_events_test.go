package proxy

import (
	"bufio"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/admin"

	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/internal/redistest"
)

// sseEvent is one event read from /ctxpress/events.
type sseEvent struct {
	typ  string
	data string
}

func (e sseEvent) get(path string) string { return gjson.Get(e.data, path).String() }

// openEvents subscribes to p's /ctxpress/events (types as the query
// parameter) and returns once the subscription is in place.
func openEvents(t *testing.T, p *testProxy, types string) <-chan sseEvent {
	t.Helper()
	resp, err := http.Get(p.URL + "/ctxpress/events?types=" + types)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || sc.Text() != ": ctxpress events" { // written after subscribing
		t.Fatalf("events stream began with %q, %v", sc.Text(), sc.Err())
	}
	got := make(chan sseEvent, 4096)
	go func() {
		defer close(got)
		var e sseEvent
		for sc.Scan() {
			switch line := sc.Text(); {
			case strings.HasPrefix(line, "event: "):
				e.typ = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				e.data = strings.TrimPrefix(line, "data: ")
			case line == "" && e.typ != "":
				got <- e
				e = sseEvent{}
			}
		}
	}()
	return got
}

// readUntil reads events until stop says the last one is the mark, and
// returns those before it.
func readUntil(t *testing.T, events <-chan sseEvent, what string, stop func(sseEvent) bool) []sseEvent {
	t.Helper()
	var seen []sseEvent
	hang := time.After(30 * time.Second) // a hang guard, not a bound on speed
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatalf("events stream ended before %s", what)
			}
			if stop(e) {
				return seen
			}
			seen = append(seen, e)
		case <-hang:
			t.Fatalf("no %s on the events stream; got %v", what, seen)
		}
	}
}

func compactionsOf(events []sseEvent, conv string) (replicas []string) {
	for _, e := range events {
		if e.typ == admin.EventCompaction && e.get("conversation") == conv {
			replicas = append(replicas, e.get("replica"))
		}
	}
	return replicas
}

func isCompaction(replica, conv string) func(sseEvent) bool {
	return func(e sseEvent) bool {
		return e.typ == admin.EventCompaction && e.get("replica") == replica && e.get("conversation") == conv
	}
}

func hookPosts(hook *openaitest.Server, path string) (convs []string) {
	for _, r := range hook.Requests() {
		if r.Path == path {
			convs = append(convs, gjson.GetBytes(r.Body, "conversation").String())
		}
	}
	return convs
}

// forceCompaction is one turn of a new conversation on p that asks for a
// compaction: an event of p's own, a mark in its streams and webhook.
func forceCompaction(t *testing.T, p *testProxy, conv string) {
	newAgent(t, p.BaseURL(), conv).turn(false, option.WithHeader(HeaderCompact, "force"))
}

func TestCompactionOnOneReplicaIsOnEveryReplicasEventsOnce(t *testing.T) {
	url := startRedis(t)
	up := openaitest.New(t)
	hook := openaitest.New(t)
	for _, path := range []string{"/a", "/b"} {
		hook.Handle(path, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	}
	replica := func(name string) *testProxy {
		cfg := compactionConfig(up.BaseURL())
		cfg.Replica, cfg.Compaction.WebhookURL = name, hook.URL+"/"+name
		return startReplica(t, cfg, url)
	}
	pa, pb := replica("a"), replica("b")
	atA, atB := openEvents(t, pa, "compaction,turn"), openEvents(t, pb, "compaction,turn")

	a := newAgent(t, pa.BaseURL(), "on a")
	for i := 0; i < 10; i++ {
		a.turn(false)
	}
	if h := a.turn(false, option.WithHeader(HeaderCompact, "force")); h.Get(HeaderCompacted) != "true" {
		t.Fatal("the forced compaction did not compact")
	}
	// A publishes the compaction before the turn it was made in is
	// recorded: the turn's event comes after it everywhere.
	isCompactedTurn := func(e sseEvent) bool {
		return e.typ == admin.EventTurn && e.get("replica") == "a" && e.get("conversation") == "on a" && e.get("requests") == "11"
	}
	if got := compactionsOf(readUntil(t, atB, "a's compacted turn on b", isCompactedTurn), "on a"); len(got) != 1 || got[0] != "a" {
		t.Fatalf("b's stream showed a's compaction from replicas %q, want once from a", got)
	}
	// b's own event, published after b saw a's compaction, reaches a after
	// a's compaction came back to a from Redis: a's stream shows its own
	// compaction once, not again when it comes back.
	forceCompaction(t, pb, "on b")
	if got := compactionsOf(readUntil(t, atA, "b's compaction on a", isCompaction("b", "on b")), "on a"); len(got) != 1 || got[0] != "a" {
		t.Fatalf("a's stream showed its compaction from replicas %q, want once from a", got)
	}
	// Each replica posts its own events only: b's webhook posts, in order,
	// would hold a's compaction before b's own if b posted what it heard.
	forceCompaction(t, pa, "a again")
	waitFor(t, func() bool { return len(hookPosts(hook, "/a")) >= 2 && len(hookPosts(hook, "/b")) >= 1 }, "the webhook posts")
	if got := hookPosts(hook, "/a"); strings.Join(got, "|") != "on a|a again" {
		t.Errorf("a's webhook got events of %q, want on a, a again", got)
	}
	if got := hookPosts(hook, "/b"); strings.Join(got, "|") != "on b" {
		t.Errorf("b's webhook got events of %q, want on b only", got)
	}
}

// A Redis that stops answering mid-run costs the replicas their shared
// events, not their requests: turns go through, and events that do not fit
// the queue are dropped and counted instead of waiting.
func TestRequestsGoThroughAndEventsDoNotWaitWhileRedisHangs(t *testing.T) {
	r := redistest.Need(t)
	up := openaitest.New(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Replica = "a"
	pa := startReplica(t, cfg, r.URL())
	cfg.Replica = "b"
	pb := startReplica(t, cfg, r.URL())
	atB := openEvents(t, pb, "turn")
	a := newAgent(t, pa.BaseURL(), "hung")
	a.turn(false)
	isHungTurn := func(e sseEvent) bool { return e.get("replica") == "a" && e.get("conversation") == "hung" }
	readUntil(t, atB, "a's first turn on b", isHungTurn)

	if err := r.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = r.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	for range 3 {
		a.turn(false) // fails the test unless answered
	}
	// As many events as a busy cluster makes while Redis is gone; each is
	// published from the caller's goroutine, which must not wait.
	for i := range 2000 {
		pa.events.Turn(admin.TurnEvent{Conversation: "filler", Requests: int64(i)})
	}
	if dropped := sharedEvents(t, pa, "dropped"); dropped == 0 {
		t.Fatal("no shared event dropped with Redis hung: the queue is not bounded")
	}
	chats, _ := up.ChatRequests()
	if len(chats) != 4 {
		t.Fatalf("%d chat requests reached the upstream, want 4", len(chats))
	}
	resume()
	// Back: a's turns reach b again (its subscription may have to come
	// back first, so the mark is repeated until one arrives; compactions
	// would not do: they pause after a store failure).
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for n := 1; ; n++ {
		a.turn(false)
		tick := time.After(time.Second)
	read:
		for {
			select {
			case e := <-atB:
				if isHungTurn(e) {
					return
				}
			case <-tick:
				break read
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Redis came back, none of a's %d turns reached b", n)
		}
	}
}

// sharedEvents is p's ctxpress_events_shared_total of result.
func sharedEvents(t *testing.T, p *testProxy, result string) float64 {
	t.Helper()
	fam := scrape(t, p.URL)["ctxpress_events_shared_total"]
	if fam == nil {
		t.Fatal("no ctxpress_events_shared_total")
	}
	for _, m := range fam.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "result" && l.GetValue() == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no ctxpress_events_shared_total{result=%q}", result)
	return 0
}
