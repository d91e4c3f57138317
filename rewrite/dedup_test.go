package rewrite

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ctxpress/ctxpress/history"
)

// goSource returns a real source file (several thousand tokens) to play a
// read_file result: Go's own reverse proxy.
func goSource(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "src", "net", "http", "httputil", "reverseproxy.go"))
	if err != nil {
		tb.Skipf("Go source not available: %v", err)
	}
	return string(b)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// callMsg is an assistant message calling tool with raw JSON arguments
// (a JSON string literal, or an object for sloppy clients).
func callMsg(id, tool, args string) string {
	return `{"role":"assistant","content":null,"tool_calls":[{"id":"` + id + `","type":"function","function":{"name":"` + tool + `","arguments":` + args + `}}]}`
}

func resultMsg(id, content string) string {
	return `{"role":"tool","tool_call_id":"` + id + `","content":` + jsonString(content) + `}`
}

// contentOf returns the content text of message i of body.
func contentOf(body []byte, i int) string {
	return contentText(gjson.GetBytes(body, "messages."+itoa(i)+".content"))
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func TestDedup(t *testing.T) {
	src := goSource(t)
	small := "package main\n\nfunc main() {}\n"
	readArgs := jsonString(`{"path":"proxy.go","limit":2000}`)
	readArgsReordered := jsonString(`{ "limit": 2000, "path": "proxy.go" }`)
	user := `{"role":"user","content":"look at proxy.go"}`
	tests := []struct {
		name     string
		cfg      DedupConfig
		msgs     []string
		replaced []int // indexes of messages whose content becomes the placeholder
	}{
		{"read-only tool, same args in another key order: older replaced",
			DefaultDedupConfig(),
			[]string{user, callMsg("c1", "read_file", readArgs), resultMsg("c1", src), callMsg("c2", "read_file", readArgsReordered), resultMsg("c2", src+"// edited\n")},
			[]int{2}},
		{"three reads: all but the last replaced",
			DefaultDedupConfig(),
			[]string{user, callMsg("c1", "Read", readArgs), resultMsg("c1", src), callMsg("c2", "Read", readArgs), resultMsg("c2", src), callMsg("c3", "Read", readArgs), resultMsg("c3", src)},
			[]int{2, 4}},
		{"saving below MinTokens: nothing replaced",
			DefaultDedupConfig(),
			[]string{user, callMsg("c1", "read_file", readArgs), resultMsg("c1", small), callMsg("c2", "read_file", readArgs), resultMsg("c2", small)},
			nil},
		{"no minimum: small duplicate replaced",
			DedupConfig{Enabled: true, MinTokens: -1},
			[]string{user, callMsg("c1", "read_file", readArgs), resultMsg("c1", small+strings.Repeat("// pad\n", 10)), callMsg("c2", "read_file", readArgs), resultMsg("c2", small+strings.Repeat("// pad\n", 4))},
			[]int{2}},
		{"different arguments: no-op",
			DefaultDedupConfig(),
			[]string{user, callMsg("c1", "read_file", readArgs), resultMsg("c1", src), callMsg("c2", "read_file", jsonString(`{"path":"other.go","limit":2000}`)), resultMsg("c2", src)},
			nil},
		{"same arguments, different tool: no-op",
			DefaultDedupConfig(),
			[]string{user, callMsg("c1", "read_file", readArgs), resultMsg("c1", src), callMsg("c2", "view", readArgs), resultMsg("c2", src)},
			nil},
		{"mutating tool, same args, different outputs: both kept",
			DefaultDedupConfig(),
			[]string{user, callMsg("c1", "bash", jsonString(`{"command":"go test ./..."}`)), resultMsg("c1", src), callMsg("c2", "bash", jsonString(`{"command":"go test ./..."}`)), resultMsg("c2", src+"ok\n")},
			nil},
		{"mutating tool, byte-identical outputs: collapsed",
			DefaultDedupConfig(),
			[]string{user, callMsg("c1", "bash", jsonString(`{"command":"go test ./..."}`)), resultMsg("c1", src), callMsg("c2", "bash", jsonString(`{"command":"go test ./..."}`)), resultMsg("c2", src)},
			[]int{2}},
		{"stateful viewer (SWE-agent open) is not read-only",
			DefaultDedupConfig(),
			[]string{user, callMsg("c1", "open", jsonString(`{"path":"proxy.go"}`)), resultMsg("c1", src), callMsg("c2", "open", jsonString(`{"path":"proxy.go"}`)), resultMsg("c2", src+"x")},
			nil},
		{"arguments as object vs as string: same call",
			DefaultDedupConfig(),
			[]string{user, callMsg("c1", "grep", `{"pattern":"func","path":"."}`), resultMsg("c1", src), callMsg("c2", "grep", jsonString(`{"path":".","pattern":"func"}`)), resultMsg("c2", src+"\n")},
			[]int{2}},
		{"unmatched tool_call_id: left alone",
			DefaultDedupConfig(),
			[]string{user, resultMsg("ghost", src), callMsg("c2", "read_file", readArgs), resultMsg("c2", src), resultMsg("ghost", src)},
			nil},
		// qwen-code's read_file answers a second read of an unchanged file
		// with a stub pointing back: replacing the first read left the
		// model neither copy of the file.
		{"a later stub (\"unchanged since last read\") does not supersede the content it points to",
			DefaultDedupConfig(),
			[]string{user, callMsg("c1", "read_file", readArgs), resultMsg("c1", src), callMsg("c2", "read_file", readArgs),
				resultMsg("c2", "[File proxy.go unchanged since last read in this session; refer to the earlier read_file result for its content.]")},
			nil},
		{"a later full read after a stub still supersedes both",
			DefaultDedupConfig(),
			[]string{user, callMsg("c1", "read_file", readArgs), resultMsg("c1", src), callMsg("c2", "read_file", readArgs),
				resultMsg("c2", "[File proxy.go unchanged since last read]"), callMsg("c3", "read_file", readArgs), resultMsg("c3", src+"// edited\n")},
			[]int{2}},
		{"disabled",
			DedupConfig{},
			[]string{user, callMsg("c1", "read_file", readArgs), resultMsg("c1", src), callMsg("c2", "read_file", readArgs), resultMsg("c2", src)},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := chat("gpt-4o", tt.msgs...)
			res := New(Config{Format: chatFormat, Dedup: tt.cfg}).Rewrite(body)
			if !res.Understood {
				t.Fatal("not understood")
			}
			assertOnlyContentsChanged(t, body, res.Body)
			if res.Deduped != len(tt.replaced) {
				t.Errorf("Deduped = %d, want %d", res.Deduped, len(tt.replaced))
			}
			want := map[int]bool{}
			for _, i := range tt.replaced {
				want[i] = true
			}
			in, out := rawMessages(t, body), rawMessages(t, res.Body)
			for i := range in {
				placeholder := contentOf(res.Body, i) == DedupPlaceholder
				switch {
				case want[i] && !placeholder:
					t.Errorf("message %d not replaced", i)
				case !want[i] && in[i] != out[i]:
					t.Errorf("message %d changed: %.100s", i, out[i])
				}
			}
			if len(tt.replaced) > 0 && res.TokensBefore-res.TokensAfter < tt.cfg.minTokens() {
				t.Errorf("saved %d tokens, less than the minimum", res.TokensBefore-res.TokensAfter)
			}
			if n, _ := New(Config{Format: chatFormat}).Counter().CountRequest(chatFormat, res.Body); n != res.TokensAfter {
				t.Errorf("TokensAfter %d, counted %d", res.TokensAfter, n)
			}
		})
	}
}

func TestDedupPartsContentKeepsArrayShape(t *testing.T) {
	src := goSource(t)
	parts := `[{"type":"text","text":` + jsonString(src) + `}]`
	args := jsonString(`{"absolute_path":"/src/proxy.go"}`)
	body := chat("qwen3-coder",
		callMsg("c1", "read_file", args), `{"role":"tool","tool_call_id":"c1","content":`+parts+`}`,
		callMsg("c2", "read_file", args), `{"role":"tool","tool_call_id":"c2","content":`+parts+`}`)
	res := New(Config{Format: chatFormat, Dedup: DefaultDedupConfig()}).Rewrite(body)
	assertOnlyContentsChanged(t, body, res.Body)
	got := gjson.GetBytes(res.Body, "messages.1.content")
	if got.Raw != `[{"type":"text","text":"`+DedupPlaceholder+`"}]` {
		t.Errorf("content = %.200s", got.Raw)
	}
	if gjson.GetBytes(res.Body, "messages.3.content").Raw != parts {
		t.Error("the later result changed")
	}
}

// The placeholder is applied after squashing: a squashed duplicate is
// replaced, its squash is not counted, and the later one stays squashed.
func TestDedupAfterSquash(t *testing.T) {
	src := goSource(t)
	args := jsonString(`{"command":"cat proxy.go"}`)
	body := chat("gpt-4o", callMsg("c1", "bash", args), resultMsg("c1", src), callMsg("c2", "bash", args), resultMsg("c2", src))
	res := New(Config{Format: chatFormat, Squasher: squashWith(truncSquash), Dedup: DedupConfig{Enabled: true, MinTokens: -1}}).Rewrite(body)
	if res.Deduped != 1 || res.Squashed != 1 {
		t.Fatalf("%+v", res)
	}
	if contentOf(res.Body, 1) != DedupPlaceholder || contentOf(res.Body, 3) != truncSquash(ToolCall{Name: "bash"}, src) {
		t.Errorf("unexpected contents")
	}
}

// A conversation reads the same file twice, with a small duplicate first:
// nothing is rewritten until the turn whose dedups save MinTokens; from
// then on the rewritten history is stable again.
func TestDedupPrefixStabilityAcrossThreshold(t *testing.T) {
	src := goSource(t)
	small := strings.Repeat("internal/file_with_a_long_name.go\n", 40) // a few hundred tokens
	msgs := []string{
		`{"role":"system","content":"agent"}`, `{"role":"user","content":"go"}`,
		callMsg("c1", "ls", jsonString(`{"path":"."}`)), resultMsg("c1", small),
		callMsg("c2", "read_file", jsonString(`{"path":"proxy.go"}`)), resultMsg("c2", src),
		callMsg("c3", "ls", jsonString(`{"path":"."}`)), resultMsg("c3", small),
		`{"role":"user","content":"again"}`,
		callMsg("c4", "read_file", jsonString(`{"path":"proxy.go"}`)), resultMsg("c4", src),
		`{"role":"user","content":"thanks"}`,
	}
	p := New(Config{Format: chatFormat, Dedup: DefaultDedupConfig()})
	var prev []string
	for k := 1; k <= len(msgs); k++ {
		body := chat("gpt-4o", msgs[:k]...)
		res := p.Rewrite(body)
		cur := rawMessages(t, res.Body)
		wantDeduped := 0
		if k >= 11 {
			wantDeduped = 2 // both the small and the big duplicate
		}
		if res.Deduped != wantDeduped {
			t.Fatalf("turn %d: Deduped = %d, want %d", k, res.Deduped, wantDeduped)
		}
		for i := range prev {
			if prev[i] != cur[i] && !(k == 11 && (i == 3 || i == 5)) {
				t.Errorf("turn %d: message %d changed", k, i)
			}
		}
		prev = cur
	}
}

// Item 5. After one big dedup, a later small one must not rewrite an old,
// cached message: the minimum applies to what a request adds over the
// previous forwarded request's dedups, which stay applied.
func TestSmallDedupAfterBigOneKeepsCachedPrefix(t *testing.T) {
	src := goSource(t)
	small := "package small\n\nfunc Small() int { return 42 }\n" + strings.Repeat("// note\n", 20)
	big, smallArgs := jsonString(`{"path":"proxy.go"}`), jsonString(`{"path":"small.go"}`)
	msgs := []string{
		`{"role":"system","content":"agent"}`,
		`{"role":"user","content":"look at proxy.go"}`,
		callMsg("c1", "read_file", big), resultMsg("c1", src),
		callMsg("c2", "read_file", big), resultMsg("c2", src), // supersedes 3: thousands of tokens
		`{"role":"assistant","content":"read it"}`,
		`{"role":"user","content":"and small.go"}`,
		callMsg("c3", "read_file", smallArgs), resultMsg("c3", small),
		`{"role":"assistant","content":"read it"}`,
		`{"role":"user","content":"again"}`,
		callMsg("c4", "read_file", smallArgs), resultMsg("c4", small), // supersedes 9: under the minimum alone
		`{"role":"assistant","content":"same"}`,
		`{"role":"user","content":"thanks"}`,
	}
	p := New(Config{Format: chatFormat, Dedup: DefaultDedupConfig()})
	ts := replay(t, p, msgs, everyTurn(msgs, 2), Options{})
	for i, tr := range ts {
		if tr.k > 5 && contentOf(tr.res.Body, 3) != DedupPlaceholder {
			t.Errorf("turn %d: the big dedup is not sticky", tr.k)
		}
		if tr.k > 9 && contentOf(tr.res.Body, 9) != small {
			t.Errorf("turn %d: the small dedup rewrote cached message 9 (saving %d tokens)", tr.k, tr.res.DedupSavedTokens)
		}
		if i > 0 && tr.k != 6 && !extends(ts[i-1].res.Body, tr.res.Body) {
			t.Errorf("turn %d does not extend turn %d: the cached prefix is lost", tr.k, ts[i-1].k)
		}
	}
	last := ts[len(ts)-1].res
	if len(last.Dedups) != 1 || last.Dedups[0].Index != 3 || last.Deduped != 1 {
		t.Errorf("Dedups %+v, Deduped %d; want message 3 alone", last.Dedups, last.Deduped)
	}
}

// The dedup minimum, row by row: what the previous forwarded request
// deduped stays, and only what is new must pay for itself.
func TestDedupMinimumAppliesToWhatIsNew(t *testing.T) {
	src := goSource(t)
	small := "package small\n\nfunc Small() int { return 42 }\n" + strings.Repeat("// note\n", 20)
	big, smallArgs := jsonString(`{"path":"proxy.go"}`), jsonString(`{"path":"small.go"}`)
	msgs := []string{
		`{"role":"user","content":"read"}`,
		callMsg("c1", "read_file", big), resultMsg("c1", src), // 2
		callMsg("c2", "read_file", big), resultMsg("c2", src), // 4
		callMsg("c3", "read_file", smallArgs), resultMsg("c3", small), // 6
		callMsg("c4", "read_file", smallArgs), resultMsg("c4", small), // 8
	}
	withThird := append(append([]string{}, msgs...), callMsg("c5", "read_file", big), resultMsg("c5", src))
	p := New(Config{Format: chatFormat, Dedup: DefaultDedupConfig()})
	body := chat("gpt-4o", msgs...)
	marks := p.RewriteWith(body, Options{}).Dedups // 2 and 6: no previous list
	mark := func(i int) history.DedupMark {
		for _, m := range marks {
			if m.Index == i {
				return m
			}
		}
		t.Fatalf("no mark for %d in %+v", i, marks)
		return history.DedupMark{}
	}
	edited := mark(2)
	edited.Digest[0] ^= 1
	tests := []struct {
		name string
		msgs []string
		prev []history.DedupMark
		want []int
	}{
		{"no previous list (first turn, no state): the minimum is on the total", msgs, nil, []int{2, 6}},
		{"the big one was sent before: the small one alone is under the minimum", msgs, []history.DedupMark{mark(2)}, []int{2}},
		{"both were sent before: both stay", msgs, []history.DedupMark{mark(2), mark(6)}, []int{2, 6}},
		{"a mark of an edited message does not count", msgs, []history.DedupMark{edited}, []int{2, 6}},
		{"a mark past the end does not count", msgs, []history.DedupMark{{Index: 40, Digest: mark(2).Digest}}, []int{2, 6}},
		{"a new big dedup pays for itself and the small one", withThird, []history.DedupMark{mark(2)}, []int{2, 4, 6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := chat("gpt-4o", tc.msgs...)
			res := p.RewriteWith(in, Options{PrevDedups: tc.prev})
			checkForwarded(t, p, tc.name, in, res)
			var got []int
			for _, m := range res.Dedups {
				got = append(got, m.Index)
				if contentOf(res.Body, m.Index) != DedupPlaceholder {
					t.Errorf("message %d is in Dedups but not replaced", m.Index)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || res.Deduped != len(tc.want) {
				t.Errorf("replaced %v (Deduped %d), want %v", got, res.Deduped, tc.want)
			}
		})
	}
}
