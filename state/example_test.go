package state_test

import (
	"crypto/sha256"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/state"
)

func Example() {
	dir, err := os.MkdirTemp("", "ctxpress-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := state.OpenBolt(filepath.Join(dir, "ctxpress.db"), state.BoltOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	// One conversation of one API key.
	key := state.NewKey([]byte("Bearer sk-example"), "session-42")
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

	// A turn that compacted the first 10 messages into a summary.
	covered := state.ChainHash(sha256.Sum256([]byte("the first 10 messages")))
	_, err = store.Update(key, func(r *state.Record) error {
		r.Model = "gpt-4o"
		r.PutLine(state.Line{ID: covered, Tip: covered, Messages: 10, UsedAt: now,
			Numbers: history.Numbers{Calibration: history.Calibration{LastInput: 41000, LastEstimate: 40000}}})
		r.PutBranch(state.Branch{Branch: history.Branch{Summary: "## Active Task\nfix the build", Covered: 10, Hash: covered}}, now)
		r.AddSummaryHistory(state.SummaryEntry{At: now, Summary: "## Active Task\nfix the build", CoveredMessages: 10})
		r.AddTurn(state.Turn{At: now, TokensBefore: 90000, TokensAfter: 40000, InputTokens: 41000, Compacted: true})
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}

	// The next request: does a summary apply to its messages?
	rec, ok, err := store.Get(key)
	if err != nil || !ok {
		log.Fatal(ok, err)
	}
	b, ok := rec.MatchBranch(func(n int) (state.ChainHash, bool) {
		return covered, n == 10 // the request's own chain hash of its first n messages
	})
	fmt.Println("summary applies:", ok, "covering", b.Covered, "messages")
	fmt.Println("saved:", rec.TokensSaved, "tokens in", rec.Compactions, "compaction")

	// Another API key sees nothing.
	other := state.NewKey([]byte("Bearer sk-someone-else"), "session-42")
	_, found, _ := store.Get(other)
	fmt.Println("other key finds it:", found)
	// Output:
	// summary applies: true covering 10 messages
	// saved: 50000 tokens in 1 compaction
	// other key finds it: false
}

func ExampleNamespace() {
	fmt.Println(state.Namespace([]byte("Bearer sk-example")))
	fmt.Println(state.Namespace(nil))
	// Output:
	// ac3a082afe3387dc
	// anon
}
