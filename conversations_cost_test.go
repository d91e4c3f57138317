package main

import (
	"encoding/json"
	"github.com/ctxpress/ctxpress/admin"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/state"
)

// On the db file, the CLI prices a conversation as the server would: at
// the config's models: prices, not only the built-in table.
func TestConversationsCLIPricesAtTheConfigsPrices(t *testing.T) {
	dir := t.TempDir()
	db, cfg := filepath.Join(dir, "ctxpress.db"), filepath.Join(dir, "ctxpress.yml")
	st, err := state.OpenBolt(db, state.BoltOptions{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	st.Update(state.NewKey([]byte("Bearer a"), "priced"), func(r *state.Record) error {
		r.Model = "my-model"
		r.Usage = state.Usage{Calls: 2, Input: 1_000_000, Cached: 500_000, Output: 10_000}
		r.Direct = state.Usage{Input: 2_000_000, Cached: 1_000_000, Output: 10_000}
		return nil
	})
	st.Close()
	yml := "upstream: https://api.example.com/v1\nmodels: {my-model: {prices: {input: 10, cached_input: 1, output: 100}}}\n"
	if err := os.WriteFile(cfg, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "show", "priced", "--db", db, "--config", cfg, "--json")
	var shown struct{ Data []admin.ConversationDetail }
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || len(shown.Data) != 1 {
		t.Fatalf("show --json: %d %s %s", code, out, errs)
	}
	// 500k fresh at 10, 500k cached at 1, 10k out at 100; direct: 1M at 10, 1M at 1, the same output.
	if d := shown.Data[0]; d.Cost != 6.5 || d.CostDirectEstimate != 12 || d.MoneySaved != 5.5 || d.CostUnit != admin.CostUSD {
		t.Fatalf("cost %v, direct %v, saved %v %s", d.Cost, d.CostDirectEstimate, d.MoneySaved, d.CostUnit)
	}
	if _, out, _ := runCLI(t, "show", "priced", "--db", db, "--config", cfg); !strings.Contains(out, "$6.5000") || !strings.Contains(out, "50.0% cached") {
		t.Fatalf("show:\n%s", out)
	}
}
