package rewrite

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/wire"
)

// goFile returns a file of Go's net/http/httputil, a few thousand tokens
// of real source to play a read result.
func goFile(tb testing.TB, name string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "src", "net", "http", "httputil", name))
	if err != nil {
		tb.Skipf("Go source not available: %v", err)
	}
	return string(b)
}

// at names a tool result: message msg's result number res (0: the first).
type at struct{ msg, res int }

// withPlaceholders returns body with the results named replaced by
// DedupPlaceholder, through the format's own edit: what a rewrite that
// replaces exactly those and changes nothing else forwards.
func withPlaceholders(tb testing.TB, f wire.Format, body []byte, names []at) []byte {
	tb.Helper()
	c, ok := f.Parse(body)
	if !ok {
		tb.Fatal("test body does not parse")
	}
	var edits []wire.Edit
	for _, n := range names {
		it := -1
		k := n.res
		for i, item := range c.ItemsOf(n.msg) {
			if item.Kind == wire.KindToolResult {
				if k == 0 {
					it = c.Messages[n.msg].Items.Start + i
					break
				}
				k--
			}
		}
		if it < 0 {
			tb.Fatalf("message %d has no result %d", n.msg, n.res)
		}
		edits = append(edits, f.ReplaceContent(c, it, DedupPlaceholder))
	}
	return wire.Splice(body, edits)
}

func marksAt(marks []history.DedupMark) []at {
	var out []at
	for _, m := range marks {
		out = append(out, at{m.Index, m.Result})
	}
	return out
}

// TestOneOfSeveralResultsInAMessageIsDeduped: a message may carry several tool results (Anthropic
// sends every result of a turn in one user message); dedup finds, keys,
// replaces and names each result on its own.
func TestOneOfSeveralResultsInAMessageIsDeduped(t *testing.T) {
	a, b := goFile(t, "reverseproxy.go"), goFile(t, "dump.go")
	readA, readB := `{"path":"a.go"}`, `{"path":"b.go"}`
	ask := `{"role":"user","content":"read a.go and b.go"}`
	callsAB := blocksMsg("assistant", useBlock("c1", "read_file", readA), useBlock("c2", "read_file", readB))
	resultsAB := blocksMsg("user", resultBlock("c1", a), resultBlock("c2", b))
	tests := []struct {
		name string
		msgs []string
		want []at
	}{
		{"a later read of one file replaces only that file's result in the message of two",
			[]string{ask, callsAB, resultsAB,
				blocksMsg("assistant", useBlock("c3", "read_file", readA)), blocksMsg("user", resultBlock("c3", a+"// edited\n"))},
			[]at{{2, 0}}},
		{"the second result of a message superseded: the mark names result 1",
			[]string{ask, callsAB, resultsAB,
				blocksMsg("assistant", useBlock("c3", "read_file", readB)), blocksMsg("user", resultBlock("c3", b))},
			[]at{{2, 1}}},
		{"both results of a message superseded by one later message of two",
			[]string{ask, callsAB, resultsAB,
				blocksMsg("assistant", useBlock("c3", "read_file", readB), useBlock("c4", "read_file", readA)),
				blocksMsg("user", resultBlock("c3", b), resultBlock("c4", a))},
			[]at{{2, 0}, {2, 1}}},
		{"two calls with the same arguments in one message: the first result is superseded by the second",
			[]string{ask, blocksMsg("assistant", useBlock("c1", "read_file", readA), useBlock("c2", "read_file", readA)),
				blocksMsg("user", resultBlock("c1", a), resultBlock("c2", a))},
			[]at{{2, 0}}},
		{"a text block beside the results is never touched",
			[]string{ask, callsAB, blocksMsg("user", resultBlock("c1", a), `{"type":"text","text":"also look at c.go"}`, resultBlock("c2", b)),
				blocksMsg("assistant", useBlock("c3", "read_file", readB)), blocksMsg("user", resultBlock("c3", b))},
			[]at{{2, 1}}},
		{"a result whose call is unknown is left alone, its neighbour is not",
			[]string{ask, blocksMsg("assistant", useBlock("c1", "read_file", readA)),
				blocksMsg("user", resultBlock("ghost", b), resultBlock("c1", a)),
				blocksMsg("assistant", useBlock("c3", "read_file", readA)), blocksMsg("user", resultBlock("c3", a))},
			[]at{{2, 1}}},
		{"different arguments in one message: nothing replaced",
			[]string{ask, callsAB, resultsAB},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(Config{Format: blocksFormat{}, Dedup: DefaultDedupConfig()})
			body := blocksBody(tt.msgs...)
			res := p.Rewrite(body)
			if !res.Understood {
				t.Fatal("not understood")
			}
			if want := withPlaceholders(t, blocksFormat{}, body, tt.want); string(res.Body) != string(want) {
				t.Errorf("forwarded body differs from the client's with %v replaced:\n got %.600s\nwant %.600s", tt.want, res.Body, want)
			}
			if got := marksAt(res.Dedups); fmt.Sprint(got) != fmt.Sprint(tt.want) || res.Deduped != len(tt.want) {
				t.Errorf("Dedups %v (Deduped %d), want %v", got, res.Deduped, tt.want)
			}
			if n, err := p.Counter().CountRequest(blocksFormat{}, res.Body); err != nil || n != res.TokensAfter {
				t.Errorf("TokensAfter %d, the forwarded body counts %d (%v)", res.TokensAfter, n, err)
			}
		})
	}
}

// A squashed result beside a replaced one stays squashed, and only its
// squash is counted: the replaced one's squash is not forwarded.
func TestDedupPerResultKeepsTheOtherResultsSquash(t *testing.T) {
	a, b := goFile(t, "reverseproxy.go"), goFile(t, "dump.go")
	body := blocksBody(`{"role":"user","content":"go"}`,
		blocksMsg("assistant", useBlock("c1", "bash", `{"command":"cat a.go"}`), useBlock("c2", "bash", `{"command":"cat b.go"}`)),
		blocksMsg("user", resultBlock("c1", a), resultBlock("c2", b)),
		blocksMsg("assistant", useBlock("c3", "bash", `{"command":"cat a.go"}`)),
		blocksMsg("user", resultBlock("c3", a)))
	p := New(Config{Format: blocksFormat{}, Squasher: squashWith(truncSquash), Dedup: DedupConfig{Enabled: true, MinTokens: -1}})
	res := p.Rewrite(body)
	if res.Deduped != 1 || res.Squashed != 2 || len(res.SquashStats) != 2 {
		t.Fatalf("Deduped %d Squashed %d SquashStats %d; want 1, 2 (b.go and the later a.go), 2", res.Deduped, res.Squashed, len(res.SquashStats))
	}
	c, _ := blocksFormat{}.Parse(res.Body)
	texts := []string{}
	for _, m := range []int{2, 4} {
		for i, it := range c.ItemsOf(m) {
			if it.Kind == wire.KindToolResult {
				texts = append(texts, blocksFormat{}.Text(c, c.Messages[m].Items.Start+i))
			}
		}
	}
	want := []string{DedupPlaceholder, truncSquash(ToolCall{}, b), truncSquash(ToolCall{}, a)}
	if fmt.Sprint(texts) != fmt.Sprint(want) {
		t.Errorf("results forwarded %.300q, want %.300q", texts, want)
	}
	if n, err := p.Counter().CountRequest(blocksFormat{}, res.Body); err != nil || n != res.TokensAfter {
		t.Errorf("TokensAfter %d, the forwarded body counts %d (%v)", res.TokensAfter, n, err)
	}
}

// The marks of one message's results, row by row: each names one result,
// and one written before results were deduped one by one (Result 0)
// still names the message's first.
func TestDedupMarksNameOneResult(t *testing.T) {
	a, b := goFile(t, "reverseproxy.go"), goFile(t, "dump.go")
	small := "package small\n\nfunc Small() int { return 42 }\n" + strings.Repeat("// note\n", 20)
	readA, readB, readS := `{"path":"a.go"}`, `{"path":"b.go"}`, `{"path":"small.go"}`
	msgs := []string{
		`{"role":"user","content":"read"}`,
		blocksMsg("assistant", useBlock("c1", "read_file", readA), useBlock("c2", "read_file", readS), useBlock("c3", "read_file", readB)),
		blocksMsg("user", resultBlock("c1", a), resultBlock("c2", small), resultBlock("c3", b)), // 2
		blocksMsg("assistant", useBlock("c4", "read_file", readS), useBlock("c5", "read_file", readA)),
		blocksMsg("user", resultBlock("c4", small), resultBlock("c5", a)), // 4: supersedes 2's first two
	}
	p := New(Config{Format: blocksFormat{}, Dedup: DefaultDedupConfig()})
	body := blocksBody(msgs...)
	first := p.Rewrite(body).Dedups // (2,0) and (2,1): no previous list, the minimum is on the total
	if fmt.Sprint(marksAt(first)) != fmt.Sprint([]at{{2, 0}, {2, 1}}) {
		t.Fatalf("first turn's marks %v", marksAt(first))
	}
	digest := first[0].Digest
	withB := append(append([]string{}, msgs...), blocksMsg("assistant", useBlock("c6", "read_file", readB)), blocksMsg("user", resultBlock("c6", b)))
	tests := []struct {
		name string
		msgs []string
		prev []history.DedupMark
		want []at
	}{
		{"the big result was sent replaced: the small one beside it alone is under the minimum", msgs,
			[]history.DedupMark{{Index: 2, Result: 0, Digest: digest}}, []at{{2, 0}}},
		{"the small result was sent replaced: it stays so, and the big one pays for itself", msgs,
			[]history.DedupMark{{Index: 2, Result: 1, Digest: digest}}, []at{{2, 0}, {2, 1}}},
		{"a mark written before per-result dedup (Result 0) names the message's first result", msgs,
			[]history.DedupMark{{Index: 2, Digest: digest}}, []at{{2, 0}}},
		{"a mark past the message's results does not count", msgs,
			[]history.DedupMark{{Index: 2, Result: 3, Digest: digest}}, []at{{2, 0}, {2, 1}}},
		{"a mark of another message's digest does not count", msgs,
			[]history.DedupMark{{Index: 4, Result: 1, Digest: digest}}, []at{{2, 0}, {2, 1}}},
		{"a new big dedup of the third result pays for itself and the small one beside it", withB,
			[]history.DedupMark{{Index: 2, Result: 0, Digest: digest}}, []at{{2, 0}, {2, 1}, {2, 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := blocksBody(tc.msgs...)
			res := p.RewriteWith(in, Options{PrevDedups: tc.prev})
			if got := marksAt(res.Dedups); fmt.Sprint(got) != fmt.Sprint(tc.want) || res.Deduped != len(tc.want) {
				t.Errorf("replaced %v (Deduped %d), want %v", got, res.Deduped, tc.want)
			}
			if want := withPlaceholders(t, blocksFormat{}, in, tc.want); string(res.Body) != string(want) {
				t.Errorf("forwarded body is not the client's with %v replaced", tc.want)
			}
		})
	}
}

// Turn by turn with the previous turn's marks, as the proxy runs it: a
// result replaced once stays replaced, the others of its message stay as
// sent, and every turn's forwarded body is a byte prefix of the next one's
// but at the turn that adds a dedup.
func TestDedupPerResultIsSticky(t *testing.T) {
	a, b := goFile(t, "reverseproxy.go"), goFile(t, "dump.go")
	readA, readB := `{"path":"a.go"}`, `{"path":"b.go"}`
	msgs := []string{
		`{"role":"user","content":"read a.go and b.go"}`,
		blocksMsg("assistant", useBlock("c1", "read_file", readA), useBlock("c2", "read_file", readB)),
		blocksMsg("user", resultBlock("c1", a), resultBlock("c2", b)),
		`{"role":"assistant","content":"read them"}`,
		`{"role":"user","content":"b.go again"}`,
		blocksMsg("assistant", useBlock("c3", "read_file", readB)),
		blocksMsg("user", resultBlock("c3", b)), // supersedes (2,1)
		`{"role":"assistant","content":"same"}`,
		`{"role":"user","content":"thanks"}`,
	}
	p := New(Config{Format: blocksFormat{}, Dedup: DefaultDedupConfig()})
	var prev Result
	for k := 1; k <= len(msgs); k++ {
		in := blocksBody(msgs[:k]...)
		res := p.RewriteWith(in, Options{PrevDedups: prev.Dedups})
		var want []at
		if k >= 7 {
			want = []at{{2, 1}}
		}
		if got := marksAt(res.Dedups); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("turn %d: marks %v, want %v", k, got, want)
		}
		if wantBody := withPlaceholders(t, blocksFormat{}, in, want); string(res.Body) != string(wantBody) {
			t.Errorf("turn %d: forwarded body is not the client's with %v replaced", k, want)
		}
		if k > 1 && k != 7 {
			open := prev.Body[:len(prev.Body)-len("]}")]
			if !strings.HasPrefix(string(res.Body), string(open)) {
				t.Errorf("turn %d does not extend turn %d", k, k-1)
			}
		}
		prev = res
	}
}
