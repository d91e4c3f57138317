package rewrite

import (
	"strings"
	"testing"
)

// A dedup rewrites an earlier, cached result: with the cost model it is
// taken only when the cached reads it saves over the turns expected pay
// for the history after it that the provider must read fresh again.
func TestDedupOfEarlierResultAsksTheCostModel(t *testing.T) {
	src := goSource(t)
	readArgs := jsonString(`{"path":"proxy.go"}`)
	user := `{"role":"user","content":"look at proxy.go"}`
	// Work between the two reads: a long history the provider has cached.
	var between []string
	for i := 0; i < 40; i++ {
		id := "w" + itoa(i)
		between = append(between, callMsg(id, "bash", jsonString(`{"command":"make step`+itoa(i)+`"}`)),
			resultMsg(id, strings.Repeat("building step "+itoa(i)+" of the project, all fine\n", 60)))
	}
	msgs := append([]string{user, callMsg("c1", "read_file", readArgs), resultMsg("c1", src)}, between...)
	msgs = append(msgs, callMsg("c2", "read_file", readArgs), resultMsg("c2", src))
	short := []string{user, callMsg("c1", "read_file", readArgs), resultMsg("c1", src), callMsg("c2", "read_file", readArgs), resultMsg("c2", src)}
	p := New(Config{Format: chatFormat, Dedup: DefaultDedupConfig()})
	for _, tc := range []struct {
		name    string
		msgs    []string
		econ    *Economics
		deduped int
	}{
		{"no cost model: the minimum alone decides", msgs, nil, 1},
		{"a read repeated right after the first: pays on this turn", short, &Economics{Prices: DefaultPrices, TurnsAhead: 1}, 1},
		{"a read 80 messages back, few turns expected: the rebuilt history costs more", msgs, &Economics{Prices: DefaultPrices, TurnsAhead: 2}, 0},
		{"the same with many turns ahead: pays", msgs, &Economics{Prices: DefaultPrices, TurnsAhead: 200}, 1},
		{"an upstream that does not cache: always pays", msgs, &Economics{Prices: DefaultPrices, Uncached: true, TurnsAhead: 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := p.RewriteWith(chat("gpt-4o", tc.msgs...), Options{Economics: tc.econ})
			if res.Deduped != tc.deduped {
				t.Errorf("Deduped = %d, want %d (saved %d tokens)", res.Deduped, tc.deduped, res.DedupSavedTokens)
			}
		})
	}
}
