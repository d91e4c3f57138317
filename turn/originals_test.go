package turn

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire/chat"
)

// An original the turns keep sending is kept once, then taken as kept,
// and kept again once renewAfter has passed: its file comes back if it
// was removed meanwhile, and its age in the store is renewed.
func TestKeeperKeepsOnceThenRenews(t *testing.T) {
	st := state.NewMemory()
	t.Cleanup(func() { st.Close() })
	files, err := state.OpenOriginalFiles(filepath.Join(t.TempDir(), "originals"), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	k := &Keeper{Store: st, Files: files, Now: func() time.Time { return now },
		Failed: func(err error) { t.Errorf("keeping failed: %v", err) }}
	text := "--- FAIL: TestParseDate (0.00s)\n    parse_test.go:41: got 1900, want leap\n"
	o := rewrite.Original{Original: expand.New(expand.KindSquash, "bash", text), Part: -1}
	parsed := rewrite.Parse(chat.Format{}, []byte(`{"model":"m","messages":[]}`))
	file := filepath.Join(files.Dir, o.Ref+".txt")

	kept := func(ns string) bool {
		t.Helper()
		done := k.keep(ns, parsed, []rewrite.Original{o})
		if done != nil {
			<-done
		}
		return done != nil
	}
	if !kept("ns1") {
		t.Fatal("not kept the first time")
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != text {
		t.Fatalf("file: %v, equal %v", err, string(b) == text)
	}
	if got, ok, _ := st.GetOriginal("ns1", o.Ref); !ok || got.Text != text {
		t.Fatal("not in the store")
	}
	// Another client's conversation with the same output keeps its own.
	if !kept("ns2") {
		t.Fatal("not kept for another namespace")
	}
	if _, ok, _ := st.GetOriginal("ns2", o.Ref); !ok {
		t.Fatal("not in the other namespace's store")
	}
	os.Remove(file)
	now = now.Add(renewAfter - time.Second)
	if kept("ns1") {
		t.Fatal("kept again within renewAfter: a write per turn")
	}
	now = now.Add(2 * time.Second)
	if !kept("ns1") {
		t.Fatal("not kept again after renewAfter")
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != text {
		t.Fatalf("the removed file did not come back: %v", err)
	}
}
