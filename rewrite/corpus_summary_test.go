package rewrite

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/internal/chatcheck"
	"github.com/ctxpress/ctxpress/wire"
)

// validTurns returns the turns k (the first k messages of body) that a
// replaying client would send: a prefix that ends after a user message or
// after the last result of a tool call, with a user message in it. (The
// tests run chatcheck.ValidateChat on the ones they use.)
func validTurns(tb testing.TB, body []byte) []int {
	tb.Helper()
	req, _ := parseRequest(body)
	ms := req.messages
	var ks []int
	user := false
	for k := 1; k <= len(ms); k++ {
		last := &ms[k-1]
		user = user || last.role == "user"
		open := last.role == "assistant" && (last.toolCalls.exists() && string(last.raw(last.toolCalls)) != "[]" || last.functionCall.exists())
		if user && !open && (k == len(ms) || !ms[k].isResult()) {
			ks = append(ks, k)
		}
	}
	return ks
}

// firstAtLeast returns the first of ks that is >= k, or 0.
func firstAtLeast(ks []int, k int) int {
	if i, _ := slices.BinarySearch(ks, k); i < len(ks) {
		return ks[i]
	}
	return 0
}

// latestUserRaw returns the bytes of the latest user message of body.
func latestUserRaw(tb testing.TB, body []byte) string {
	req, _ := parseRequest(body)
	for i := len(req.messages) - 1; i >= 0; i-- {
		if req.messages[i].role == "user" {
			return string(req.messages[i].bytes())
		}
	}
	tb.Fatal("no user message")
	return ""
}

// latestUserText returns the content text of the latest user message of
// body.
func latestUserText(body []byte) string {
	req, _ := parseRequest(body)
	for i := len(req.messages) - 1; i >= 0; i-- {
		if m := &req.messages[i]; m.role == "user" {
			return contentText(m.result(m.content))
		}
	}
	return ""
}

// userTextKept reports whether a user message of body ends with text: the
// latest ask with the summary block merged in front of it.
func userTextKept(body []byte, text string) bool {
	req, _ := parseRequest(body)
	for i := range req.messages {
		if m := &req.messages[i]; m.role == "user" && strings.HasSuffix(contentText(m.result(m.content)), text) {
			return true
		}
	}
	return false
}

// Strict-server validity over the corpus: for several cut points the
// pipeline proposes, a fake summary stored as a branch is applied to the
// same turn and to a later one, with both placements; the output is valid,
// has one block, keeps the latest user message verbatim and is counted
// exactly. An edit to a covered message makes the branch miss.
func TestCorpusSummaryApply(t *testing.T) {
	p := sharedCorpusPipeline()
	cases, misses := 0, 0
	for _, tr := range loadTraces(t) {
		turns := validTurns(t, tr.body)
		n := turns[len(turns)-1]
		seen := map[int]bool{}
		for _, f := range []int{3, 5, 8} {
			k := firstAtLeast(turns, (n*f+7)/8)
			if k == 0 || seen[k] {
				continue
			}
			seen[k] = true
			body := prefixBody(t, tr.body, k)
			if err := chatcheck.ValidateChat(body); err != nil {
				t.Fatalf("%s turn %d: the input itself: %v", tr.name, k, err)
			}
			c, ok := p.RewriteWith(body, Options{}).Compaction(6, 2000)
			if !ok {
				continue
			}
			b := history.Branch{Summary: "## Active Task\nfake summary of " + tr.name, Covered: c.Covered, Hash: c.Hash}
			bodies := [][]byte{body}
			if k2 := firstAtLeast(turns, k+1); k2 > 0 && k2 <= k+8 {
				bodies = append(bodies, prefixBody(t, tr.body, k2))
			}
			for _, in := range bodies {
				if err := chatcheck.ValidateChat(in); err != nil {
					t.Fatalf("%s: the input itself: %v", tr.name, err)
				}
				for _, pl := range []string{PlacementSystem, PlacementUser} {
					cases++
					res := p.RewriteWith(in, Options{Branches: []history.Branch{b}, Placement: pl})
					where := tr.name + " turn " + itoa(k) + " (" + itoa(len(rawMessages(t, in))) + " msgs, " + pl + ")"
					checkCorpusApplied(t, p, where, in, res, b)
				}
			}
			// Edit the text of the first covered message with a string
			// content: the client rewrote its history.
			req, _ := parseRequest(body)
			for i := c.From; i < c.Cut; i++ {
				m := &req.messages[i]
				if !m.content.exists() || body[m.content.start] != '"' {
					continue
				}
				edited := wire.Splice(body, []wire.Edit{{Start: m.content.start + 1, End: m.content.start + 1, Repl: []byte("EDITED ")}})
				res := p.RewriteWith(edited, Options{Branches: []history.Branch{b}})
				if res.Applied != -1 || !res.SummaryMiss {
					t.Errorf("%s: edited message %d, branch still applied", tr.name, i)
				} else if plain := p.RewriteWith(edited, Options{}); !bytes.Equal(plain.Body, res.Body) {
					t.Errorf("%s: a miss changes the body", tr.name)
				}
				misses++
				break
			}
		}
	}
	t.Logf("%d applications checked, %d edited histories missed", cases, misses)
	if cases == 0 {
		t.Fatal("no corpus case")
	}
}

func checkCorpusApplied(t *testing.T, p *Pipeline, where string, in []byte, res Result, b history.Branch) {
	t.Helper()
	if res.Applied != 0 || res.Covered != b.Covered || res.SummaryMiss {
		t.Errorf("%s: not applied (Applied %d, Miss %v)", where, res.Applied, res.SummaryMiss)
		return
	}
	if err := chatcheck.ValidateChat(res.Body); err != nil {
		t.Errorf("%s: %v", where, err)
	}
	if got := strings.Count(string(res.Body), "<conversation_summary>"); got != 1 {
		t.Errorf("%s: %d summary blocks", where, got)
	}
	if !bytes.Contains(res.Body, []byte(latestUserRaw(t, in))) && !userTextKept(res.Body, latestUserText(in)) {
		t.Errorf("%s: the latest user message is not in the output verbatim", where)
	}
	if chatcheck.ValidateAlternation(in) == nil {
		if err := chatcheck.ValidateAlternation(res.Body); err != nil {
			t.Errorf("%s: the client's roles alternate, the output's do not: %v", where, err)
		}
	}
	if n, err := p.Counter().CountRequest(chatFormat, res.Body); err != nil || n != res.TokensAfter {
		t.Errorf("%s: TokensAfter %d, counting the output gives %d (%v)", where, res.TokensAfter, n, err)
	}
}

// MaxHistoryMessages over the corpus: the leading system messages and a
// tail of at most N messages (about N/2 right after a trim, at least one),
// cut on a turn boundary, valid for a strict server, counted exactly.
func TestCorpusMaxHistory(t *testing.T) {
	p := sharedCorpusPipeline()
	for _, tr := range loadTraces(t) {
		plain := p.Rewrite(tr.body)
		for _, n := range []int{1, 6, 20} {
			res := p.RewriteWith(tr.body, Options{MaxHistoryMessages: n})
			if err := chatcheck.ValidateChat(res.Body); err != nil {
				t.Errorf("%s N=%d: %v", tr.name, n, err)
			}
			if c, err := p.Counter().CountRequest(chatFormat, res.Body); err != nil || c != res.TokensAfter {
				t.Errorf("%s N=%d: TokensAfter %d, counted %d", tr.name, n, res.TokensAfter, c)
			}
			out, all := rawMessages(t, res.Body), rawMessages(t, plain.Body)
			if len(out) != res.Messages-res.Trimmed {
				t.Errorf("%s N=%d: %d messages out of %d, Trimmed %d", tr.name, n, len(out), res.Messages, res.Trimmed)
			}
			if res.Trimmed == 0 {
				continue
			}
			if !slices.Equal(out[:res.Lead], all[:res.Lead]) {
				t.Errorf("%s N=%d: leading system messages changed", tr.name, n)
			}
			// The tail is the plain rewrite's tail (a dedup could differ
			// over fewer messages; the corpus has none there).
			tail := 0
			for tail < len(out)-res.Lead && out[len(out)-1-tail] == all[len(all)-1-tail] {
				tail++
			}
			if tail < 1 || tail > max(n, 2) || tail+res.Lead+1 < len(out) {
				t.Errorf("%s N=%d: kept a tail of %d; %d out", tr.name, n, tail, len(out))
			}
			if !bytes.Contains(res.Body, []byte(latestUserRaw(t, tr.body))) {
				t.Errorf("%s N=%d: latest user message dropped", tr.name, n)
			}
		}
	}
}

// checkSummaryPrefixStability replays each trace from a turn a third of
// the way in (every turn for the traces in every, a sample for the
// others), with the branch proposed there applied to every later turn:
// each output's messages are a byte-identical prefix of the next turn's,
// except tool results a dedup replaced, and the re-sent latest user message
// when a new user message retires it.
func checkSummaryPrefixStability(t *testing.T, traces []trace, p *Pipeline, every map[string]bool) {
	turnsChecked, retired := 0, 0
	for i, tr := range traces {
		turns := validTurns(t, tr.body)
		k0 := firstAtLeast(turns, turns[len(turns)-1]/3)
		c, ok := p.RewriteWith(prefixBody(t, tr.body, k0), Options{}).Compaction(6, 0)
		if !ok {
			continue
		}
		opts := Options{Branches: []history.Branch{{Summary: "fake summary", Covered: c.Covered, Hash: c.Hash}}, ConciseOutput: i%2 == 0}
		if i%3 == 0 {
			opts.Placement = PlacementUser
		}
		n := len(rawMessages(t, tr.body))
		var prev []string
		prevResent := ""
		sample := map[int]bool{k0 + 1: true, k0 + 2: true}
		for f := 3; f <= 8; f++ {
			sample[(n*f+7)/8], sample[(n*f+7)/8+1] = true, true
		}
		for k := k0; k <= n; k++ {
			if k > k0 && !every[tr.name] && !sample[k] {
				continue
			}
			res := p.RewriteWith(prefixBody(t, tr.body, k), opts)
			if res.Applied != 0 {
				t.Fatalf("%s turn %d: branch not applied", tr.name, k)
			}
			turnsChecked++
			cur := rawMessages(t, res.Body)
			resent := ""
			if res.view.resend >= 0 {
				resent = string(res.view.req.Bytes(res.view.resend))
			}
			if prevResent != "" && resent == "" {
				r := slices.Index(prev[res.Lead:], prevResent)
				if r < 0 {
					t.Fatalf("%s turn %d: the re-sent message is not in the previous turn", tr.name, k)
				}
				prev = slices.Delete(prev, res.Lead+r, res.Lead+r+1)
				retired++
			}
			if len(prev) > len(cur) {
				t.Fatalf("%s turn %d: fewer messages than turn %d", tr.name, k, k-1)
			}
			for j := range prev {
				if prev[j] != cur[j] && (contentOf(res.Body, j) != DedupPlaceholder || res.Deduped == 0) {
					t.Fatalf("%s: message %d changed from turn %d to %d:\nwas %.200s\nnow %.200s", tr.name, j, k-1, k, prev[j], cur[j])
				}
			}
			prev, prevResent = cur, resent
		}
	}
	t.Logf("%d turns with a summary checked; %d where a new user message retired the re-sent one", turnsChecked, retired)
}
