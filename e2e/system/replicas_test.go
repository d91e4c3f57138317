package system

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/internal/redistest"
	"github.com/ctxpress/ctxpress/state"
	"github.com/tidwall/gjson"
)

// The conversations of these tests: 40 tool turns of ~1.2 KB, over a
// trigger they pass two or three times.
const (
	clusterTurns     = 40
	clusterThreshold = 6000
)

// startReplica runs the binary on config cfg in front of upstream and
// returns its process and base URL once it serves.
func startReplica(t *testing.T, bin, cfg, upstream string) (*exec.Cmd, string) {
	t.Helper()
	cmd, base, logs := startBinary(t, bin, "--config", cfg, "--upstream", upstream)
	go func() {
		for logs.Scan() {
		}
	}()
	return cmd, base
}

func hostOf(t *testing.T, base string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// checkCompactedRun checks one run's upstream requests, in arrival order:
// no turn before the first summary call carries a summary, every turn
// after it does, and each turn's messages extend the previous turn's (the
// prompt-cache prefix) unless a summary call came between them. It
// returns the forwarded turns and the number of summary calls.
func checkCompactedRun(t *testing.T, run string, reqs []openaitest.Request) (chats []openaitest.Request, summaries int) {
	t.Helper()
	var prev []string
	compacted := false
	for _, r := range reqs {
		if openaitest.IsSummaryRequest(r.Body) {
			summaries++
			compacted = true
			continue
		}
		turn := len(chats)
		has := bytes.Contains(r.Body, []byte("<conversation_summary>"))
		switch {
		case summaries > 0 && !has:
			t.Errorf("%s: turn %d (on %s) forwarded without the summary, after %d summary calls", run, turn, replicaOf(r), summaries)
		case summaries == 0 && has:
			t.Errorf("%s: turn %d (on %s) carries a summary before any summary call", run, turn, replicaOf(r))
		}
		msgs := rawMessages(r.Body)
		if prev != nil && !compacted && !isPrefix(prev, msgs) {
			t.Errorf("%s: turn %d's messages (on %s) do not extend turn %d's without a compaction between: the prompt-cache prefix broke", run, turn, replicaOf(r), turn-1)
		}
		prev, compacted = msgs, false
		chats = append(chats, r)
	}
	return chats, summaries
}

func rawMessages(body []byte) []string {
	var out []string
	for _, m := range gjson.GetBytes(body, "messages").Array() {
		out = append(out, m.Raw)
	}
	return out
}

func isPrefix(a, b []string) bool { return len(a) <= len(b) && slices.Equal(a, b[:len(a)]) }

// checkAlternates fails unless consecutive turns went to different
// replicas.
func checkAlternates(t *testing.T, chats []openaitest.Request) {
	t.Helper()
	for i := 1; i < len(chats); i++ {
		if replicaOf(chats[i]) == replicaOf(chats[i-1]) {
			t.Fatalf("turns %d and %d both went to replica %s: the load balancer did not alternate", i-1, i, replicaOf(chats[i]))
		}
	}
}

// A conversation whose turns alternate two replicas (two ctxpress
// processes on one Redis behind nginx's round robin) compacts as it does
// on one replica: as many summary calls, the summary on every turn after
// the first, the prompt-cache prefix kept between compactions, and the
// same bytes forwarded turn by turn.
func TestConversationAlternatingTwoReplicasCompactsAsOnOne(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, runs nginx and redis-server")
	}
	nginxBinary(t)
	rds := redistest.Need(t)
	up := newReplicaUpstream(t, "a", "b", "solo")
	bin := ctxpressBinary(t)

	shared := replicaConfig(t, rds.URL(), "two:", clusterThreshold)
	_, a := startReplica(t, bin, shared, up.URL+"/a/v1")
	_, b := startReplica(t, bin, shared, up.URL+"/b/v1")
	lb := startNginx(t, hostOf(t, a), hostOf(t, b))
	two := newToolAgent("alternating")
	st, err := state.OpenRedis(state.RedisOptions{URL: rds.URL(), Prefix: "two:"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range clusterTurns {
		if status, err := two.turn(lb); err != nil || status != http.StatusOK {
			t.Fatalf("turn %d through nginx: status %d, %v", i, status, err)
		}
		// A turn is recorded after its answer, within the writer's
		// interval; an agent takes longer than that to send its next turn
		// (the model's answer, the tool's run). Without this wait, the next
		// turn on the other replica can read the record before this one's
		// usage lands and judge its trigger on older numbers, a timing
		// this test is not about.
		awaitCond(t, fmt.Sprintf("turn %d recorded", i), func() bool { return requestsIn(st) == int64(i+1) })
	}

	_, solo := startReplica(t, bin, replicaConfig(t, rds.URL(), "solo:", clusterThreshold), up.URL+"/solo/v1")
	one := newToolAgent("alternating")
	for i := range clusterTurns {
		if status, err := one.turn(solo); err != nil || status != http.StatusOK {
			t.Fatalf("turn %d on one replica: status %d, %v", i, status, err)
		}
	}

	reqs := up.Requests()
	chatsTwo, summariesTwo := checkCompactedRun(t, "two replicas", byReplica(reqs, "a", "b"))
	chatsOne, summariesOne := checkCompactedRun(t, "one replica", byReplica(reqs, "solo"))
	if len(chatsTwo) != clusterTurns || len(chatsOne) != clusterTurns {
		t.Fatalf("%d and %d turns forwarded, want %d each", len(chatsTwo), len(chatsOne), clusterTurns)
	}
	checkAlternates(t, chatsTwo)
	if summariesOne < 2 {
		t.Fatalf("one replica made %d summary calls in %d turns: the trigger is too high for this test", summariesOne, clusterTurns)
	}
	if summariesTwo != summariesOne {
		t.Fatalf("two replicas made %d summary calls, one replica %d", summariesTwo, summariesOne)
	}
	for i := range chatsOne {
		if !bytes.Equal(chatsTwo[i].Body, chatsOne[i].Body) {
			t.Fatalf("turn %d forwarded differently by %s of two replicas than by one:\n%s\n---\n%s", i, replicaOf(chatsTwo[i]), chatsTwo[i].Body, chatsOne[i].Body)
		}
	}
	t.Logf("%d turns, %d summary calls on either; forwarded bodies equal turn by turn; lines in the record: %d on two replicas, %d on one",
		clusterTurns, summariesOne, linesIn(t, rds.URL(), "two:"), linesIn(t, rds.URL(), "solo:"))
}

// requestsIn is how many requests the one record in st counts (0 when
// there is none yet).
func requestsIn(st state.Store) int64 {
	recs, err := st.List(state.ListOptions{})
	if err != nil || len(recs) != 1 {
		return 0
	}
	rec, ok, err := st.Get(recs[0].Key)
	if err != nil || !ok {
		return 0
	}
	return rec.Requests
}

// linesIn is how many lines the one record under prefix has. A turn that
// read the record before the previous turn's (on the other replica) was
// written joins that line when its own write comes after (relinkNew); a
// write that lands first still leaves a one-turn line: rare, so reported,
// not asserted.
func linesIn(t *testing.T, url, prefix string) int {
	t.Helper()
	st, err := state.OpenRedis(state.RedisOptions{URL: url, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.List(state.ListOptions{})
	if err != nil || len(recs) != 1 {
		t.Fatalf("%d records under %s, %v", len(recs), prefix, err)
	}
	return len(recs[0].Lines)
}

// A replica SIGKILLed while its summary call runs leaves the other to
// finish the conversation: the turn in flight on the dead one gets nginx's
// 502 (a POST already sent is not resent) and the agent's retry goes to
// the other, which waits for the dead replica's lease to expire rather
// than summarise beside it, then compacts; every later turn is answered
// (nginx resends a refused connection to the live replica) with the
// summary, and Redis holds one line with that summary.
func TestReplicaKilledMidCompactionLeavesTheOtherToFinish(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, runs nginx and redis-server")
	}
	nginxBinary(t)
	rds := redistest.Need(t)
	up := newReplicaUpstream(t, "a", "b")
	held := make(chan string, 1)
	up.hold.Store(&held)
	bin := ctxpressBinary(t)
	cfg := replicaConfig(t, rds.URL(), "kill:", clusterThreshold)
	cmds, bases := map[string]*exec.Cmd{}, map[string]string{}
	for _, name := range []string{"a", "b"} {
		cmds[name], bases[name] = startReplica(t, bin, cfg, up.URL+"/"+name+"/v1")
	}
	lb := startNginx(t, hostOf(t, bases["a"]), hostOf(t, bases["b"]))
	agent := newToolAgent("killed")
	st, err := state.OpenRedis(state.RedisOptions{URL: rds.URL(), Prefix: "kill:"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	type result struct {
		status int
		err    error
	}
	turns, dead := 0, ""
	for dead == "" {
		if turns == clusterTurns {
			t.Fatalf("no summary call in %d turns", turns)
		}
		res := make(chan result, 1)
		go func() { s, err := agent.turn(lb); res <- result{s, err} }()
		select {
		case r := <-res:
			if r.err != nil || r.status != http.StatusOK {
				t.Fatalf("turn %d: status %d, %v", turns, r.status, r.err)
			}
			turns++
			if turns == 1 {
				// A record is written after its turn's answer: a second turn
				// on the other replica whose own write lands before the
				// first's leaves a one-turn line (see linesIn; not this
				// test's subject).
				awaitCond(t, "the first turn recorded", func() bool { recs, _ := st.List(state.ListOptions{}); return len(recs) == 1 })
			}
		case dead = <-held:
			if err := cmds[dead].Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmds[dead].Wait()
			if r := <-res; r.err != nil || r.status != http.StatusBadGateway {
				t.Fatalf("the turn in flight on the killed replica: status %d, %v; want nginx's 502", r.status, r.err)
			}
		}
	}
	checkAlternates(t, byReplica(up.Requests(), "a", "b")[:turns])
	live := map[string]string{"a": "b", "b": "a"}[dead]

	// The agent retries the turn (as SDKs do on a 502): the live replica
	// must wait for the dead one's lease, not summarise beside it.
	retry := make(chan result, 1)
	go func() { s, err := agent.turn(lb); retry <- result{s, err} }()
	awaitCond(t, "replica "+live+" waiting on the dead replica's lease", func() bool {
		if _, s := splitSummaries(byReplica(up.Requests(), live)); s > 0 {
			t.Fatalf("replica %s made a summary call while the dead replica's lease was live", live)
		}
		return compactionWaiting(bases[live]) == 1
	})
	if r := <-retry; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("the retried turn: status %d, %v", r.status, r.err)
	}
	turns++
	for ; turns < clusterTurns; turns++ {
		if status, err := agent.turn(lb); err != nil || status != http.StatusOK {
			t.Fatalf("turn %d after the kill: status %d, %v", turns, status, err)
		}
	}

	chats, _ := checkCompactedRun(t, "killed replica", byReplica(up.Requests(), "a", "b"))
	if len(chats) != clusterTurns {
		t.Fatalf("%d turns forwarded, want %d", len(chats), clusterTurns)
	}
	for i, c := range chats[countBefore(chats, dead):] {
		if replicaOf(c) != live {
			t.Fatalf("turn %d after the kill went to %s", countBefore(chats, dead)+i, replicaOf(c))
		}
	}
	checkRedisRecord(t, st, up, live)
}

// countBefore is how many of chats precede the first one sent after
// replica dead stopped (its last turn and all before it).
func countBefore(chats []openaitest.Request, dead string) int {
	last := -1
	for i, c := range chats {
		if replicaOf(c) == dead {
			last = i
		}
	}
	return last + 1
}

// splitSummaries counts reqs' turns and summary calls.
func splitSummaries(reqs []openaitest.Request) (chats, summaries int) {
	for _, r := range reqs {
		if openaitest.IsSummaryRequest(r.Body) {
			summaries++
		} else {
			chats++
		}
	}
	return chats, summaries
}

var hexSummaryTag = regexp.MustCompile(`summary-[0-9a-f]+`)

// checkRedisRecord checks the conversation's record in Redis: one record
// with one line, as many compactions as summaries answered, and the
// summary it resumes from one that replica live got.
func checkRedisRecord(t *testing.T, st state.Store, up *replicaUpstream, live string) {
	t.Helper()
	recs, err := st.List(state.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("%d records in Redis, want 1", len(recs))
	}
	answered := up.summaries.Load()
	var rec state.Record
	// A turn is recorded after its answer (the writer's batch): the last
	// compacted turn's count can land after the agent's last turn returns.
	awaitCond(t, "the record counting every answered summary", func() bool {
		var ok bool
		if rec, ok, err = st.Get(recs[0].Key); err != nil || !ok {
			t.Fatalf("the record: %v, %v", ok, err)
		}
		return rec.Compactions >= answered
	})
	if len(rec.Lines) != 1 {
		for _, l := range rec.Lines {
			t.Logf("line %x: tip at %d messages, used %s", l.ID[:4], l.Messages, l.UsedAt)
		}
		t.Fatalf("the record has %d lines, want 1", len(rec.Lines))
	}
	if rec.Compactions != answered {
		t.Fatalf("the record counts %d compactions, the upstream answered %d summary calls", rec.Compactions, answered)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	for _, b := range rec.Branches {
		tag := hexSummaryTag.FindString(b.Summary)
		if got, ok := up.served[tag]; !ok || got != live {
			t.Fatalf("the record holds a summary %q not written for replica %s (%q)", tag, live, got)
		}
	}
	if len(rec.Branches) == 0 || !strings.Contains(rec.Branches[0].Summary, "## Active Task") {
		t.Fatalf("the record holds no summary: %+v", rec.Branches)
	}
}
