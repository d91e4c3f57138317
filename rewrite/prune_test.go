package rewrite

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/tidwall/gjson"
)

// pruneConfig is a chat pipeline with squash and dedup at their defaults
// and pruning on above min tokens.
func pruneConfig(min int) Config {
	return Config{Format: chatFormat, Squash: &squash.Config{}, Dedup: DefaultDedupConfig(), Prune: PruneConfig{Enabled: true, MinTokens: min}}
}

// miniRun is a test run as mini-swe-agent frames it: its return code,
// then the output.
func miniRun(code int, out string) string {
	return "<returncode>" + itoa(code) + "</returncode>\n<output>\n" + out + "</output>"
}

// bashCall calls bash with command cmd.
func bashCall(id, cmd string) string {
	return callMsg(id, "bash", jsonString(`{"command":`+jsonString(cmd)+`}`))
}

// prunedIDs returns the call ids whose results body's marks name, in
// body order.
func prunedIDs(body []byte, marks []history.PruneMark) []string {
	var out []string
	for _, m := range marks {
		out = append(out, gjson.GetBytes(body, "messages."+itoa(m.Index)+".tool_call_id").Str)
	}
	return out
}

// forwardedContent returns the content text of the tool message answering
// call id in body.
func forwardedContent(body []byte, id string) string {
	for _, m := range gjson.GetBytes(body, "messages").Array() {
		if m.Get("tool_call_id").Str == id {
			return contentText(m.Get("content"))
		}
	}
	return ""
}

// isPrunedLine reports whether s is a pruned line.
func isPrunedLine(s string) bool {
	return strings.HasPrefix(s, "[") && strings.HasSuffix(s, " to see it]") && !strings.Contains(s, "\n")
}

// Which tool results become their line: only those from before the
// current user ask, on the request that opens that turn, of a call known,
// over the minimum, that squash does not keep whole and dedup did not
// replace, outside a summary's coverage; and only when the cost model
// says the rewrite pays.
func TestPruneDecidesWhichResultsBecomeALine(t *testing.T) {
	sys := `{"role":"system","content":"You are a coding agent."}`
	ask := func(n int) string { return `{"role":"user","content":"ask ` + itoa(n) + `: fix the failing tests"}` }
	done := `{"role":"assistant","content":"Done."}`
	failing := miniRun(1, testLog(300, 7, 99))
	src := goSource(t)
	grepOut := grepLines("ServeHTTP", 120)
	readCall := func(id string) string { return callMsg(id, "read_file", jsonString(`{"path":"reverseproxy.go"}`)) }
	grepCall := func(id string) string { return callMsg(id, "grep", jsonString(`{"pattern":"ServeHTTP","path":"."}`)) }
	head := []string{sys, ask(0), bashCall("t1", "pytest -x"), resultMsg("t1", failing)}
	branchOf := func(t *testing.T, msgs []string, covered int) []history.Branch {
		raw := make([][]byte, covered)
		for i := range raw {
			raw[i] = []byte(msgs[1+i])
		}
		return []history.Branch{{Summary: "## Active Task\nfix the tests", Covered: covered, Hash: chainHashOf(raw)}}
	}
	pays := &Economics{Prices: DefaultPrices, TurnsAhead: 20}
	never := &Economics{Prices: Prices{Input: 1, CachedInput: 0, CacheWrite: 1}} // removed tokens save nothing cached
	tests := []struct {
		name     string
		cfg      Config
		msgs     []string
		opening  int // >0: msgs[:opening] opens the turn first, and its marks are passed on
		branches func(t *testing.T, msgs []string) []history.Branch
		econ     *Economics
		want     []string // call ids pruned
		declined int
	}{
		{"a test run before the current ask becomes its line", pruneConfig(200),
			append(slices.Clone(head), done, ask(1)), 0, nil, nil, []string{"t1"}, 0},
		{"the cost model says it pays: pruned", pruneConfig(200),
			append(slices.Clone(head), done, ask(1)), 0, nil, pays, []string{"t1"}, 0},
		{"the cost model says it does not pay: kept, the batch declined", pruneConfig(200),
			append(slices.Clone(head), done, ask(1)), 0, nil, never, nil, 1},
		{"the first ask's own tool loop is the current turn: kept", pruneConfig(200),
			append(slices.Clone(head), bashCall("t2", "pytest -x"), resultMsg("t2", failing)), 0, nil, nil, nil, 0},
		{"the current turn's results stay, the earlier ones stay pruned", pruneConfig(200),
			append(slices.Clone(head), done, ask(1), bashCall("t2", "pytest -x"), resultMsg("t2", failing)), 6, nil, nil, []string{"t1"}, 0},
		{"a request inside a tool loop opens no batch", pruneConfig(200),
			append(slices.Clone(head), done, ask(1), bashCall("t2", "pytest -x"), resultMsg("t2", failing)), 0, nil, nil, nil, 0},
		{"an exempt tool's result (read_file) is kept", pruneConfig(200),
			[]string{sys, ask(0), readCall("r1"), resultMsg("r1", src), done, ask(1)}, 0, nil, nil, nil, 0},
		{"a file read through the shell (cat) is kept", pruneConfig(200),
			[]string{sys, ask(0), bashCall("r1", "cat reverseproxy.go"), resultMsg("r1", miniRun(0, src)), done, ask(1)}, 0, nil, nil, nil, 0},
		{"a tool squash is told to keep whole is kept", Config{Format: chatFormat, Squash: &squash.Config{ExemptTools: []string{"bash"}}, Prune: PruneConfig{Enabled: true, MinTokens: 200}},
			append(slices.Clone(head), done, ask(1)), 0, nil, nil, nil, 0},
		{"a result under min_tokens is kept", pruneConfig(20000),
			append(slices.Clone(head), done, ask(1)), 0, nil, nil, nil, 0},
		{"a result dedup replaced stays the placeholder; the later one is pruned",
			Config{Format: chatFormat, Dedup: DefaultDedupConfig(), Prune: PruneConfig{Enabled: true, MinTokens: 200}},
			[]string{sys, ask(0), grepCall("g1"), resultMsg("g1", grepOut), grepCall("g2"), resultMsg("g2", grepOut), done, ask(1)}, 0, nil, nil, []string{"g2"}, 0},
		{"a result a summary covers is not forwarded: nothing to prune", pruneConfig(200),
			append(slices.Clone(head), done, ask(1)), 0, func(t *testing.T, msgs []string) []history.Branch { return branchOf(t, msgs, 4) }, nil, nil, 0},
		{"a result after a summary's coverage is pruned", pruneConfig(200),
			append([]string{sys, ask(0), done, ask(1)}, bashCall("t1", "pytest -x"), resultMsg("t1", failing), done, ask(2)), 0,
			func(t *testing.T, msgs []string) []history.Branch { return branchOf(t, msgs, 2) }, nil, []string{"t1"}, 0},
		{"pruning off: kept", Config{Format: chatFormat, Squash: &squash.Config{}, Dedup: DefaultDedupConfig()},
			append(slices.Clone(head), done, ask(1)), 0, nil, nil, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := New(tc.cfg)
			opts := Options{Economics: tc.econ}
			if tc.branches != nil {
				opts.Branches = tc.branches(t, tc.msgs)
			}
			if tc.opening > 0 {
				first := p.RewriteWith(chat("gpt-4o", tc.msgs[:tc.opening]...), opts)
				opts.PrevPrunes, opts.PrevDedups = first.Prunes, first.Dedups
			}
			in := chat("gpt-4o", tc.msgs...)
			res := p.RewriteWith(in, opts)
			checkForwarded(t, p, "request", in, res)
			if got := prunedIDs(in, res.Prunes); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("pruned %v, want %v", got, tc.want)
			}
			if res.Pruned != len(tc.want) || res.PruneDeclined != tc.declined {
				t.Errorf("Pruned %d, declined %d; want %d, %d", res.Pruned, res.PruneDeclined, len(tc.want), tc.declined)
			}
			for _, id := range tc.want {
				if line := forwardedContent(res.Body, id); !isPrunedLine(line) {
					t.Errorf("the result of %s is forwarded as %.200q, not a pruned line", id, line)
				}
			}
			if len(tc.want) > 0 && res.PruneSavedTokens <= 0 {
				t.Errorf("PruneSavedTokens %d", res.PruneSavedTokens)
			}
		})
	}
}

// grepLines is a search's output of n matches of word, each on its own
// line of its own file.
func grepLines(word string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "pkg/mod%03d/handler_%d.go:%d:\tfunc (h *%s%d) Serve(rw http.ResponseWriter, req *http.Request) {\n", i, i, 10+i*7, word, i)
	}
	return b.String()
}

// sessionMsgs is an agent session of several asks, each with a tool loop
// of a failing test run, a search, a file read through the shell and the
// run again, passing.
func sessionMsgs(tb testing.TB, asks int) []string {
	src := goFile(tb, "reverseproxy.go")
	msgs := []string{`{"role":"system","content":"You are a coding agent."}`}
	for a := range asks {
		n := itoa(a)
		msgs = append(msgs, `{"role":"user","content":"ask `+n+`: fix the next failing test"}`,
			bashCall("t"+n, "pytest tests/test_"+n+".py"), resultMsg("t"+n, miniRun(1, testLog(200+a, 3+a))),
			bashCall("g"+n, "grep -rn Handler"+n+" ."), resultMsg("g"+n, miniRun(0, grepLines("Handler"+n, 60))),
			bashCall("c"+n, "cat reverseproxy.go"), resultMsg("c"+n, miniRun(0, src+"\n// edited in ask "+n+"\n")),
			bashCall("p"+n, "pytest tests/test_"+n+".py"), resultMsg("p"+n, miniRun(0, testLog(200+a))),
			`{"role":"assistant","content":"Fixed ask `+n+`."}`)
	}
	return msgs
}

// Turn after turn, a pruned result stays pruned and every forwarded
// request extends the previous one byte for byte, except the requests
// that open a user turn with a batch; a restarted pipeline with the kept
// marks forwards the same bytes.
func TestPruneIsStickyOverAReplay(t *testing.T) {
	msgs := sessionMsgs(t, 4)
	p := New(pruneConfig(200))
	var prev Result
	batches := 0
	for _, k := range everyTurn(msgs, 2) {
		in := chat("gpt-4o", msgs[:k]...)
		opts := Options{PrevDedups: prev.Dedups, PrevPrunes: prev.Prunes}
		res := p.RewriteWith(in, opts)
		checkForwarded(t, p, "turn "+itoa(k), in, res)
		if again := New(pruneConfig(200)).RewriteWith(in, opts); string(again.Body) != string(res.Body) {
			t.Fatalf("turn %d: a restarted pipeline forwards other bytes", k)
		}
		batch := len(res.Prunes) > len(prev.Prunes)
		if batch {
			batches++
			if last := gjson.Parse(msgs[k-1]); last.Get("role").Str != "user" {
				t.Errorf("turn %d: a batch on a request that does not open a user turn", k)
			}
		}
		for _, m := range prev.Prunes {
			if !slices.Contains(res.Prunes, m) {
				t.Errorf("turn %d: the result of message %d is no longer pruned", k, m.Index)
			}
		}
		if prev.Body != nil && !batch && !extends(prev.Body, res.Body) {
			t.Errorf("turn %d does not extend the previous one, and no batch was pruned", k)
		}
		prev = res
	}
	// Asks 1-3 each open a batch of the earlier loops' failing test runs
	// and searches (the shell reads stay; squash leaves the passing runs
	// under the minimum).
	if batches != 3 {
		t.Errorf("%d batches, want 3 (one per later ask)", batches)
	}
	if got := prunedIDs(chat("gpt-4o", msgs...), prev.Prunes); fmt.Sprint(got) != "[t0 g0 t1 g1 t2 g2]" {
		t.Errorf("pruned at the end: %v", got)
	}
}

// A batch the cost model declined stays declined for the rest of its user
// turn, whatever the cost model says later in it; the next user turn
// decides again, for every result before its ask at once.
func TestDeclinedPruneBatchStaysDeclinedUntilTheNextAsk(t *testing.T) {
	msgs := sessionMsgs(t, 3)
	p := New(pruneConfig(200))
	never := &Economics{Prices: Prices{Input: 1, CachedInput: 0, CacheWrite: 1}}
	pays := &Economics{Prices: DefaultPrices, Uncached: true, TurnsAhead: 1}
	asks := 0
	var prev Result
	for _, k := range everyTurn(msgs, 2) {
		opening := gjson.Parse(msgs[k-1]).Get("role").Str == "user"
		if opening {
			asks++
		}
		econ := pays
		if opening && asks == 2 {
			econ = never // the second ask's batch is declined; the requests after it would pay
		}
		in := chat("gpt-4o", msgs[:k]...)
		res := p.RewriteWith(in, Options{PrevDedups: prev.Dedups, PrevPrunes: prev.Prunes, Economics: econ})
		switch {
		case asks < 2 && res.Pruned != 0:
			t.Errorf("turn %d: pruned %d in the first user turn", k, res.Pruned)
		case asks == 2 && (res.Pruned != 0 || opening != (res.PruneDeclined == 2)):
			t.Errorf("turn %d: pruned %d, declined %d in the declined turn", k, res.Pruned, res.PruneDeclined)
		case asks == 3 && fmt.Sprint(prunedIDs(in, res.Prunes)) != "[t0 g0 t1 g1]":
			t.Errorf("turn %d: pruned %v at the third ask", k, prunedIDs(in, res.Prunes))
		}
		if prev.Body != nil && !(opening && asks == 3) && !extends(prev.Body, res.Body) {
			t.Errorf("turn %d does not extend the previous one", k)
		}
		prev = res
	}
}

// A mark written by an earlier request is honoured only while it names
// the same message: an edited or rewound history is not pruned by it.
func TestPruneMarkOfAnEditedMessageDoesNotCount(t *testing.T) {
	msgs := sessionMsgs(t, 2)
	u := slices.IndexFunc(msgs, func(m string) bool { return strings.Contains(m, "ask 1:") })
	p := New(pruneConfig(200))
	first := p.RewriteWith(chat("gpt-4o", msgs[:u+1]...), Options{})
	if len(first.Prunes) == 0 {
		t.Fatal("nothing pruned at the second ask")
	}
	edited := slices.Clone(msgs[:u+3])
	m := first.Prunes[0].Index
	edited[m] = strings.Replace(edited[m], "passed in", "Passed in", 1)
	res := p.RewriteWith(chat("gpt-4o", edited...), Options{PrevPrunes: first.Prunes})
	for _, mk := range res.Prunes {
		if mk.Index == m {
			t.Errorf("the edited message %d is still pruned", m)
		}
	}
	if len(res.Prunes) != len(first.Prunes)-1 {
		t.Errorf("%d marks kept of %d", len(res.Prunes), len(first.Prunes))
	}
}

// The marks of results a summary covers are kept with the others: the
// batch's extent (for a bound history's thinking) does not shrink, and a
// request without that summary prunes them as before.
func TestPruneMarksCoveredBySummaryAreKept(t *testing.T) {
	msgs := sessionMsgs(t, 3)
	u := slices.IndexFunc(msgs, func(m string) bool { return strings.Contains(m, "ask 2:") })
	p := New(pruneConfig(200))
	first := p.RewriteWith(chat("gpt-4o", msgs[:u+1]...), Options{})
	raw := make([][]byte, 10)
	for i := range raw {
		raw[i] = []byte(msgs[1+i])
	}
	b := []history.Branch{{Summary: "## Active Task\nx", Covered: 10, Hash: chainHashOf(raw)}}
	res := p.RewriteWith(chat("gpt-4o", msgs[:u+3]...), Options{Branches: b, PrevPrunes: first.Prunes})
	if res.Applied != 0 || !slices.Equal(res.Prunes, first.Prunes) {
		t.Errorf("applied %d; marks %v, want %v", res.Applied, res.Prunes, first.Prunes)
	}
	if res.Pruned >= len(first.Prunes) {
		t.Errorf("Pruned %d counts results the summary covers", res.Pruned)
	}
}

// A history.PruneMark is keyed like a DedupMark: a digest that is not the
// message's does not count.
func TestPruneMarkNeedsTheMessageDigest(t *testing.T) {
	msgs := sessionMsgs(t, 2)
	u := slices.IndexFunc(msgs, func(m string) bool { return strings.Contains(m, "ask 1:") })
	p := New(pruneConfig(200))
	in := chat("gpt-4o", msgs[:u+3]...)
	mark := history.PruneMark{Index: 3, Result: 0, Digest: sha256.Sum256([]byte("other")), Turn: u}
	if res := p.RewriteWith(in, Options{PrevPrunes: []history.PruneMark{mark}}); res.Pruned != 0 {
		t.Errorf("a mark with another digest pruned %d", res.Pruned)
	}
}

// A Claude Code session (thinking on: every thinking block is bound to
// what precedes it) with pruning: at each later ask the earlier test runs
// become their line and the thinking of the turns after them is left out,
// so the signature-checking upstream accepts every request, with and
// without compactions, and a prompt breaks only where a batch or a
// compaction changed it.
func TestClaudeCodeSessionWithPruningKeepsEveryThinkingBlockValid(t *testing.T) {
	for _, tc := range []struct {
		name      string
		compactAt map[int]bool
	}{
		{"pruning alone", nil},
		{"with compactions at a user turn and inside a loop", map[int]bool{6: true, 15: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newClaudeSession(t, Config{Squash: &squash.Config{}, Dedup: DefaultDedupConfig(), Prune: PruneConfig{Enabled: true, MinTokens: 200}})
			s.run(claudeScript(t), tc.compactAt, 4)
			var want []int
			pruned := 0
			for i, res := range s.results {
				batch := i > 0 && len(res.Prunes) > len(s.results[i-1].Prunes)
				if batch || s.compacted[i] {
					want = append(want, i)
				}
				pruned = max(pruned, res.Pruned)
				t.Logf("request %2d: pruned %d (marks %d), thinking left out of %d, drop_block %v, tokens %d -> %d",
					i, res.Pruned, len(res.Prunes), res.ThinkingLeftOut, res.DropMismatched, res.TokensBefore, res.TokensAfter)
			}
			if pruned == 0 {
				t.Fatal("nothing pruned: the session does not exercise pruning")
			}
			if got := s.breaks(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("prompts break at requests %v, want at the batches and compactions %v", got, want)
			}
			if s.ledger.Verified() == 0 {
				t.Error("no thinking block was verified")
			}
		})
	}
}
