package rewrite

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/internal/messagestest"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/messages"
	"github.com/tidwall/gjson"
)

// A Claude Code session through a Pipeline, against an upstream that
// keeps a messagestest.Ledger: it signs each answer's thinking block over
// the request it answers, as api.anthropic.com does, and refuses what the
// API refuses (a thinking block whose prefix changed, a tool_result out of
// place, more than 4 markers, a modified latest thinking block).

// step is what the scripted upstream answers next: a tool call (Tool,
// Input) whose result the client sends back, or a final text followed by
// the user's next ask (Ask; "" ends the session).
type step struct {
	Tool, Input, Result string
	Parallel            *step // a second call in the same answer
	Text, Ask           string
}

// claudeSession is the client, the proxy's part and the upstream.
type claudeSession struct {
	t      testing.TB
	p      *Pipeline
	cfg    Config
	ledger *messagestest.Ledger
	head   []byte // the capture's body up to its messages array
	tail   []byte // and from its end
	msgs   []string
	opts   Options
	answer int
	// noSince stores branches without Since, as a proxy that does not
	// keep it (or a branch stored before it was kept) gives them.
	noSince bool

	// per forwarded request, in order
	forwarded []*messagestest.Request
	bodies    [][]byte
	results   []Result
	compacted []bool // a compaction's summary was applied for the first time
}

// newClaudeSession starts from Claude Code's first request (its opening
// user message and role:"system" message) with the pipeline config cfg.
func newClaudeSession(t testing.TB, cfg Config) *claudeSession {
	cfg.Format = messages.Format{}
	first := messagesCapture(t, "turn1")
	later := messagesCapture(t, "turn6")
	arr := gjson.GetBytes(first, "messages")
	s := &claudeSession{t: t, p: New(cfg), cfg: cfg, ledger: messagestest.NewLedger(),
		head: first[:arr.Index], tail: first[arr.Index+len(arr.Raw):]}
	// The opening as Claude Code sends it from the second turn on: the
	// system message's content a string, no marker on either.
	s.msgs = []string{gjson.GetBytes(first, "messages.0").Raw, gjson.GetBytes(later, "messages.1").Raw}
	return s
}

// body renders the client's request: the history, the newest block
// carrying Claude Code's moving marker (a string content becomes its text
// block to carry it).
func (s *claudeSession) body() []byte {
	msgs := append([]string(nil), s.msgs...)
	last := gjson.Parse(msgs[len(msgs)-1])
	content := last.Get("content")
	if content.Type == gjson.String {
		block := `[{"type":"text","text":` + string(wire.AppendJSONString(nil, content.Str)) + `,"cache_control":{"type":"ephemeral"}}]`
		msgs[len(msgs)-1] = msgs[len(msgs)-1][:content.Index] + block + msgs[len(msgs)-1][content.Index+len(content.Raw):]
	} else {
		blocks := content.Array()
		b := blocks[len(blocks)-1]
		end := b.Index + len(b.Raw) - 1
		msgs[len(msgs)-1] = msgs[len(msgs)-1][:end] + `,"cache_control":{"type":"ephemeral"}` + msgs[len(msgs)-1][end:]
	}
	out := append([]byte(nil), s.head...)
	out = append(out, '[')
	out = append(out, strings.Join(msgs, ",")...)
	out = append(out, ']')
	return append(out, s.tail...)
}

// request sends the client's request through the pipeline; with compact,
// the proxy compacts it first (keeping keepRecent messages raw) and
// forwards it with the new summary. It returns what the upstream read.
func (s *claudeSession) request(compact bool, keepRecent int) *messagestest.Request {
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
		sum := fmt.Sprintf("## Active Task\nsummary %d of messages %d to %d", len(s.opts.Branches)+1, c.From, c.Cut)
		b := history.Branch{Summary: sum, Covered: c.Covered, Hash: c.Hash, Since: c.Since}
		if s.noSince {
			b.Since = 0
		}
		s.opts.Branches = append(s.opts.Branches, b)
		res = s.p.RewriteWith(in, s.opts)
		if res.Applied != len(s.opts.Branches)-1 {
			s.t.Fatalf("request %d: the new summary is not applied (%d)", len(s.results)+1, res.Applied)
		}
	}
	// The same request after a restart: a new pipeline, no cache, the
	// stored branches and dedups only.
	if again := New(s.cfg).RewriteWith(in, s.opts); string(again.Body) != string(res.Body) {
		s.t.Fatalf("request %d: a restarted pipeline forwards other bytes", len(s.results)+1)
	}
	r, err := messagestest.Check(res.Body, messagestest.Options{Ledger: s.ledger})
	if err != nil {
		s.t.Fatalf("request %d refused: %v", len(s.results)+1, err)
	}
	if n, cerr := s.p.Counter().CountRequest(messages.Format{}, res.Body); cerr != nil || n != res.TokensAfter {
		s.t.Fatalf("request %d: TokensAfter %d, the forwarded body counts %d (%v)", len(s.results)+1, res.TokensAfter, n, cerr)
	}
	s.forwarded = append(s.forwarded, r)
	s.bodies = append(s.bodies, res.Body)
	s.results = append(s.results, res)
	s.compacted = append(s.compacted, compact)
	return r
}

// reply is the upstream's answer to r, as the client appends it: a
// thinking block signed over r (its text empty, as with display
// "omitted"), a text, and the step's calls; then the client's next
// message: the calls' results, or the next ask.
func (s *claudeSession) reply(r *messagestest.Request, st step) (done bool) {
	s.answer++
	ans := fmt.Sprintf("msg_%03d", s.answer)
	sig := s.ledger.Think(r, ans, "")
	blocks := []string{fmt.Sprintf(`{"type":"thinking","thinking":"","signature":%q}`, sig)}
	if st.Tool == "" {
		blocks = append(blocks, `{"type":"text","text":`+string(wire.AppendJSONString(nil, st.Text))+`}`)
		s.msgs = append(s.msgs, `{"role":"assistant","content":[`+strings.Join(blocks, ",")+`]}`)
		if st.Ask == "" {
			return true
		}
		s.msgs = append(s.msgs, `{"role":"user","content":`+string(wire.AppendJSONString(nil, st.Ask))+`}`)
		return false
	}
	blocks = append(blocks, fmt.Sprintf(`{"type":"text","text":"Running %s."}`, st.Tool))
	var results []string
	for i, c := 0, &st; c != nil; i, c = i+1, c.Parallel {
		id := fmt.Sprintf("toolu_%03d_%d", s.answer, i)
		s.ledger.ToolUse(ans, id)
		blocks = append(blocks, fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"input":%s}`, id, c.Tool, c.Input))
		results = append(results, fmt.Sprintf(`{"tool_use_id":%q,"type":"tool_result","content":%s,"is_error":false}`, id, wire.AppendJSONString(nil, c.Result)))
	}
	s.msgs = append(s.msgs, `{"role":"assistant","content":[`+strings.Join(blocks, ",")+`]}`,
		`{"role":"user","content":[`+strings.Join(results, ",")+`]}`)
	return false
}

// run plays script: before step k the client sends its request, compacted
// first when compactAt[k] (keeping keepRecent messages raw).
func (s *claudeSession) run(script []step, compactAt map[int]bool, keepRecent int) {
	s.t.Helper()
	for k, st := range script {
		r := s.request(compactAt[k], keepRecent)
		if s.reply(r, st) {
			return
		}
	}
}

// breaks returns the requests (indexes) whose prompt, as the upstream
// reads it (markers aside), does not extend the previous request's.
func (s *claudeSession) breaks() []int {
	var out []int
	for i := 1; i < len(s.forwarded); i++ {
		prev, cur := s.forwarded[i-1].Prompt.Segments, s.forwarded[i].Prompt.Segments
		if len(cur) < len(prev) {
			out = append(out, i)
			continue
		}
		for j := range prev {
			if string(prev[j]) != string(cur[j]) {
				out = append(out, i)
				break
			}
		}
	}
	return out
}
