package proxy

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/state"
)

// bigOutput makes the tool output a's last turn appended a build log
// large enough to be squashed, distinct per turn.
func bigOutput(a *agent) {
	id := "call_" + strconv.Itoa(a.turns)
	a.history[len(a.history)-1] = openai.ToolMessage(fmt.Sprintf("$ make # %d\n", a.turns)+bigLog(), id)
}

// runToCompaction sends a's turns, each adding a large build log, until
// one is compacted, then after more; it returns the number of the
// compacted turn and of the last.
func runToCompaction(t *testing.T, a *agent, after int) (compacted, last int) {
	t.Helper()
	for a.turns < 40 && (compacted == 0 || a.turns < compacted+after) {
		h := a.turn(false)
		bigOutput(a)
		if h.Get(HeaderCompacted) == "true" && compacted == 0 {
			compacted = a.turns
		}
	}
	if compacted == 0 {
		t.Fatal("the conversation was never compacted")
	}
	return compacted, a.turns
}

// The admin API tells what was done to each turn: its edits (a squashed
// build log named by its tool, with its tokens before and after), the
// compaction marked on the turn where it happened, the conversation's
// title and agent; and, for a turn still kept, the request as the client
// sent it beside what was forwarded. The saved tile is in dollars, net
// of the cache and of the summary calls, for a hosted model.
func TestTurnViewAPI(t *testing.T) {
	up := openaitest.New(t)
	cfg := compactionConfig(up.BaseURL())
	cfg.Compaction.Precompact = false
	hosted := false
	cfg.LocalUpstream = &hosted // gpt-4o, priced in dollars
	p, st := startWithStore(t, cfg)
	var stats admin.Stats
	getJSON(t, p.URL+"/ctxpress/stats", &stats) // somebody looks: bodies are kept from now on
	a := newAgent(t, p.BaseURL(), "turn-view")
	compacted, last := runToCompaction(t, a, 2)
	key := state.NewKey([]byte("Bearer sk-agent"), a.convID)
	waitFor(t, func() bool { rec, _, _ := st.Get(key); return rec.Requests == int64(last) }, "the turns recorded")

	var page struct{ Data []admin.ConversationInfo }
	getJSON(t, p.URL+"/ctxpress/conversations", &page)
	if c := page.Data[0]; c.Title != "The test TestParseDate fails on leap years; find and fix the bug in dateparse/parse.go." ||
		c.Agent != "OpenAI/Go" {
		t.Errorf("the conversation is listed as %q by %q: want the user's first ask and the client", c.Title, c.Agent)
	}

	var show struct{ Data []admin.ConversationDetail }
	base := p.URL + "/ctxpress/conversations/turn-view"
	getJSON(t, base+"?namespace="+key.Namespace, &show)
	d := show.Data[0]
	if len(d.Turns) != last {
		t.Fatalf("%d turns listed, want %d", len(d.Turns), last)
	}
	for i, ti := range d.Turns {
		if ti.Number != i+1 {
			t.Fatalf("turn %d numbered %d", i+1, ti.Number)
		}
		if (ti.Compaction != nil) != (ti.Number == compacted) {
			t.Errorf("turn %d: compaction mark %+v; the compaction was at turn %d", ti.Number, ti.Compaction, compacted)
		}
		if want := ti.Number > last-admin.KeptPerConversation; ti.Kept != want {
			t.Errorf("turn %d: kept %v, want %v (the last %d are)", ti.Number, ti.Kept, want, admin.KeptPerConversation)
		}
	}
	mark := d.Turns[compacted-1].Compaction
	if mark.CoveredMessages == 0 || mark.TokensBefore <= mark.TokensAfter || mark.TokensBefore < testTrigger {
		t.Errorf("the compaction mark: %+v", mark)
	}
	squashed := func(es []admin.EditInfo) (admin.EditInfo, bool) {
		for _, e := range es {
			if e.Kind == "squashed" && e.Name == "bash" && e.TokensBefore > e.TokensAfter && e.TokensAfter > 0 {
				return e, true
			}
		}
		return admin.EditInfo{}, false
	}
	if _, ok := squashed(d.Turns[1].Edits); !ok {
		t.Errorf("turn 2 sent turn 1's build log: its edits %+v name no squashed bash output", d.Turns[1].Edits)
	}

	// The last turn, kept: every edit, and both bodies.
	var v admin.TurnView
	getJSON(t, base+"/turns/"+strconv.Itoa(last)+"?namespace="+key.Namespace, &v)
	if v.Object != "conversation.turn" || v.Number != last || !v.Kept || v.Sent == nil || v.Forwarded == nil || v.NotKept != "" {
		t.Fatalf("the last turn's view: %+v", v)
	}
	e, ok := squashed(v.Edits)
	if !ok || v.Edits[0].Kind != "summarised" || v.Edits[0].Count != d.CurrentSummary.CoveredMessages {
		t.Fatalf("the last turn's edits: %+v (covered %d)", v.Edits, d.CurrentSummary.CoveredMessages)
	}
	sentMsg := v.Sent.Messages[e.Index]
	if sentMsg.Edit != "squashed" || sentMsg.Name != "bash" || !strings.Contains(sentMsg.Text, "INFO  compiling module") {
		t.Errorf("the squashed message as sent: %+v", sentMsg)
	}
	if len(v.Sent.Messages) <= len(v.Forwarded.Messages) || v.Sent.Bytes <= v.Forwarded.Bytes || !v.Forwarded.Messages[0].Summary {
		t.Errorf("sent %d messages, %d bytes; forwarded %d messages, %d bytes, summary first: %v",
			len(v.Sent.Messages), v.Sent.Bytes, len(v.Forwarded.Messages), v.Forwarded.Bytes, v.Forwarded.Messages[0].Summary)
	}

	// The first turn, long gone from memory: its record's edits, and why
	// there is no body.
	v = admin.TurnView{}
	getJSON(t, base+"/turns/1?namespace="+key.Namespace, &v)
	if v.Kept || v.Sent != nil || !strings.Contains(v.NotKept, "not kept") || v.Number != 1 {
		t.Errorf("the first turn's view: %+v", v)
	}

	for _, c := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/turns/0", http.StatusBadRequest},
		{http.MethodGet, "/turns/x", http.StatusBadRequest},
		{http.MethodGet, "/turns/" + strconv.Itoa(last+1), http.StatusNotFound},
		{http.MethodGet, "/turns/1/more", http.StatusNotFound},
		{http.MethodPost, "/turns/1", http.StatusMethodNotAllowed},
	} {
		if code, body := adminDo(t, c.method, base+c.path, nil); code != c.status {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, code, body, c.status)
		}
	}
	// The same id under another key: which one must be said.
	other := newAgent(t, p.BaseURL(), "turn-view")
	other.client = openai.NewClient(option.WithBaseURL(p.BaseURL()), option.WithAPIKey("sk-other"), option.WithMaxRetries(0))
	other.turn(false)
	waitFor(t, func() bool { recs, _ := st.List(state.ListOptions{ID: "turn-view"}); return len(recs) == 2 }, "the other namespace's record")
	if code, body := adminDo(t, http.MethodGet, base+"/turns/1", nil); code != http.StatusBadRequest || !strings.Contains(string(body), "namespace") {
		t.Errorf("an id in two namespaces without ?namespace=: %d %s", code, body)
	}

	getJSON(t, p.URL+"/ctxpress/stats", &stats)
	tile := stats.Saved
	if stats.SummaryUsage.Calls == 0 || stats.CostUnit != admin.CostUSD {
		t.Fatalf("stats %+v: no summary call or no dollars; the check proves nothing", stats)
	}
	want := fmt.Sprintf("saved $%.2f (net of cache and %d summary call", stats.MoneySaved, stats.SummaryUsage.Calls)
	if stats.MoneySaved < 1 {
		want = fmt.Sprintf("saved $%.4f (net of cache and %d summary call", stats.MoneySaved, stats.SummaryUsage.Calls)
	}
	if got := tile.Label + " " + tile.Value + " " + tile.Note; !strings.HasPrefix(got, want) {
		t.Errorf("the saved tile says %q, want %q…", got, want)
	}
}
