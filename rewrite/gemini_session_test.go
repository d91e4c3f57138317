package rewrite

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/gemini"
	"github.com/tidwall/gjson"
)

// geminiSession plays a Gemini 3 agent through the pipeline: every model
// content signed as Google signs it (a thought, the first call of each
// step, a final text), each signature minted over the request the
// "upstream" read. It checks every forwarded request as Google would:
// calls answered name for name by the next content, the current turn's
// steps signed, and every signature the model minted sent over the prefix
// it was minted over (a summary or cut may give it the dummy instead),
// but, with loopRebound, those of the tool loop a compaction kept.
type geminiSession struct {
	t           *testing.T
	loopRebound bool
	rebound     map[string]bool // the loop's signatures a compaction kept
	p           *Pipeline
	cfg         Config
	opts        Options
	msgs        []string
	minted      map[string]string // signature → the prefix it was minted over
	bodies      [][]byte
	results     []Result
}

func newGeminiSession(t *testing.T, cfg Config) *geminiSession {
	cfg.Format = gemini.Format{Model: "gemini-3-pro-preview"}
	return &geminiSession{t: t, p: New(cfg), cfg: cfg, minted: map[string]string{}}
}

const geminiTop = `"systemInstruction":{"parts":[{"text":"You are a coding agent."}]},` +
	`"tools":[{"functionDeclarations":[{"name":"read_file"},{"name":"run"}]}],` +
	`"generationConfig":{"thinkingConfig":{"includeThoughts":true}}}`

func (s *geminiSession) body() []byte {
	return []byte(`{"contents":[` + strings.Join(s.msgs, ",") + `],` + geminiTop)
}

// prefix is what a model content at index m of body is bound to: the
// system instruction and the contents before it.
func prefix(body []byte, m int) string {
	var b strings.Builder
	b.WriteString(gjson.GetBytes(body, "systemInstruction").Raw)
	for i, c := range gjson.GetBytes(body, "contents").Array() {
		if i >= m {
			break
		}
		b.WriteString(c.Raw)
	}
	return b.String()
}

// check returns what Google, and the binding the issue asks for, refuse.
func (s *geminiSession) check(body []byte) error {
	contents := gjson.GetBytes(body, "contents").Array()
	turn := 0
	for i, c := range contents {
		if c.Get("role").Str == "user" && c.Get(`parts.#(text)`).Exists() {
			turn = i
		}
	}
	for i, c := range contents {
		if c.Get("role").Str != "model" {
			continue
		}
		calls := map[string]int{}
		for k, p := range c.Get("parts").Array() {
			if sig := p.Get("thoughtSignature").Str; sig != "" && sig != gemini.DummySignature && s.minted[sig] != prefix(body, i) && !s.rebound[sig] {
				return fmt.Errorf("content %d part %d: signature %s sent over another prefix than it was minted over", i, k, sig)
			}
			if fc := p.Get("functionCall"); fc.Exists() {
				if len(calls) == 0 && i > turn && !p.Get("thoughtSignature").Exists() {
					return fmt.Errorf("function call `%s` in content %d is missing a thought_signature", fc.Get("name").Str, i+1)
				}
				calls[fc.Get("name").Str]++
			}
		}
		if len(calls) > 0 && i+1 < len(contents) {
			for _, p := range contents[i+1].Get("parts").Array() {
				calls[p.Get("functionResponse.name").Str]--
			}
			for name, n := range calls {
				if n != 0 {
					return fmt.Errorf("content %d: %d calls of %s unanswered", i+1, n, name)
				}
			}
		}
	}
	return nil
}

// rebind notes the signatures of the current turn's tool loop that body,
// a compaction's request, sends over a prefix they were not minted over.
func (s *geminiSession) rebind(body []byte) {
	contents := gjson.GetBytes(body, "contents").Array()
	s.rebound = map[string]bool{}
	for i := len(contents) - 1; i >= 0 && !(contents[i].Get("role").Str == "user" && contents[i].Get(`parts.#(text)`).Exists()); i-- {
		for _, p := range contents[i].Get("parts").Array() {
			if sig := p.Get("thoughtSignature").Str; sig != "" && s.minted[sig] != prefix(body, i) {
				s.rebound[sig] = true
			}
		}
	}
}

// request forwards the client's request, compacted first when compact.
func (s *geminiSession) request(compact bool, keepRecent int) []byte {
	s.t.Helper()
	in := s.body()
	if n := len(s.results); n > 0 {
		s.opts.PrevDedups, s.opts.PrevPrunes = s.results[n-1].Dedups, s.results[n-1].Prunes
	}
	res := s.p.RewriteWith(in, s.opts)
	if compact {
		c, ok := res.Compaction(keepRecent, 0)
		if !ok {
			s.t.Fatalf("request %d: nothing to compact", len(s.results)+1)
		}
		s.opts.Branches = append(s.opts.Branches, history.Branch{Summary: fmt.Sprintf("## Active Task\nsummary %d", len(s.opts.Branches)+1),
			Covered: c.Covered, Hash: c.Hash, Since: c.Since})
		if res = s.p.RewriteWith(in, s.opts); res.Applied != len(s.opts.Branches)-1 {
			s.t.Fatalf("request %d: the summary is not applied", len(s.results)+1)
		}
		if s.loopRebound {
			s.rebind(res.Body)
		}
	}
	if again := New(s.cfg).RewriteWith(in, s.opts); string(again.Body) != string(res.Body) {
		s.t.Fatalf("request %d: a restarted pipeline forwards other bytes", len(s.results)+1)
	}
	if err := s.check(res.Body); err != nil {
		s.t.Fatalf("request %d refused: %v\n%s", len(s.results)+1, err, res.Body)
	}
	if n, err := s.p.Counter().CountRequest(s.cfg.Format, res.Body); err != nil || n != res.TokensAfter {
		s.t.Fatalf("request %d: TokensAfter %d, the body counts %d (%v)", len(s.results)+1, res.TokensAfter, n, err)
	}
	s.bodies = append(s.bodies, res.Body)
	s.results = append(s.results, res)
	return res.Body
}

// reply appends the model's answer to the forwarded request fwd: a signed
// thought and calls of tools (the first signed) with their responses, or a
// signed text and the next ask.
func (s *geminiSession) reply(fwd []byte, calls []string, text, ask string) {
	n := len(gjson.GetBytes(fwd, "contents").Array())
	sig := func(k int) string {
		v := fmt.Sprintf("sig-%d-%d", len(s.bodies), k)
		s.minted[v] = prefix(fwd, n)
		return v
	}
	if len(calls) == 0 {
		s.msgs = append(s.msgs, fmt.Sprintf(`{"role":"model","parts":[{"text":%s,"thoughtSignature":%q}]}`, wire.AppendJSONString(nil, text), sig(0)))
		s.msgs = append(s.msgs, `{"role":"user","parts":[{"text":`+string(wire.AppendJSONString(nil, ask))+`}]}`)
		return
	}
	parts := []string{fmt.Sprintf(`{"text":"planning","thought":true,"thoughtSignature":%q}`, sig(0))}
	var responses []string
	for k, c := range calls {
		name, arg, _ := strings.Cut(c, " ")
		p := fmt.Sprintf(`{"functionCall":{"name":%q,"args":{"arg":%q}}`, name, arg)
		if k == 0 {
			p += fmt.Sprintf(`,"thoughtSignature":%q`, sig(1))
		}
		parts = append(parts, p+"}")
		out := strings.Repeat(fmt.Sprintf("line of %s %s\n", name, arg), 60)
		responses = append(responses, fmt.Sprintf(`{"functionResponse":{"name":%q,"response":{"output":%s}}}`, name, wire.AppendJSONString(nil, out)))
	}
	s.msgs = append(s.msgs, `{"role":"model","parts":[`+strings.Join(parts, ",")+`]}`, `{"role":"user","parts":[`+strings.Join(responses, ",")+`]}`)
}

// TestGeminiSessionCompactedAtANewUserTurn: a Gemini 3 tool session
// compacted at a new user turn, then continued with tool loops and a
// repeated read: every request is one Google takes, no signature is sent
// over a prefix it was not minted over (the kept turns' signed parts carry
// the dummy, their thoughts left out), and every rewrite is sticky: the
// repeated read is stubbed, pointing to the earlier call by the CallID
// its order and name give it, and the earlier result is sent as it was.
func TestGeminiSessionCompactedAtANewUserTurn(t *testing.T) {
	s := newGeminiSession(t, Config{Squash: &squash.Config{}, Dedup: DefaultDedupConfig()})
	s.play(3)
	at := s.results[3]
	if at.ThinkingLeftOut == 0 || at.DropMismatched || !strings.Contains(string(s.bodies[3]), gemini.DummySignature) {
		t.Fatalf("at the compaction: %d left out, drop %v\n%s", at.ThinkingLeftOut, at.DropMismatched, s.bodies[3])
	}
	last := string(s.bodies[len(s.bodies)-1])
	if n := strings.Count(last, "[duplicate result"); n != 1 || !strings.Contains(last, "call read_file#1 above") {
		t.Errorf("%d repeats stubbed:\n%s", n, last)
	}
	s.sticky(4)
}

// TestGeminiSessionCompactedInsideAToolLoop: compacted inside a tool
// loop, the loop's contents keep the signatures the model minted (Google
// validates their presence and integrity, not the prefix: Gemini CLI
// itself sends them after compressing the history before them; the API
// has nothing like Anthropic's drop_block, and the dummy would take the
// model's thoughts from it mid-loop). Every request is one Google takes, and every rewrite is sticky.
func TestGeminiSessionCompactedInsideAToolLoop(t *testing.T) {
	s := newGeminiSession(t, Config{Squash: &squash.Config{}, Dedup: DefaultDedupConfig()})
	s.loopRebound = true
	s.play(4)
	if at := s.results[4]; !at.DropMismatched || len(s.rebound) == 0 {
		t.Fatalf("at the compaction: drop %v, %d signatures of the loop kept\n%s", at.DropMismatched, len(s.rebound), s.bodies[4])
	}
	s.sticky(5)
}

// play runs the session's script, compacted (keeping 2 contents raw)
// before step compactAt.
func (s *geminiSession) play(compactAt int) {
	s.msgs = []string{`{"role":"user","parts":[{"text":"fix the build"}]}`}
	script := []struct {
		calls     []string
		text, ask string
	}{
		{calls: []string{"read_file a.go", "read_file b.go"}},
		{calls: []string{"run build"}},
		{text: "Fixed.", ask: "now the tests"},
		{calls: []string{"run test"}},
		{text: "They pass.", ask: "and the docs"},
		{calls: []string{"read_file a.go"}}, // a repeat of an earlier read
		{calls: []string{"read_file c.md", "read_file d.md"}},
		{calls: []string{"read_file c.md"}}, // a repeat within the kept history
		{text: "Done.", ask: "thanks"},
	}
	for k, st := range script {
		fwd := s.request(k == compactAt, 2)
		s.reply(fwd, st.calls, st.text, st.ask)
	}
	s.request(false, 0)
}

// sticky checks that what a request forwarded of the history, the next
// one forwards alike, from request from on.
func (s *geminiSession) sticky(from int) {
	t := s.t
	for i := from; i < len(s.bodies); i++ {
		prev := gjson.GetBytes(s.bodies[i-1], "contents").Array()
		cur := gjson.GetBytes(s.bodies[i], "contents").Array()
		for j := range prev {
			if j >= len(cur) || cur[j].Raw != prev[j].Raw {
				t.Fatalf("request %d forwards content %d otherwise than request %d", i+1, j, i)
			}
		}
	}
}
