package admin

import (
	"math"
	"strconv"
	"strings"
)

// Tile is a dashboard tile's text, made here so the page shows what the
// API says and a test can hold the rule: Label, Value and Note read as
// one sentence ("saved $1.20 (net of cache and 3 summary calls)"), Detail
// is the line under it.
type Tile struct {
	Label  string `json:"label"`
	Value  string `json:"value"`
	Note   string `json:"note"`
	Detail string `json:"detail,omitempty"`
	// Negative: ctxpress cost more than it saved.
	Negative bool `json:"negative,omitempty"`
}

// savedFacts are what the saved tile is made of: the bills summed by
// unit (nil: no conversation in it), how many summary calls they are net
// of, the models priced at assumed prices, the currency symbol.
type savedFacts struct {
	Money, Prefill *Costs
	SummaryCalls   int64
	AssumedModels  []string
	Currency       string
}

// savedTile says what ctxpress saved, net of the cache and of its summary
// calls: in money when any conversation is priced in money (a hosted
// model, or one with a models: price), its prefill tokens only for a local
// server, and labelled so; a guess at assumed prices says it is one.
func savedTile(f savedFacts) Tile {
	net := "(net of cache and " + plural(f.SummaryCalls, "summary call") + ")"
	switch {
	case f.Money != nil:
		c := f.Money
		t := Tile{Label: "saved", Value: moneyText(c.MoneySaved, f.Currency), Note: net, Negative: c.MoneySaved < 0,
			Detail: "vs. " + moneyText(c.CostDirectEstimate, f.Currency) + " sent as is (estimate)"}
		if len(f.AssumedModels) > 0 {
			t.Value = "≈" + t.Value
			t.Detail += "; at assumed prices for " + listOf(f.AssumedModels) + ": set models: prices"
		}
		if f.Prefill != nil {
			t.Detail += "; and " + prefillText(f.Prefill.MoneySaved) + " prefill tokens on a local server"
		}
		return t
	case f.Prefill != nil:
		c := f.Prefill
		return Tile{Label: "prefill tokens saved (local server)", Value: prefillText(c.MoneySaved), Note: net, Negative: c.MoneySaved < 0,
			Detail: "vs. " + prefillText(c.CostDirectEstimate) + " sent as is (estimate); a cached token counts 0.03, an output token 10"}
	}
	return Tile{Label: "saved", Value: "–", Note: "(no conversation yet)"}
}

// moneyText is v in currency cur, as the dashboard writes money: cents,
// or four decimals under one.
func moneyText(v float64, cur string) string {
	a := math.Abs(v)
	digits := 4
	if a >= 1 || a == 0 {
		digits = 2
	}
	sign := ""
	if v < 0 && strconv.FormatFloat(a, 'f', digits, 64) != strconv.FormatFloat(0, 'f', digits, 64) {
		sign = "−"
	}
	return sign + cur + strconv.FormatFloat(a, 'f', digits, 64)
}

// prefillText is an amount in millions of prefill tokens as a whole count
// of them, with thousands separated.
func prefillText(v float64) string {
	n := int64(math.Round(v * 1e6))
	sign := ""
	if n < 0 {
		sign, n = "−", -n
	}
	return sign + thousands(n)
}

// thousands writes n ≥ 0 with commas between its thousands.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// plural is n and noun, with an s unless n is one.
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return thousands(n) + " " + noun + "s"
}

// listOf names up to three items, then how many more.
func listOf(items []string) string {
	if len(items) <= 3 {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:3], ", ") + " and " + strconv.Itoa(len(items)-3) + " more"
}
