package compaction

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire/chat"
)

// testEngine is an engine compacting over 4,000 tokens into summaries
// written by up, on a bbolt store of the test's.
func testEngine(t *testing.T, up *openaitest.Server) (*Engine, *rewrite.Pipeline, state.Store) {
	t.Helper()
	st, err := state.OpenBolt(filepath.Join(t.TempDir(), "db"), state.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := rewrite.New(rewrite.Config{Format: chat.Format{}, Squash: &squash.Config{}, Dedup: rewrite.DefaultDedupConfig()})
	e := NewEngine(Config{Enabled: true, Trigger: rewrite.TriggerConfig{ThresholdTokens: 4000}},
		Deps{Store: st, Pipeline: p, Events: admin.NewBus(zerolog.Nop(), "", ""), Log: zerolog.Nop(), Routes: map[string]Route{APIChat: {Upstream: up.BaseURL()}}, Clock: time.Now})
	return e, p, st
}

// longChat is a chat request of a debugging session well over 4,000 tokens.
func longChat(t *testing.T) []byte {
	t.Helper()
	msgs := []map[string]string{{"role": "system", "content": "You are a coding agent."},
		{"role": "user", "content": "Fix the leap-year bug in dates.py."}}
	for range 8 {
		msgs = append(msgs, map[string]string{"role": "assistant", "content": "Looking."},
			map[string]string{"role": "user", "content": strings.Repeat("Here is more context about the leap-year bug. ", 60)})
	}
	body, err := json.Marshal(map[string]any{"model": "gpt-4o", "messages": msgs})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// A background compaction that stores its summary between a turn's read of
// the record and the turn taking the line's lock: the turn must use that
// summary, not pay for a second summary of the same messages.
func TestPrecompactionLandingBeforeTheLockCausesNoSecondSummary(t *testing.T) {
	up := openaitest.New(t)
	e, p, st := testEngine(t, up)
	body := longChat(t)
	key := state.NewKey([]byte("Bearer sk-agent"), "stale-record")
	parsed := rewrite.Parse(chat.Format{}, body)
	turnAt := func(rec state.Record) Input {
		res := p.RewriteParsed(parsed, e.Options(rec, state.ChainHash{}))
		chain := res.HistoryChain()
		tip := state.ChainHash(chain[len(chain)-1])
		line := state.LineRef{ID: tip, Tip: tip, Messages: len(chain) - 1, Chain: chain}
		return Input{API: APIChat, Format: chat.Format{}, Key: key, Rec: rec, Line: line, Nums: state.Line{ID: tip},
			Parsed: parsed, Res: res, Trigger: e.Trigger().Trigger(res.Model), Creds: Creds{Authorization: "Bearer sk-agent"}}
	}
	// The turn reads the record: nothing stored yet.
	stale := turnAt(state.Record{Key: key})
	if due, err := e.due(&stale); !due {
		t.Fatalf("the request is not over its trigger (%d tokens): %v", stale.Res.TokensAfter, err)
	}
	// A background compaction of the same line runs and stores its summary.
	bg := stale
	bg.Body = body
	e.Precompact(bg)
	e.Wait()
	if _, summaries := up.ChatRequests(); len(summaries) != 1 {
		t.Fatalf("%d summary calls from the background compaction", len(summaries))
	}
	// Now the turn takes the lock, holding the record it read before.
	res, o := e.MaybeCompact(stale, rewrite.KindAuto)
	if _, summaries := up.ChatRequests(); len(summaries) != 1 {
		t.Fatalf("a second summary call (%d in all) for messages just summarised", len(summaries))
	}
	if res.Applied < 0 || o.Err != nil {
		t.Fatalf("the turn did not use the stored summary (applied %d, err %v)", res.Applied, o.Err)
	}
	if rec, _, _ := st.Get(key); len(rec.Branches) != 1 {
		t.Fatalf("%d branches stored", len(rec.Branches))
	}
}
