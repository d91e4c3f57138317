package rewrite

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/internal/chatcheck"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/tidwall/gjson"
)

// agentTurns returns an agent conversation after lead: a user task, then
// n call/result pairs, an assistant remark and a follow-up user message
// halfway.
func agentTurns(n int) []string {
	msgs := []string{`{"role":"user","content":"Fix the failing parser test."}`}
	for i := range n {
		id := "c" + itoa(i)
		msgs = append(msgs,
			callMsg(id, "bash", jsonString(`{"command":"cat file_`+itoa(i)+`.go"}`)),
			resultMsg(id, "package p\n// file "+itoa(i)+"\n"+strings.Repeat("func f() {}\n", 5)))
		if i == n/2 {
			msgs = append(msgs, `{"role":"assistant","content":"Halfway there."}`, `{"role":"user","content":"Also run go vet."}`)
		}
	}
	return msgs
}

// proposeBranch rewrites body without options and turns its proposed
// compaction into a stored branch with a fake summary.
func proposeBranch(tb testing.TB, p *Pipeline, body []byte, opts Options, keepRecent, keepTokens int) (history.Branch, Compaction) {
	tb.Helper()
	c, ok := p.RewriteWith(body, opts).Compaction(keepRecent, keepTokens)
	if !ok {
		tb.Fatalf("no compaction proposed")
	}
	sum := "## Active Task\nfake summary of messages " + itoa(c.From) + " to " + itoa(c.Cut)
	return history.Branch{Summary: sum, Covered: c.Covered, Hash: c.Hash}, c
}

// checkApplied checks the shape of a body with branch b applied: the
// leading system messages (the last one may carry the additions), maybe a
// new system message, the user-side additions (PlacementUser, or no system
// message with the default placement) at the head of the first user
// message forwarded or as a user message of their own, the re-sent latest
// user message when it is covered, then the client's messages after the
// coverage; one block; valid for a strict server, and roles alternating
// as the client's did; TokensAfter the count of the output; the bytes
// outside the messages array as sent. It expects a pipeline without squash
// or dedup, so kept messages keep their bytes.
func checkApplied(tb testing.TB, p *Pipeline, in []byte, res Result, opts Options, b history.Branch) {
	tb.Helper()
	if !res.Understood || res.Applied != 0 || res.Covered != b.Covered || res.SummaryMiss {
		tb.Fatalf("branch not applied: Applied %d Covered %d Miss %v", res.Applied, res.Covered, res.SummaryMiss)
	}
	if err := chatcheck.ValidateChat(res.Body); err != nil {
		tb.Fatalf("invalid output: %v\n%s", err, res.Body)
	}
	if chatcheck.ValidateAlternation(in) == nil {
		if err := chatcheck.ValidateAlternation(res.Body); err != nil {
			tb.Fatalf("the client's roles alternate, the output's do not: %v", err)
		}
	}
	if n := strings.Count(string(res.Body), "<conversation_summary>"); n != 1 {
		tb.Fatalf("%d summary blocks", n)
	}
	if n, err := p.Counter().CountRequest(chatFormat, res.Body); err != nil || n != res.TokensAfter {
		tb.Fatalf("TokensAfter %d, CountRequest(out) %d (%v)", res.TokensAfter, n, err)
	}
	ri, _ := parseRequest(in)
	ro, _ := parseRequest(res.Body)
	if string(in[:ri.array.start]) != string(res.Body[:ro.array.start]) || string(in[ri.array.end:]) != string(res.Body[ro.array.end:]) {
		tb.Fatal("bytes outside the messages array changed")
	}
	inMsgs, out := rawMessages(tb, in), rawMessages(tb, res.Body)
	lead, from := res.Lead, res.Lead+res.Covered
	block := compactor.Block(b.Summary, b.Kept.Note)
	for i := 0; i < lead-1; i++ {
		if out[i] != inMsgs[i] {
			tb.Fatalf("leading message %d changed", i)
		}
	}
	// The output's leading system messages: the client's, maybe one new.
	k := 0
	for k < len(out) && gjson.Get(out[k], "role").Str == "system" || k < lead {
		k++
	}
	sysText := ""
	for i := range k {
		sysText += contentText(gjson.Get(out[i], "content"))
	}
	user := opts.Placement == PlacementUser || opts.Placement != PlacementSystem && lead == 0
	var userText []string
	if opts.ConciseOutput && lead == 0 && user {
		userText = append(userText, ConciseInstruction)
	} else if opts.ConciseOutput != strings.Contains(sysText, ConciseInstruction) {
		tb.Fatalf("ConciseOutput %v, instruction in the prompt %v", opts.ConciseOutput, !opts.ConciseOutput)
	}
	if user {
		userText = append(userText, block)
		if strings.Contains(sysText, "<conversation_summary>") {
			tb.Fatal("block in the system prompt with the user placement")
		}
		if lead == 0 && k > 0 {
			tb.Fatal("a system message added to a request without one")
		}
	} else if !strings.HasSuffix(sysText, block) {
		tb.Fatalf("system prompt does not end with the block: %.300q", sysText)
	}
	msgs := rolesOf(inMsgs)
	text := strings.Join(userText, "\n\n")
	u := -1 // the re-sent ask: the latest covered one, unless a user message is kept first
	if from >= len(msgs) || msgs[from].Role != wire.RoleUser {
		u = compactor.LatestUserIn(msgs[:from], lead, from)
	}
	switch {
	case text == "":
	case u >= 0:
		checkMerged(tb, out[k], inMsgs[u], text)
		k++
	case msgs[from].Role == wire.RoleUser:
		checkMerged(tb, out[k], inMsgs[from], text)
		k, from = k+1, from+1
	default:
		if want := string(textMessage("user", text)); out[k] != want {
			tb.Fatalf("message %d is not the additions as a user message: %.200s", k, out[k])
		}
		k++
	}
	if text == "" && u >= 0 {
		if out[k] != inMsgs[u] {
			tb.Fatalf("latest user message %d not re-sent verbatim after the block: %.200s", u, out[k])
		}
		k++
	}
	if got, want := out[k:], inMsgs[from:]; strings.Join(got, "\n") != strings.Join(want, "\n") {
		tb.Fatalf("the messages after the coverage differ: %d out, %d in", len(got), len(want))
	}
}

// checkMerged checks that got is the user message orig with text at the
// head of its content: before a string after a blank line, as a first text
// part of an array, as the whole of an empty content; every other byte of
// orig as sent.
func checkMerged(tb testing.TB, got, orig, text string) {
	tb.Helper()
	g, o := parseMessage([]byte(got), 0), parseMessage([]byte(orig), 0)
	if g.role != "user" || !g.content.exists() {
		tb.Fatalf("not a user message with a content: %.200s", got)
	}
	gc, oc := g.result(g.content), o.result(o.content)
	switch {
	case oc.IsArray():
		parts := gc.Array()
		if len(parts) == 0 || parts[0].Get("type").Str != "text" || parts[0].Get("text").Str != text {
			tb.Fatalf("the additions are not the first text part: %.200s", got)
		}
		var rest []string
		for _, pt := range parts[1:] {
			rest = append(rest, pt.Raw)
		}
		var want []string
		for _, pt := range oc.Array() {
			want = append(want, pt.Raw)
		}
		if strings.Join(rest, ",") != strings.Join(want, ",") {
			tb.Fatalf("the client's parts changed: %.200s", got)
		}
	case oc.Type == gjson.String && oc.Str != "":
		if gc.Str != text+"\n\n"+oc.Str {
			tb.Fatalf("content is not the additions, a blank line, the client's text: %.300q", gc.Str)
		}
	default:
		if gc.Str != text {
			tb.Fatalf("empty content is not the additions: %.200q", gc.Str)
		}
	}
	if o.content.exists() && (got[:g.content.start] != orig[:o.content.start] || got[g.content.end:] != orig[o.content.end:]) {
		tb.Fatalf("the message changed outside its content:\n got %.200s\nwant %.200s", got, orig)
	}
}

// The lead shapes a summary block (and the concise instruction) can be
// added to, with both placements.
func TestApplySummary(t *testing.T) {
	leads := []struct {
		name string
		msgs []string
	}{
		{"string system", []string{`{"role":"system","content":"You are a coding agent."}`}},
		{"developer then system", []string{`{"role":"developer","content":"be careful"}`, `{ "content" : "You are a coding agent." , "role" : "system" }`}},
		{"parts", []string{`{"role":"system","content":[{"type":"text","text":"You are a coding agent.","cache_control":{"type":"ephemeral"}}]}`}},
		{"empty parts", []string{`{"role":"system","content":[ ]}`}},
		{"null content", []string{`{"role":"system","content":null}`}},
		{"absent content", []string{`{"role":"system","name":"x"}`}},
		{"empty string", []string{`{"role":"system","content":""}`}},
		{"odd content", []string{`{"role":"system","content":42}`}},
		{"no system message", nil},
	}
	for _, l := range leads {
		for _, opts := range []Options{{}, {Placement: PlacementUser}, {ConciseOutput: true}, {Placement: PlacementUser, ConciseOutput: true}} {
			name := l.name + "/" + opts.Placement
			if opts.ConciseOutput {
				name += "/concise"
			}
			t.Run(name, func(t *testing.T) {
				p := New(Config{Format: chatFormat})
				msgs := append(append([]string{}, l.msgs...), agentTurns(8)...)
				body := []byte(`{"model":"gpt-4o", "messages": [` + strings.Join(msgs, ", ") + `] ,"tools":[{"type":"function","function":{"name":"bash"}}],"x":1}`)
				for _, keep := range []int{3, 12} {
					b, c := proposeBranch(t, p, body, opts, keep, 0)
					if c.From != len(l.msgs) || c.Covered != c.Cut-len(l.msgs) || c.PrevSummary != "" {
						t.Fatalf("%+v", c)
					}
					o := opts
					o.Branches = []history.Branch{b}
					res := p.RewriteWith(body, o)
					checkApplied(t, p, body, res, o, b)
					if got := c.KeptTokens + res.SummaryTokens(b.Summary, ""); got != res.TokensAfter {
						t.Errorf("KeptTokens %d + SummaryTokens %d = %d, TokensAfter %d", c.KeptTokens, res.SummaryTokens(b.Summary, ""), got, res.TokensAfter)
					}
					if again := p.RewriteWith(body, o); !bytes.Equal(again.Body, res.Body) {
						t.Error("not deterministic")
					}
				}
			})
		}
	}
}

// The block is appended to the client's system prompt exactly: its bytes
// up to the closing quote are kept, the additions follow a blank line.
func TestApplySummaryExactBytes(t *testing.T) {
	p := New(Config{Format: chatFormat})
	body := chat("gpt-4o", append([]string{`{"role":"system","content":"Be \u00e9xact."}`}, agentTurns(4)...)...)
	b, _ := proposeBranch(t, p, body, Options{}, 3, 0)
	res := p.RewriteWith(body, Options{Branches: []history.Branch{b}, ConciseOutput: true})
	add := wire.AppendJSONString(nil, "\n\n"+ConciseInstruction+"\n\n"+compactor.Block(b.Summary, ""))
	want := `{"role":"system","content":"Be \u00e9xact.` + string(add[1:]) + `}`
	if got := rawMessages(t, res.Body)[0]; got != want {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Errorf("system message differs at byte %d:\n got %.200s\nwant %.200s", i, got[i:], want[i:])
	}
	if contentOf(res.Body, 1) != "Also run go vet." {
		t.Errorf("the covered latest ask is not re-sent after the system message: %s", rawMessages(t, res.Body)[1])
	}
}

// The longest matching branch wins; branches of another history, of a
// different length or too long for the request are ignored.
func TestApplyLongestMatchingBranch(t *testing.T) {
	p := New(Config{Format: chatFormat})
	msgs := append([]string{`{"role":"system","content":"agent"}`}, agentTurns(10)...)
	body := chat("gpt-4o", msgs...)
	short, _ := proposeBranch(t, p, body, Options{}, 16, 0)
	long, _ := proposeBranch(t, p, body, Options{}, 4, 0)
	other := history.Branch{Summary: "other", Covered: long.Covered, Hash: short.Hash}
	tooLong := history.Branch{Summary: "too long", Covered: len(msgs), Hash: long.Hash}
	res := p.RewriteWith(body, Options{Branches: []history.Branch{tooLong, short, other, long, {Summary: "zero"}}})
	if res.Applied != 3 || res.Covered != long.Covered || res.SummaryMiss {
		t.Fatalf("Applied %d Covered %d Miss %v", res.Applied, res.Covered, res.SummaryMiss)
	}
	if !strings.Contains(string(res.Body), "messages 1 to "+itoa(1+long.Covered)) {
		t.Error("not the long branch's summary")
	}
	// Then the next compaction extends it.
	c, ok := res.Compaction(2, 0)
	if !ok || c.From != 1+long.Covered || c.PrevSummary != long.Summary || c.Parent != long.Hash || c.Covered <= long.Covered {
		t.Fatalf("%v %+v", ok, c)
	}
}

// The chain hash is of the messages as the client means them: re-serialised
// with other key order, spacing or escapes, they still match; an edit to a
// covered message does not, and the body is then as without summaries.
func TestBranchMatchesContentNotBytes(t *testing.T) {
	p := New(Config{Format: chatFormat})
	msgs := append([]string{`{"role":"system","content":"agent"}`}, agentTurns(6)...)
	body := chat("gpt-4o", msgs...)
	b, c := proposeBranch(t, p, body, Options{}, 3, 0)
	raw := make([][]byte, 0, c.Covered)
	for _, m := range msgs[1 : 1+c.Covered] {
		raw = append(raw, []byte(m))
	}
	if chainHashOf(raw) != b.Hash {
		t.Fatal("chainHashOf disagrees with Compaction.Hash")
	}

	reser := append([]string{}, msgs...)
	reser[1] = `{ "content" : "Fix the failing parser t\u0065st.",` + "\n" + ` "role" : "user" }`
	res := p.RewriteWith(chat("gpt-4o", reser...), Options{Branches: []history.Branch{b}})
	if res.Applied != 0 {
		t.Error("a re-serialised message does not match")
	}

	edited := append([]string{}, msgs...)
	edited[1] = `{"role":"user","content":"Fix the failing lexer test."}`
	ebody := chat("gpt-4o", edited...)
	res = p.RewriteWith(ebody, Options{Branches: []history.Branch{b}})
	if res.Applied != -1 || !res.SummaryMiss || res.Covered != 0 {
		t.Fatalf("edited history: Applied %d Miss %v", res.Applied, res.SummaryMiss)
	}
	if plain := p.RewriteWith(ebody, Options{}); !bytes.Equal(plain.Body, res.Body) || plain.SummaryMiss {
		t.Error("a miss changes the body, or SummaryMiss without branches")
	}
}

// Turn N's output is a byte-identical prefix of turn N+1's with the same
// branch applied, a new user message in the tail included.
func TestApplySummaryPrefixStability(t *testing.T) {
	msgs := append([]string{`{"role":"system","content":"agent"}`}, agentTurns(12)...)
	for _, opts := range []Options{{}, {Placement: PlacementUser, ConciseOutput: true}} {
		p := New(Config{Format: chatFormat, Squasher: squashWith(truncSquash), Dedup: DefaultDedupConfig()})
		b, c := proposeBranch(t, p, chat("gpt-4o", msgs[:16]...), opts, 4, 0)
		opts.Branches = []history.Branch{b}
		var prev []string
		for k := c.Cut + 1; k <= len(msgs); k++ {
			res := p.RewriteWith(chat("gpt-4o", msgs[:k]...), opts)
			if res.Applied != 0 {
				t.Fatalf("turn %d: not applied", k)
			}
			cur := rawMessages(t, res.Body)
			if strings.Join(cur[:len(prev)], "\n") != strings.Join(prev, "\n") {
				t.Fatalf("turn %d does not extend turn %d", k, k-1)
			}
			prev = cur
		}
	}
}

func TestCompactCommand(t *testing.T) {
	p := New(Config{Format: chatFormat})
	msgs := append([]string{`{"role":"system","content":"agent"}`}, agentTurns(6)...)
	cmd := append(append([]string{}, msgs...), `{"role":"user","content":[{"type":"text","text":" /compact\n"}]}`)
	body := chat("gpt-4o", cmd...)
	if res := p.RewriteWith(body, Options{}); res.CompactCommand {
		t.Error("a command without ForceCommand")
	}
	res := p.RewriteWith(body, Options{ForceCommand: true})
	if !res.CompactCommand {
		t.Fatal("command not seen")
	}
	c, ok := res.Compaction(1, 0)
	want, _ := p.RewriteWith(chat("gpt-4o", msgs...), Options{}).Compaction(1, 0)
	if !ok || c.Cut != want.Cut || c.Hash != want.Hash || c.KeptTokens != want.KeptTokens {
		t.Errorf("plan with the command %+v, without %+v", c, want)
	}
	if c.LatestUserAsk != "Also run go vet." {
		t.Errorf("LatestUserAsk = %q", c.LatestUserAsk)
	}
	if len(c.Messages) != len(cmd) {
		t.Errorf("%d messages", len(c.Messages))
	}
	for _, text := range []string{"/compact please", "compact"} {
		b := chat("gpt-4o", append(append([]string{}, msgs...), `{"role":"user","content":"`+text+`"}`)...)
		if p.RewriteWith(b, Options{ForceCommand: true}).CompactCommand {
			t.Errorf("%q is a command", text)
		}
	}
}

// The proposal's messages are what the compactor needs: texts as
// forwarded (squashed), tool calls with their names and arguments, and
// the transcript reads them.
func TestCompactionMessages(t *testing.T) {
	long := strings.Repeat("line of build output with some words in it\n", 60)
	body := chat("gpt-4o",
		`{"role":"system","content":"agent"}`,
		`{"role":"user","content":[{"type":"text","text":"build"},{"type":"image_url","image_url":{"url":"x"}}]}`,
		callMsg("c1", "bash", jsonString(`{"command":"make"}`)), resultMsg("c1", long),
		`{"role":"assistant","content":"built"}`, `{"role":"user","content":"thanks"}`, `{"role":"assistant","content":"ok"}`)
	p := New(Config{Format: chatFormat, Squasher: squashWith(truncSquash)})
	res := p.RewriteWith(body, Options{})
	c, ok := res.Compaction(2, 0)
	if !ok || c.From != 1 || c.Cut != 5 || c.Covered != 4 {
		t.Fatalf("%v %+v", ok, c)
	}
	m := c.Messages
	if m[1].Text != "build" || m[3].Text != truncSquash(ToolCall{Name: "bash"}, long) || m[3].ToolCallID != "c1" {
		t.Errorf("texts: %q / %.80q", m[1].Text, m[3].Text)
	}
	if tc := m[2].ToolCalls; len(tc) != 1 || tc[0] != (compactor.ToolCall{ID: "c1", Name: "bash", Arguments: `{"command":"make"}`}) {
		t.Errorf("tool calls %+v", tc)
	}
	tr := compactor.Transcript(m[c.From:c.Cut], 0)
	if !strings.Contains(tr, "[Tool calls: bash({\"command\":\"make\"})]") || !strings.Contains(tr, "[TOOL RESULT c1]:") {
		t.Errorf("transcript:\n%s", tr)
	}
	var sum int
	for i := c.From; i < c.Cut; i++ {
		sum += res.view.fwd[i]
	}
	if c.SummarisedTokens != sum || c.SummarisedTokens <= 0 || c.LatestUserAsk != "thanks" {
		t.Errorf("%+v", c)
	}
	if _, ok := res.Compaction(10, 0); ok {
		t.Error("a compaction of nothing")
	}
	if _, ok := (Result{}).Compaction(1, 0); ok || (Result{}).SummaryTokens("x", "") != 0 {
		t.Error("zero Result")
	}
}

func TestMaxHistoryMessages(t *testing.T) {
	p := New(Config{Format: chatFormat})
	msgs := append([]string{`{"role":"system","content":"agent"}`}, agentTurns(8)...)
	body := chat("gpt-4o", msgs...)
	for _, n := range []int{1, 2, 3, 4, 7, 100} {
		res := p.RewriteWith(body, Options{MaxHistoryMessages: n})
		out := rawMessages(t, res.Body)
		if err := chatcheck.ValidateChat(res.Body); err != nil {
			t.Fatalf("N=%d: %v", n, err)
		}
		if tok, _ := p.Counter().CountRequest(chatFormat, res.Body); tok != res.TokensAfter {
			t.Errorf("N=%d: TokensAfter %d, counted %d", n, res.TokensAfter, tok)
		}
		if n >= len(msgs)-1 {
			if res.Changed || res.Trimmed != 0 {
				t.Errorf("N=%d: trimmed a short history", n)
			}
			continue
		}
		if out[0] != msgs[0] {
			t.Errorf("N=%d: system message changed", n)
		}
		// out is the system message, maybe the last user message before
		// the cut re-sent (when the tail does not start with one), and a
		// tail of msgs of at most n messages (about n/2 after a trim).
		resent := 0
		if strings.Join(out[1:], ",") != strings.Join(msgs[len(msgs)-(len(out)-1):], ",") {
			resent = 1
		}
		kept := len(out) - 1 - resent
		cut := len(msgs) - kept
		// A call and its result are never split: a tail of one message
		// would be an orphan result.
		if kept < 1 || kept > max(n, 2) || res.Trimmed != cut-1-resent || strings.Join(out[1+resent:], ",") != strings.Join(msgs[cut:], ",") {
			t.Errorf("N=%d: kept %d, Trimmed %d, out %d", n, kept, res.Trimmed, len(out))
		}
		if first := gjson.Get(msgs[cut], "role").Str; (resent == 1) != (first != "user") {
			t.Errorf("N=%d: first kept message is a %s, re-sent %d", n, first, resent)
		}
		if resent == 1 {
			last := 0
			for i := 1; i < cut; i++ {
				if gjson.Get(msgs[i], "role").Str == "user" {
					last = i
				}
			}
			if out[1] != msgs[last] {
				t.Errorf("N=%d: message 1 is not the last user message before the cut", n)
			}
		}
	}
	// A summary applied wins over the limit.
	b, _ := proposeBranch(t, p, body, Options{}, 6, 0)
	if res := p.RewriteWith(body, Options{Branches: []history.Branch{b}, MaxHistoryMessages: 2}); res.Applied != 0 || res.Trimmed != 0 {
		t.Errorf("Applied %d Trimmed %d", res.Applied, res.Trimmed)
	}
}

// The concise instruction goes into the client's system prompt; without
// one, a new system message only with PlacementSystem, else the head of
// the first user message.
func TestConciseOutput(t *testing.T) {
	p := New(Config{Format: chatFormat})
	instr := jsonString(ConciseInstruction)
	tests := []struct {
		placement string
		in, want  string
	}{
		{PlacementSystem, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"gpt-4o","messages":[{"role":"system","content":` + instr + `},{"role":"user","content":"hi"}]}`},
		{PlacementSystem, `{"model":"gpt-4o","messages":[ ]}`,
			`{"model":"gpt-4o","messages":[{"role":"system","content":` + instr + `} ]}`},
		{PlacementAuto, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"gpt-4o","messages":[{"role":"user","content":` + jsonString(ConciseInstruction+"\n\nhi") + `}]}`},
		{PlacementAuto, `{"model":"gpt-4o","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}`,
			`{"model":"gpt-4o","messages":[{"role":"system","content":` + jsonString("s\n\n"+ConciseInstruction) + `},{"role":"user","content":"hi"}]}`},
		{PlacementUser, `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
			`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":` + instr + `},{"type":"text","text":"hi"}]}]}`},
	}
	for _, tc := range tests {
		res := p.RewriteWith([]byte(tc.in), Options{ConciseOutput: true, Placement: tc.placement})
		if string(res.Body) != tc.want {
			t.Errorf("%s %s:\n got %s\nwant %s", tc.placement, tc.in, res.Body, tc.want)
		}
		if n, err := p.Counter().CountRequest(chatFormat, res.Body); err == nil && (n != res.TokensAfter || res.TokensAfter <= res.TokensBefore) {
			t.Errorf("%s %s: tokens %d -> %d, counted %d", tc.placement, tc.in, res.TokensBefore, res.TokensAfter, n)
		}
	}
}

// A Result is read-only after RewriteWith: its methods may run
// concurrently (under -race).
func TestResultConcurrentUse(t *testing.T) {
	p := New(Config{Format: chatFormat})
	body := chat("gpt-4o", append([]string{`{"role":"system","content":"agent"}`}, agentTurns(10)...)...)
	b, _ := proposeBranch(t, p, body, Options{}, 10, 0)
	res := p.RewriteWith(body, Options{Branches: []history.Branch{b}})
	want, _ := res.Compaction(2, 0)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _ := res.Compaction(2, 0)
			if c.Hash != want.Hash || res.SummaryTokens("s", "") <= 0 {
				t.Error("concurrent Compaction differs")
			}
		}()
	}
	wg.Wait()
}

// Regression: a client that moves its cache_control breakpoint from one
// message to a newer one every turn still matches its stored summary.
func TestChainIgnoresMovingCacheControl(t *testing.T) {
	with := `{"role":"user","content":[{"type":"text","text":"Fix the parser.","cache_control":{"type":"ephemeral"}}]}`
	without := `{"role":"user","content":[{"type":"text","text":"Fix the parser."}]}`
	if canonicalDigest([]byte(with)) != canonicalDigest([]byte(without)) {
		t.Fatal("a moved cache_control marker changes the chain")
	}
	if canonicalDigest([]byte(without)) == canonicalDigest([]byte(`{"role":"user","content":[{"type":"text","text":"Fix the lexer."}]}`)) {
		t.Fatal("different content, same digest")
	}
}

// TestCompactCommandBesideClientReminders: qwen-code sends what the user
// typed as the last text part of a message that opens with its own
// <system-reminder> parts (the skills list, the date); "/compact" typed
// there went upstream as a prompt. Rows read: content → is it a command.
func TestCompactCommandBesideClientReminders(t *testing.T) {
	reminder := `{"type":"text","text":"<system-reminder>\nThe following skills are available: ` + strings.Repeat("batch, review, ", 60) + `\n</system-reminder>"}`
	date := `{"type":"text","text":"<system-reminder>\nThe current date is: Tuesday.\n</system-reminder>"}`
	cases := []struct {
		content string
		command bool
	}{
		{`"/compact"`, true},
		{`[` + reminder + `,` + date + `,{"type":"text","text":"/compact"}]`, true},
		{`[{"type":"text","text":"/compact"},` + date + `]`, true},
		{`[` + reminder + `,{"type":"text","text":"/compact please"}]`, false},
		{`[` + reminder + `,{"type":"text","text":"look at a.py"},{"type":"text","text":"/compact"}]`, false},
		{`[` + reminder + `]`, false},
		{`[{"type":"text","text":"/compact"},{"type":"text","text":"/compact"}]`, false},
		{`[{"type":"image_url","image_url":{"url":"data:x"}},{"type":"text","text":"/compact"}]`, false},
		{`"` + strings.Repeat("x", 600) + ` /compact"`, false},
	}
	p := New(Config{Format: chatFormat})
	msgs := append([]string{`{"role":"system","content":"agent"}`}, agentTurns(6)...)
	for _, c := range cases {
		body := chat("gpt-4o", append(append([]string{}, msgs...), `{"role":"user","content":`+c.content+`}`)...)
		if got := p.RewriteWith(body, Options{ForceCommand: true}).CompactCommand; got != c.command {
			t.Errorf("%.120s: command = %v, want %v", c.content, got, c.command)
		}
	}
}
