package compaction

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/internal/openaitest"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire/chat"
)

// failingOriginals refuses to keep anything, as a store over its size cap
// or failing would.
type failingOriginals struct{}

func (failingOriginals) PutOriginals(string, []expand.Original) error {
	return errors.New("no room")
}
func (failingOriginals) GetOriginal(string, string) (expand.Original, bool, error) {
	return expand.Original{}, false, nil
}

// A manual compaction keeps the messages it replaces where the engine's
// originals are and says so in the block, in the configured ways' words;
// without originals, or when keeping them fails, the summary is sent all
// the same, without the line.
func TestCompactionKeepsReplacedMessages(t *testing.T) {
	mem := state.NewMemory().(state.Originals)
	for _, c := range []struct {
		name      string
		originals state.Originals
		want      string // in the block; "" for no line
	}{
		{"kept, with the tool as the way back", mem, `original intact: ctxpress_expand {"ref":"`},
		{"no originals", nil, ""},
		{"keeping fails", failingOriginals{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := openaitest.New(t)
			st, err := state.OpenBolt(filepath.Join(t.TempDir(), "db"), state.BoltOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			p := rewrite.New(rewrite.Config{Format: chat.Format{}, Squash: &squash.Config{}})
			e := NewEngine(Config{Enabled: true, Trigger: rewrite.TriggerConfig{ThresholdTokens: 4000}, Ways: expand.Ways{Tool: true}},
				Deps{Store: st, Originals: c.originals, Pipeline: p, Events: admin.NewBus(zerolog.Nop(), "", ""), Log: zerolog.Nop(),
					Routes: map[string]Route{APIChat: {Upstream: up.BaseURL()}}, Clock: time.Now})
			key := state.NewKey([]byte("Bearer sk-agent"), "kept")
			parsed := rewrite.Parse(chat.Format{}, longChat(t))
			res := p.RewriteParsed(parsed, e.Options(state.Record{Key: key}, state.ChainHash{}))
			chain := res.HistoryChain()
			tip := state.ChainHash(chain[len(chain)-1])
			in := Input{API: APIChat, Format: chat.Format{}, Key: key, Rec: state.Record{Key: key},
				Line: state.LineRef{ID: tip, Tip: tip, Messages: len(chain) - 1, Chain: chain}, Nums: state.Line{ID: tip},
				Parsed: parsed, Res: res, Trigger: e.Trigger().Trigger(res.Model), Creds: Creds{Authorization: "Bearer sk-agent"}}
			out, o := e.MaybeCompact(in, rewrite.KindManual)
			if !o.Compacted || o.Err != nil {
				t.Fatalf("not compacted: %v", o.Err)
			}
			rec, _, _ := st.Get(key)
			k := rec.Branches[0].Kept
			block := gjson.GetBytes(out.Body, "messages.0.content").Str
			if c.want == "" {
				if !k.IsZero() || strings.Contains(block, "kept in full") {
					t.Fatalf("a line on kept messages without them kept: %+v", k)
				}
				return
			}
			if !strings.Contains(block, c.want+k.Ref+`","lines":"1-`) || k.First != 1 || k.Last != rec.Branches[0].Covered {
				t.Fatalf("kept %+v; the block does not say so: %.400s", k, block)
			}
			o2, ok, err := mem.GetOriginal(key.Namespace, k.Ref)
			if err != nil || !ok || !strings.HasPrefix(o2.Text, "=== message 1 [USER] ===\nFix the leap-year bug in dates.py.\n") ||
				rec.RecentSummaries[0].Kept != k {
				t.Fatalf("the original under %s: %v %v %.200q; entry %+v", k.Ref, ok, err, o2.Text, rec.RecentSummaries[0].Kept)
			}
		})
	}
}
