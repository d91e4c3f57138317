package rewrite

import (
	"testing"

	"github.com/ctxpress/ctxpress/history"
)

func TestPricesFor(t *testing.T) {
	cfg := CostConfig{Models: map[string]Prices{"my-azure-gpt": {Input: 3, CachedInput: 0.3, Output: 12}}}
	for _, tc := range []struct {
		model string
		want  Prices
	}{
		{"gpt-5", Prices{1.25, 0.125, 1.25, 10}},
		{"gpt-5-mini-2025-08-07", Prices{0.25, 0.025, 0.25, 2}},
		{"openai/gpt-4o", Prices{2.50, 1.25, 2.50, 10}},
		{"claude-sonnet-4-5-20250929", Prices{3, 0.30, 3.75, 15}},
		{"claude-opus-5-5", Prices{4, 0.20, 5, 20}},               // Claude Code 2.1.332's default
		{"claude-opus-5-5[1m]", Prices{4, 0.20, 5, 20}},           // as Claude Code names the 1M-window choice
		{"claude-opus-4-6", Prices{5, 0.50, 6.25, 25}},            // not Opus 4.1's $15
		{"claude-opus-4-1-20250805", Prices{15, 1.50, 18.75, 75}}, // and Opus 4.1 still is
		{"claude-sonnet-5-5", Prices{2, 0.10, 2.50, 10}},
		{"gpt-5.5", Prices{5, 0.50, 5, 30}},
		{"gpt-5.1-codex-mini", Prices{0.25, 0.025, 0.25, 2}}, // not gpt-5's
		{"gpt-5.1-codex", Prices{1.25, 0.125, 1.25, 10}},
		{"gpt-5.3-codex", Prices{1.75, 0.175, 1.75, 14}},
		{"my-azure-gpt", Prices{3, 0.3, 3, 12}}, // an override's cache write defaults to its input price
		{"some-local-gguf", DefaultPrices},
	} {
		if got := cfg.PricesFor(tc.model); got != tc.want {
			t.Errorf("PricesFor(%q) = %+v, want %+v", tc.model, got, tc.want)
		}
	}
	local := CostConfig{Local: true, Models: cfg.Models}
	if got := local.PricesFor("gpt-5"); got != LocalPrices {
		t.Errorf("a local upstream prices by prefill: got %+v", got)
	}
	if got := local.PricesFor("my-azure-gpt"); got.Input != 3 {
		t.Errorf("a models: entry wins over the local pricing: got %+v", got)
	}
	// The table, and only it, says which models it knows: gpt-5's list
	// prices happen to equal DefaultPrices, and it is still known.
	for model, known := range map[string]bool{"gpt-5": true, "anthropic/claude-sonnet-4-5": true, "some-local-gguf": false, "my-azure-gpt": false} {
		if p, ok := ListPrices(model); ok != known || ok && p != cfg.PricesFor(model) {
			t.Errorf("ListPrices(%q) = %+v, %v; want known %v", model, p, ok, known)
		}
	}
}

func TestCostOfUsage(t *testing.T) {
	p := Prices{Input: 3, CachedInput: 0.3, CacheWrite: 3.75, Output: 15}
	// 1M prompt tokens of which 600k read from the cache and 100k written:
	// 300k fresh at 3, 600k at 0.3, 100k at 3.75, and 10k out at 15.
	got := p.Cost(Usage{Input: 1_000_000, Cached: 600_000, CacheWrite: 100_000, Output: 10_000})
	if want := 0.9 + 0.18 + 0.375 + 0.15; got < want-1e-9 || got > want+1e-9 {
		t.Fatalf("Cost = %v, want %v", got, want)
	}
}

// The rule every prefix-changing step asks: a removal pays when the cached
// reads it saves over the turns ahead outweigh the cache it rebuilds.
func TestPrefixChangePays(t *testing.T) {
	gpt5 := Prices{1.25, 0.125, 1.25, 10}
	for _, tc := range []struct {
		name   string
		e      Economics
		change PrefixChange
		pays   bool
	}{
		{"removing 2k near the end pays at once", Economics{Prices: gpt5, TurnsAhead: 1}, PrefixChange{Removed: 2000, Rebuilt: 200}, true},
		{"removing 1k at the start of a 60k history does not pay in 10 turns", Economics{Prices: gpt5, TurnsAhead: 10}, PrefixChange{Removed: 1000, Rebuilt: 60000}, false},
		{"it pays over 60 turns", Economics{Prices: gpt5, TurnsAhead: 60}, PrefixChange{Removed: 1000, Rebuilt: 6000}, true},
		{"an upstream that does not cache rebuilds nothing", Economics{Prices: gpt5, Uncached: true, TurnsAhead: 1}, PrefixChange{Removed: 10, Rebuilt: 60000}, true},
		{"a local server prefills a cached prefix for free: removing from it saves little", Economics{Prices: LocalPrices, TurnsAhead: 10}, PrefixChange{Removed: 5000, Rebuilt: 5000}, false},
		{"a summary call's cost counts", Economics{Prices: gpt5, TurnsAhead: 4}, PrefixChange{Removed: 20000, Rebuilt: 0, Extra: 0.02}, false},
		{"and is paid back by enough turns", Economics{Prices: gpt5, TurnsAhead: 10}, PrefixChange{Removed: 20000, Rebuilt: 0, Extra: 0.02}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.e.Pays(tc.change); got != tc.pays {
				t.Errorf("Pays = %v (saving %.6f $), want %v", got, tc.e.Saving(tc.change), tc.pays)
			}
		})
	}
}

func TestExpectedTurnsAhead(t *testing.T) {
	for _, tc := range []struct{ so, want int }{{0, 2}, {1, 2}, {4, 2}, {10, 5}, {101, 50}} {
		if got := ExpectedTurnsAhead(tc.so); got != tc.want {
			t.Errorf("ExpectedTurnsAhead(%d) = %d, want %d", tc.so, got, tc.want)
		}
	}
}

func TestCacheEvidence(t *testing.T) {
	big, small := Usage{Input: 30000}, Usage{Input: 900}
	cached := Usage{Input: 30000, Cached: 28000}
	for _, tc := range []struct {
		name       string
		usages     []Usage
		notCaching bool
	}{
		{"nothing reported yet: assumed cached", nil, false},
		{"three large prompts with nothing cached: not caching", []Usage{big, big, big}, true},
		{"two are not evidence enough", []Usage{big, big}, false},
		{"small prompts are never cached anywhere: no evidence", []Usage{small, small, small, small}, false},
		{"one cached read before: caching, whatever follows", []Usage{cached, big, big, big}, false},
		{"a cache write counts as caching (Anthropic's first turn)", []Usage{{Input: 30000, CacheWrite: 30000}, big, big, big}, false},
		{"a cached read after the evidence: caching after all", []Usage{big, big, big, cached}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev history.CacheEvidence
			for _, u := range tc.usages {
				ev = nextCacheEvidence(ev, u)
			}
			if notCaching(ev) != tc.notCaching {
				t.Errorf("evidence %+v: notCaching = %v, want %v", ev, notCaching(ev), tc.notCaching)
			}
			if e := EconomicsFor(DefaultPrices, 10, ev); e.Uncached != tc.notCaching || e.TurnsAhead != 5 {
				t.Errorf("EconomicsFor = %+v", e)
			}
		})
	}
}
