package admin

import "testing"

// The saved tile's rule, row by row: what a user reads on the dashboard.
func TestSavedTile(t *testing.T) {
	hosted := &Costs{Cost: 8.85, SummaryCost: 0.4, CostDirectEstimate: 11.05, MoneySaved: 2.2, CostUnit: CostUSD, PriceBasis: BasisList}
	local := &Costs{Cost: 0.9, CostDirectEstimate: 0.925934, MoneySaved: 0.025934, CostUnit: CostPrefill, PriceBasis: BasisLocal}
	for _, tc := range []struct {
		name string
		in   savedFacts
		want Tile
	}{
		{"a hosted model at known prices: dollars, net of the cache and the summary calls",
			savedFacts{Money: hosted, SummaryCalls: 3, Currency: "$"},
			Tile{Label: "saved", Value: "$2.20", Note: "(net of cache and 3 summary calls)", Detail: "vs. $11.05 sent as is (estimate)"}},
		{"one summary call is one",
			savedFacts{Money: hosted, SummaryCalls: 1, Currency: "$"},
			Tile{Label: "saved", Value: "$2.20", Note: "(net of cache and 1 summary call)", Detail: "vs. $11.05 sent as is (estimate)"}},
		{"cost more than it saved: negative, and said so",
			savedFacts{Money: &Costs{CostDirectEstimate: 0.5, MoneySaved: -0.0123, PriceBasis: BasisConfigured}, Currency: "€"},
			Tile{Label: "saved", Value: "−€0.0123", Note: "(net of cache and 0 summary calls)", Detail: "vs. €0.5000 sent as is (estimate)", Negative: true}},
		{"a real local server: prefill tokens, labelled as such, never dollars",
			savedFacts{Prefill: local, SummaryCalls: 2, Currency: "$"},
			Tile{Label: "prefill tokens saved (local server)", Value: "25,934", Note: "(net of cache and 2 summary calls)",
				Detail: "vs. 925,934 sent as is (estimate); a cached token counts 0.03, an output token 10"}},
		{"a model no table knows: a guess at assumed prices, and how to give the price",
			savedFacts{Money: &Costs{CostDirectEstimate: 3, MoneySaved: 1.5, PriceBasis: BasisAssumed}, SummaryCalls: 2,
				AssumedModels: []string{"acme-coder"}, Currency: "$"},
			Tile{Label: "saved", Value: "≈$1.50", Note: "(net of cache and 2 summary calls)",
				Detail: "vs. $3.00 sent as is (estimate); at assumed prices for acme-coder: set models: prices"}},
		{"hosted and local conversations: dollars, the local server's prefill beside",
			savedFacts{Money: hosted, Prefill: local, SummaryCalls: 12, Currency: "$"},
			Tile{Label: "saved", Value: "$2.20", Note: "(net of cache and 12 summary calls)",
				Detail: "vs. $11.05 sent as is (estimate); and 25,934 prefill tokens on a local server"}},
		{"many models at assumed prices are named three at most",
			savedFacts{Money: &Costs{}, AssumedModels: []string{"a", "b", "c", "d", "e"}, Currency: "$"},
			Tile{Label: "saved", Value: "≈$0.00", Note: "(net of cache and 0 summary calls)",
				Detail: "vs. $0.00 sent as is (estimate); at assumed prices for a, b, c and 2 more: set models: prices"}},
		{"no conversation yet", savedFacts{Currency: "$"}, Tile{Label: "saved", Value: "–", Note: "(no conversation yet)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := savedTile(tc.in); got != tc.want {
				t.Fatalf("\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestMoneyAndCountText(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{moneyText(0, "$"), "$0.00"},
		{moneyText(-0.00001, "$"), "$0.0000"}, // rounds to nothing: no minus sign
		{moneyText(1234.5, "$"), "$1234.50"},
		{prefillText(1.2345678), "1,234,568"},
		{prefillText(-0.001), "−1,000"},
		{plural(0, "conversation"), "0 conversations"},
		{plural(1, "conversation"), "1 conversation"},
		{plural(1500, "call"), "1,500 calls"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
