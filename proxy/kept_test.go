package proxy

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/state"
)

// keptStore is a store that keeps originals: st's own when it keeps them,
// else a memory store's beside it, so the tests run on bbolt before and
// after it keeps them itself.
type keptStore struct {
	state.Store
	o state.Originals
}

func (k keptStore) PutOriginals(ns string, os []expand.Original) error {
	return k.o.PutOriginals(ns, os)
}
func (k keptStore) GetOriginal(ns, ref string) (expand.Original, bool, error) {
	return k.o.GetOriginal(ns, ref)
}

func withOriginals(st state.Store) state.Store {
	if _, ok := st.(state.Originals); ok {
		return st
	}
	return keptStore{Store: st, o: state.NewMemory().(state.Originals)}
}

// serverLog is a long log whose lines differ, with one error among them:
// squash shortens it when forwarded, and the transcript keeps it whole.
func serverLog() string {
	var b strings.Builder
	for i := range 1500 {
		fmt.Fprintf(&b, "2026-01-02T03:%02d:%02dZ INFO GET /api/items/%d 200 in %dms\n", i/60%60, i%60, i, 3+i%7)
	}
	b.WriteString("2026-01-02T04:00:00Z ERROR panic: assignment to entry in nil map (items.go:88)\n")
	return b.String()
}

// keptRef finds a block's line on kept messages; its last group is the
// reference, at the end of the line.
var keptRef = regexp.MustCompile(`The (\d+) earlier messages this summary replaces are kept in full, one header line per message; [^\n]*?\b([0-9a-f]{12})(?:\.txt)?\n`)

// A compaction through the proxy keeps the messages it replaces, tool
// outputs as the client sent them; the summary block names them in one
// line, with the way back configured (a file here), and sends that line
// the same on every later turn, after a restart with another
// configuration too; the admin API lists the compaction with its range.
func TestCompactionKeepsWhatItReplaced(t *testing.T) {
	up := openaitest.New(t)
	dbPath := filepath.Join(t.TempDir(), "ctxpress.db")
	st := withOriginals(openStoreAt(t, dbPath))
	cfg := compactionConfig(up.BaseURL())
	dir := t.TempDir()
	cfg.Compaction.Ways = expand.Ways{Dir: dir}
	p := startProxyWith(t, cfg, Deps{Pipeline: pipelineForTest(), Store: st})
	a := newAgent(t, p.BaseURL(), "kept")
	log := serverLog()
	a.history = append(a.history,
		openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
			ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: "call_log", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "bash", Arguments: `{"command":"./run-server.sh --once"}`}}}}}},
		openai.ToolMessage(log, "call_log"))

	var block string
	for i := 0; block == ""; i++ {
		if i == 40 {
			t.Fatal("no compaction in 40 turns")
		}
		if h := a.turn(false); h.Get(HeaderCompacted) == "true" {
			chats, _ := up.ChatRequests()
			block = summaryBlock(t, chats[len(chats)-1].Body)
		}
	}
	if first := up.Requests()[0]; strings.Contains(string(first.Body), "items/700 200") {
		t.Fatal("the log was forwarded whole: nothing squashed, nothing to test")
	}
	m := keptRef.FindStringSubmatch(block)
	if m == nil {
		t.Fatalf("the block does not say the messages are kept:\n%s", block)
	}
	ref := m[2]
	ns := state.NewKey([]byte("Bearer sk-agent"), "kept").Namespace
	o, ok, err := st.(state.Originals).GetOriginal(ns, ref)
	if err != nil || !ok {
		t.Fatalf("the block's ref %s is not kept: %v", ref, err)
	}
	if o.Kind != expand.KindCompaction || o.Ref != ref || !strings.Contains(o.Text, log) ||
		!strings.HasPrefix(o.Text, "=== message 1 [USER] ===\nThe test TestParseDate fails") ||
		!strings.Contains(o.Text, "=== message 3 [TOOL RESULT call_log bash] ===\n") {
		t.Fatalf("the original kept (kind %q) is not the transcript of the messages as sent:\n%.600s", o.Kind, o.Text)
	}
	if n := strings.Count(o.Text, "\n=== message ") + 1; m[1] != fmt.Sprint(n) {
		t.Errorf("the block says %s messages are kept, the transcript holds %d", m[1], n)
	}
	if want := "original intact: " + expand.SedCommand(filepath.Join(dir, ref+".txt"), expand.AllLines(o.Text)); !strings.Contains(block, want) {
		t.Errorf("the block does not give the way back %q:\n%s", want, block)
	}
	if other, ok, _ := st.(state.Originals).GetOriginal(state.NewKey([]byte("Bearer sk-other"), "kept").Namespace, ref); ok {
		t.Errorf("another namespace finds the original: %+v", other.Ref)
	}

	var show struct {
		Data []admin.ConversationDetail `json:"data"`
	}
	waitFor(t, p.recorderDrained, "the turns recorded")
	getJSON(t, p.URL+"/ctxpress/conversations/kept", &show)
	if len(show.Data) != 1 || show.Data[0].CurrentSummary == nil || show.Data[0].CurrentSummary.Kept == nil {
		t.Fatalf("the admin API does not list what the compaction kept: %+v", show.Data)
	}
	k := show.Data[0].CurrentSummary.Kept
	if k.Ref != ref || k.First != 1 || k.Last < 3 || !strings.Contains(o.Text, fmt.Sprintf("=== message %d ", k.Last)) {
		t.Errorf("kept = %+v, want ref %s from message 1", k, ref)
	}
	if s := show.Data[0].RecentSummaries; len(s) == 0 || s[len(s)-1].Kept == nil || s[len(s)-1].Kept.Ref != ref {
		t.Errorf("the compaction's entry does not name its ref: %+v", s)
	}

	// The block is sticky: the next turn sends it as it was, and so does a
	// restarted ctxpress configured with no way back of the agent's own.
	a.turn(false)
	chats, _ := up.ChatRequests()
	if got := summaryBlock(t, chats[len(chats)-1].Body); got != block {
		t.Fatalf("the next turn's block differs:\n%s\nwas\n%s", got, block)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st2 := withOriginals(openStoreAt(t, dbPath))
	t.Cleanup(func() { st2.Close() })
	p2 := startProxyWith(t, compactionConfig(up.BaseURL()), Deps{Pipeline: pipelineForTest(), Store: st2})
	a.client = openai.NewClient(option.WithBaseURL(p2.BaseURL()), option.WithAPIKey("sk-agent"), option.WithMaxRetries(0))
	if h := a.turn(false); h.Get(HeaderCompacted) == "true" {
		t.Fatal("compacted again two turns after a compaction")
	}
	chats, _ = up.ChatRequests()
	if got := summaryBlock(t, chats[len(chats)-1].Body); got != block {
		t.Fatalf("after a restart the block differs:\n%s\nwas\n%s", got, block)
	}
}

// summaryBlock is the summary block of a forwarded chat body's system
// message.
func summaryBlock(t *testing.T, body []byte) string {
	t.Helper()
	sys := gjson.GetBytes(body, "messages.0.content").String()
	i, j := strings.Index(sys, "<conversation_summary>"), strings.Index(sys, "</conversation_summary>")
	if i < 0 || j < i {
		t.Fatalf("no summary block in the system message: %.300s", sys)
	}
	return sys[i:j]
}

// checkKept fails unless text, a forwarded summary block, says in one line
// that the messages it replaces are kept under a reference that returns
// (in the conversation's namespace, from st) a transcript of them from
// message first, with as many messages as the line says.
func checkKept(t *testing.T, st state.Store, id, text string, first int) {
	t.Helper()
	m := keptRef.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("the summary block does not say the messages are kept:\n%.600s", text)
	}
	recs, err := st.List(state.ListOptions{ID: id})
	if err != nil || len(recs) != 1 {
		t.Fatalf("conversation %s: %d records, %v", id, len(recs), err)
	}
	o, ok, err := st.(state.Originals).GetOriginal(recs[0].Key.Namespace, m[2])
	if err != nil || !ok || o.Kind != expand.KindCompaction {
		t.Fatalf("the block's ref %s is not kept (%v, kind %q)", m[2], err, o.Kind)
	}
	if !strings.HasPrefix(o.Text, fmt.Sprintf("=== message %d [USER] ===\n", first)) || fmt.Sprint(strings.Count(o.Text, "\n=== message ")+1) != m[1] {
		t.Fatalf("the original is not the %s messages from message %d:\n%.300s", m[1], first, o.Text)
	}
}
