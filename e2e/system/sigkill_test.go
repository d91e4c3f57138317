package system

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/state"
	bolt "go.etcd.io/bbolt"
)

// simAgent is a tool-using conversation driven over raw HTTP.
type simAgent struct {
	id   string
	msgs []map[string]any
	sent int // turns answered 200
}

func newSimAgent(id string) *simAgent {
	return &simAgent{id: id, msgs: []map[string]any{
		{"role": "system", "content": "You are a coding agent."},
		{"role": "user", "content": "Fix the failing build of " + id + "."},
	}}
}

// turn sends the history and appends a tool call and a ~1.2 KB result.
func (a *simAgent) turn(url string) error {
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": a.msgs, "stream": len(a.msgs)%4 == 0})
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-kill")
	req.Header.Set("X-Session-ID", a.id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	a.sent++
	n := len(a.msgs)
	call := fmt.Sprintf("call_%d", n)
	var out strings.Builder
	for i := 0; out.Len() < 1200; i++ {
		fmt.Fprintf(&out, "%s/build_%d.go:%d: undefined: handler%d\n", a.id, n, i, i*7)
	}
	a.msgs = append(a.msgs,
		map[string]any{"role": "assistant", "content": "Running the build.", "tool_calls": []map[string]any{{
			"id": call, "type": "function", "function": map[string]any{"name": "bash", "arguments": fmt.Sprintf(`{"command":"go build ./... # %d"}`, n)}}}},
		map[string]any{"role": "tool", "tool_call_id": call, "content": out.String()})
	return nil
}

// checkDB opens the db file as bbolt and as ctxpress's store: every stored
// record decodes, and every summary in it is one the summariser wrote (no
// torn or mixed record).
func checkDB(t *testing.T, path string, served func(string) bool) int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("the db does not open as bbolt after SIGKILL: %v", err)
	}
	raw := 0
	if err := db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte("conversations")); b != nil {
			raw = b.Stats().KeyN
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	st, err := state.OpenBolt(path, state.BoltOptions{ReadOnly: true})
	if err != nil {
		t.Fatalf("ctxpress cannot open the db after SIGKILL: %v", err)
	}
	defer st.Close()
	recs, err := st.List(state.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != raw {
		t.Fatalf("%d records stored, %d decode", raw, len(recs))
	}
	for _, r := range recs {
		if _, ok, err := st.Get(r.Key); err != nil || !ok {
			t.Fatalf("record %s: ok %v, %v", r.Key, ok, err)
		}
		for _, b := range r.Branches {
			if !served(b.Summary) {
				t.Fatalf("record %s holds a summary the summariser never wrote: %q", r.Key, b.Summary)
			}
		}
	}
	return len(recs)
}

// Where a kill cycle's SIGKILL lands, each once: inside a summary call,
// right after a summary's answer (while ctxpress stores it), inside a chat
// turn.
const (
	killInSummary    = "inside a summary call"
	killAfterSummary = "after a summary's answer"
	killInChat       = "inside a chat turn"
)

// killTrap is one cycle's kill point: the upstream fires it when the
// cycle's nth summary call comes (or, for killInChat, the first chat turn
// after it) and holds that request until the process is gone.
type killTrap struct {
	where   string
	summary int64         // the summary call it waits for (by the upstream's count)
	reached chan struct{} // closed when the kill is due
	once    sync.Once
}

func (k *killTrap) fire() { k.once.Do(func() { close(k.reached) }) }

// trapUpstream is the fake upstream of the kill test: it tags each summary
// it writes, and springs the armed kill trap.
type trapUpstream struct {
	*openaitest.Server
	summaries atomic.Int64 // summary calls received
	trap      atomic.Pointer[killTrap]
	mu        sync.Mutex
	served    map[string]bool // guarded by mu: the tags of the summaries written
}

func newTrapUpstream(t *testing.T) *trapUpstream {
	u := &trapUpstream{Server: openaitest.New(t), served: map[string]bool{}}
	u.Handle("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		k := u.trap.Load()
		if !openaitest.IsSummaryRequest(body) {
			if k != nil && k.where == killInChat && u.summaries.Load() >= k.summary {
				k.fire()
				<-r.Context().Done() // held until the process is gone
				return
			}
			u.AnswerChat(w, r, body)
			return
		}
		n := u.summaries.Add(1)
		tag := fmt.Sprintf("summary-%d", n)
		u.mu.Lock()
		u.served[tag] = true
		u.mu.Unlock()
		due := k != nil && n == k.summary
		if due && k.where == killInSummary {
			k.fire()
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"## Goal\nFix the build.\n\n## Active Task\n%s"},"finish_reason":"stop"}]}`, tag)
		w.(http.Flusher).Flush()
		if due && k.where == killAfterSummary {
			k.fire()
		}
	})
	return u
}

var summaryTag = regexp.MustCompile(`summary-\d+`)

// wasServed reports whether summary is one the upstream wrote.
func (u *trapUpstream) wasServed(summary string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	m := summaryTag.FindString(summary)
	return m != "" && u.served[m]
}

// ctxpress killed with SIGKILL while conversations are being compacted
// (precompactions in the background, compactions on the request path):
// restarted on the same db, it opens it, every record decodes to a version
// that was written whole, and the conversations go on. Three kill cycles,
// each killed at one of the points above.
func TestSIGKILLDuringCompactions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the binary")
	}
	up := newTrapUpstream(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "ctxpress.db")
	cfgPath := filepath.Join(dir, "config.yml")
	os.WriteFile(cfgPath, []byte("compaction:\n  threshold_tokens: 4000\n  keep_recent: 4\n"), 0o600)
	bin := ctxpressBinary(t)
	agents := make([]*simAgent, 6)
	for i := range agents {
		agents[i] = newSimAgent(fmt.Sprintf("agent-%d", i))
	}
	for cycle, where := range []string{killInSummary, killAfterSummary, killInChat} {
		cmd, url, logs := startBinary(t, bin, "--config", cfgPath, "--db", dbPath, "--upstream", up.BaseURL())
		go func() {
			for logs.Scan() {
			}
		}()
		start := up.summaries.Load()
		k := &killTrap{where: where, summary: start + 4, reached: make(chan struct{})}
		up.trap.Store(k)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, a := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if a.turn(url) != nil {
						return // the process is gone
					}
				}
			}()
		}
		select {
		case <-k.reached:
		case <-time.After(2 * time.Minute): // a deadlock guard, not a timing bound
			t.Fatalf("cycle %d: never got %s %d; %d summary calls", cycle, where, k.summary-start, up.summaries.Load()-start)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		up.trap.Store(nil)
		close(stop)
		wg.Wait()
		n := checkDB(t, dbPath, up.wasServed)
		t.Logf("cycle %d: killed %s, after %d summary calls; %d records intact", cycle, where, up.summaries.Load()-start, n)
	}

	// Restarted once more, every conversation goes on, with its summary.
	_, url, logs := startBinary(t, bin, "--config", cfgPath, "--db", dbPath, "--upstream", up.BaseURL())
	go func() {
		for logs.Scan() {
		}
	}()
	for _, a := range agents {
		if err := a.turn(url); err != nil {
			t.Fatalf("%s after the restart: %v", a.id, err)
		}
	}
	chats, _ := up.ChatRequests()
	withSummary := 0
	for _, r := range chats[len(chats)-len(agents):] {
		if strings.Contains(string(r.Body), "<conversation_summary>") {
			withSummary++
		}
	}
	if withSummary == 0 {
		t.Fatal("no conversation got its summary after the restarts")
	}
}

// ctxpress SIGKILLed while agents keep it busy loses no turn it answered:
// each turn is journaled before its answer goes out (a held answer before
// it is written, a stream before its last chunk), and the next start
// writes what the writer had not. Three kills land wherever the load is;
// at the end every agent's record counts every turn it was answered, and
// at most one more per kill (a turn journaled whose answer the kill cut).
func TestSIGKILLLosesNoAnsweredTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the binary")
	}
	up := openaitest.New(t)
	dbPath := filepath.Join(t.TempDir(), "ctxpress.db")
	bin := ctxpressBinary(t)
	agents := make([]*simAgent, 8)
	for i := range agents {
		agents[i] = newSimAgent(fmt.Sprintf("kill-%d", i))
	}
	const kills, turnsPerCycle = 3, 160
	start := func() (*exec.Cmd, string) {
		cmd, url, logs := startBinary(t, bin, "--db", dbPath, "--upstream", up.BaseURL())
		go func() {
			for logs.Scan() {
			}
		}()
		return cmd, url
	}
	cmd, url := start()
	for cycle := range kills {
		var answered atomic.Int64
		busy := make(chan struct{}) // closed once the cycle's turns are answered
		var once sync.Once
		var wg sync.WaitGroup
		for _, a := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for a.turn(url) == nil { // until the process is gone
					if answered.Add(1) == turnsPerCycle {
						once.Do(func() { close(busy) })
					}
				}
			}()
		}
		select {
		case <-busy:
		case <-time.After(2 * time.Minute): // a deadlock guard, not a timing bound
			t.Fatalf("cycle %d: only %d turns answered", cycle, answered.Load())
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		wg.Wait()
		cmd, url = start() // writes what the journal holds before it serves
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	st, err := state.OpenBolt(dbPath, state.BoltOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	total := 0
	for _, a := range agents {
		rec, _, err := st.Get(state.NewKey([]byte("Bearer sk-kill"), a.id))
		if err != nil {
			t.Fatal(err)
		}
		if n := int(rec.Requests); n < a.sent || n > a.sent+kills {
			t.Errorf("%s: %d turns answered, %d recorded", a.id, a.sent, rec.Requests)
		}
		total += a.sent
	}
	t.Logf("%d turns answered over %d kills", total, kills)
}
