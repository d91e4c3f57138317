// Command ctxpress-scripted is a scripted OpenAI-compatible upstream for
// trying real agent clients (opencode, qwen-code, codex ≤ 0.93) through
// ctxpress without a model: their system prompts alone outgrow a small
// local model's window, and a hosted one needs an account.
//
//	go run ./cmd/ctxpress-scripted -listen 127.0.0.1:0 -port-file /tmp/port \
//	    -record /tmp/rec -workdir /tmp/repo -tool-turns 6 \
//	    -step 'ls -la' -step 'cat a.py' -step 'read:b.py' -step 'grep -n def *.py'
//
// It serves POST {base}/chat/completions (whole JSON or SSE, with a usage
// chunk when stream_options.include_usage asks for one), POST
// {base}/responses (the Responses API: whole JSON or OpenAI's SSE events,
// see responses.go), POST {base}/messages (Anthropic's, messages.go), the
// Gemini API's {base}/v1beta/models/{model}:generateContent,
// :streamGenerateContent and :countTokens (gemini.go), and GET
// {base}/models, where {base} is any prefix (clients use .../v1).
//
// It is as strict as api.openai.com about what it refuses with a 400:
// roles, content shapes per role, tool_calls shapes, a tool message that
// answers no call of the assistant message before it, a call left without
// its result before the next other message (or at the end), stream_options
// without stream, tool names. What only strict chat templates refuse (a
// system message after the start, two user messages in a row, unknown
// message keys, arguments that are not JSON, a call id used twice) is
// recorded as a warning, and refused too with -strict.
//
// Script: every agent turn (a request that offers tools) of one ask (the
// last user message's text, a leading <conversation_summary> block left
// out, under the request's session header) gets a tool call for the next
// -step (several at once for a par: step), up to -tool-turns turns, then
// the -reply text. A step is a shell
// command run through the client's shell tool (bash, run_shell_command,
// shell, exec_command, ...; an argv for a schema that wants an array), or
// read:PATH through its read tool (a cat where it has none), or
// tool:NAME JSON, a call of the tool of that name (Claude Code's Agent, for
// a sub-agent; a client that offers no such tool gets the text reply); the
// arguments fill every property the tool's schema requires. A request
// without tools (a title, a side question) gets a one-line text; ctxpress's
// summary call gets a summary with every template section.
//
// Usage: prompt_tokens is the prompt's size in bytes / 4, where the prompt
// is the tools' and messages' raw bytes in order (what a provider prefills;
// field order in the body does not matter to it). cached_tokens is the
// longest common byte prefix with the previous request of the same stream
// (session header + kind: agent, side or summary) / 4: a prefix cache.
// With -context N a prompt over N tokens is refused with OpenAI's
// context_length_exceeded. On /responses the usage is input_tokens,
// input_tokens_details.cached_tokens, output_tokens and total_tokens, and
// a request is refused as api.openai.com refuses it (internal/responsestest,
// with the ledger of the reasoning items and responses this server issued);
// -cut-stream ends streamed answers without response.completed. A request
// ending in compaction_trigger (codex's remote compaction) gets one
// compaction item, which only this server can read back.
//
// Recording (-record DIR): each body as DIR/NNNN.json and one JSON line per
// request in DIR/requests.jsonl: kind, stream, status, error, warnings,
// prompt/cached tokens, the best prefix match over the last 64 requests of
// any stream, whether the prompt extends the stream's previous one byte for
// byte (and if not, the part it diverges in: 0 the tools, i message i-1),
// and the answer. GET /_scripted/stats sums them up.
//
// With -forward URL it is instead a recording pass-through (put it between
// a client and ctxpress): it records what the client sent, with the same
// prompt analysis (so the client's own prefix changes can be told from
// ctxpress's), and the X-Ctxpress-* headers of each answer.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ctxpress/ctxpress/internal/geminitest"
	"github.com/ctxpress/ctxpress/internal/responsestest"
)

type config struct {
	listen, portFile, record, workdir, reply string
	forward                                  string
	steps                                    []parStep
	toolTurns, context                       int
	strict, cutStream, geminiBindPrefix      bool
	sessionHeaders                           []string
}

type stepsFlag []parStep

func (s *stepsFlag) String() string { return fmt.Sprint(len(*s), " steps") }
func (s *stepsFlag) Set(v string) error {
	*s = append(*s, parseSteps(v))
	return nil
}

var defaultSteps = []string{"ls -la", "cat a.py", "grep -n def *.py", "read:b.py", "wc -l *.py", "cat b.py", "git log --oneline", "read:a.py"}

func main() {
	var c config
	var steps stepsFlag
	var headers string
	flag.StringVar(&c.listen, "listen", "127.0.0.1:0", "address to listen on")
	flag.StringVar(&c.portFile, "port-file", "", "write the address listened on to this file")
	flag.StringVar(&c.record, "record", "", "directory to record bodies and requests.jsonl in")
	flag.StringVar(&c.workdir, "workdir", "", "the client's working directory, to make read: paths absolute")
	flag.StringVar(&c.reply, "reply", "Done: I listed the files, read them and found the functions.", "the text after the tool turns")
	flag.Var(&steps, "step", "a tool turn: a shell command, sh:COMMAND, read:PATH, tool:NAME JSON, or par:STEP|||STEP for parallel calls (repeatable; default "+strings.Join(defaultSteps, ", ")+")")
	flag.IntVar(&c.toolTurns, "tool-turns", 6, "tool calls per ask before the text reply")
	flag.IntVar(&c.context, "context", 0, "refuse prompts over this many tokens as context_length_exceeded (0: no limit)")
	flag.StringVar(&c.forward, "forward", "", "record-only pass-through to this base (e.g. ctxpress's http://127.0.0.1:8484): see forward.go")
	flag.BoolVar(&c.strict, "strict", false, "refuse what only strict chat templates refuse too (see warnings)")
	flag.BoolVar(&c.geminiBindPrefix, "gemini-bind-prefix", false, "refuse a Gemini thought signature sent after another prompt than its answer was produced after (geminitest.Options.BindPrefix)")
	flag.BoolVar(&c.cutStream, "cut-stream", false, "end every streamed Responses answer without response.completed, as a dropped stream does")
	flag.StringVar(&headers, "session-headers", "x-session-id,session_id,session-id,thread-id,x-conversation-id,x-claude-code-session-id", "headers that name a conversation, first present wins")
	flag.Parse()
	c.steps = steps
	if len(c.steps) == 0 {
		for _, s := range defaultSteps {
			c.steps = append(c.steps, parseSteps(s))
		}
	}
	c.sessionHeaders = strings.Split(headers, ",")
	s, err := newServer(c)
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		log.Fatal(err)
	}
	if c.portFile != "" {
		if err := os.WriteFile(c.portFile, []byte(ln.Addr().String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("ctxpress-scripted: listening on http://%s/v1", ln.Addr())
	var h http.Handler = s
	if c.forward != "" {
		if h, err = newForwarder(c.forward, s); err != nil {
			log.Fatal(err)
		}
	}
	log.Fatal(http.Serve(ln, h))
}

// server is the scripted upstream.
type server struct {
	cfg config
	mu  sync.Mutex // guards all below
	n   int
	// last prompt per stream (session header + kind), the prefix cache
	last   map[string]prompt
	recent [][]byte       // the last 64 prompts, any stream
	steps  map[string]int // tool calls made per ask
	index  *os.File
	stats  map[string]*kindStats
	ledger *responsestest.Ledger // what the Responses side issued, to verify
	anth   *anthropicState       // the Messages format's state (messages.go)
	// geminiLedger holds the thought signatures the Gemini side issued
	// (gemini.go).
	geminiLedger *geminitest.Ledger
}

type kindStats struct {
	Requests      int `json:"requests"`
	Refused       int `json:"refused"`
	PromptTokens  int `json:"prompt_tokens"`
	CachedTokens  int `json:"cached_tokens"`
	WithPrevious  int `json:"with_previous"`   // requests whose stream had a previous one
	ExtendedPrev  int `json:"extended_prev"`   // ... and that extended it byte for byte
	WarnedRequest int `json:"warned_requests"` // accepted with a warning
}

func newServer(c config) (*server, error) {
	s := &server{cfg: c, last: map[string]prompt{}, steps: map[string]int{}, stats: map[string]*kindStats{},
		ledger: responsestest.NewLedger(), geminiLedger: geminitest.NewLedger()}
	if c.record != "" {
		if err := os.MkdirAll(c.record, 0o755); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(filepath.Join(c.record, "requests.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		s.index = f
	}
	return s, nil
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rt, ok := geminiRoute(r); ok {
		s.gemini(w, r, rt)
		return
	}
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		s.chat(w, r)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/responses"):
		s.responses(w, r)
	case r.Method == http.MethodPost && (strings.HasSuffix(r.URL.Path, "/messages") || strings.HasSuffix(r.URL.Path, "/messages/count_tokens")):
		s.messages(w, r)
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model","created":1715367049,"owned_by":"scripted"}]}`)
	case r.URL.Path == "/_scripted/stats":
		s.mu.Lock()
		b, _ := json.MarshalIndent(s.stats, "", "  ")
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	default:
		writeChatError(w, http.StatusNotFound, &chatError{Code: "unknown_url", Message: "Unknown request URL: " + r.Method + " " + r.URL.Path})
	}
}

// entry is one line of requests.jsonl.
type entry struct {
	N            int       `json:"n"`
	At           time.Time `json:"at"`
	Path         string    `json:"path"`
	Session      string    `json:"session,omitempty"`
	Kind         string    `json:"kind,omitempty"`
	Model        string    `json:"model,omitempty"`
	Stream       bool      `json:"stream"`
	IncludeUsage bool      `json:"include_usage"`
	Messages     int       `json:"messages"`
	Status       int       `json:"status"`
	Error        string    `json:"error,omitempty"`
	Warnings     []string  `json:"warnings,omitempty"`
	PromptTokens int       `json:"prompt_tokens"`
	CachedTokens int       `json:"cached_tokens"`
	BestCached   int       `json:"best_cached_tokens"`
	HasPrev      bool      `json:"has_prev"`
	ExtendsPrev  bool      `json:"extends_prev"`
	DivergedPart int       `json:"diverged_part,omitempty"` // 0 tools, i message i-1; only when !extends_prev
	PrevParts    int       `json:"prev_parts,omitempty"`
	Answer       string    `json:"answer,omitempty"`
	UserAgent    string    `json:"user_agent,omitempty"`
	Headers      []string  `json:"headers,omitempty"` // names only (Gemini requests)
}

func (s *server) session(r *http.Request) string {
	for _, h := range s.cfg.sessionHeaders {
		if v := r.Header.Get(strings.TrimSpace(h)); v != "" {
			return v
		}
	}
	return ""
}

// chat answers one chat completion. The request is recorded before the
// answer is written, so a client that has its answer finds it recorded.
func (s *server) chat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	reply := s.turn(r, body, err)
	reply(w)
}

// turn runs the script for one request under the lock and returns how to
// answer it.
func (s *server) turn(r *http.Request, body []byte, readErr error) func(http.ResponseWriter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	e := entry{N: s.n, At: time.Now(), Path: r.URL.Path, Session: s.session(r), UserAgent: r.UserAgent()}
	defer func() { s.write(e, body) }()
	refusal := func(status int, cerr *chatError) func(http.ResponseWriter) {
		e.Status, e.Error = status, cerr.Message
		return func(w http.ResponseWriter) { writeChatError(w, status, cerr) }
	}
	if readErr != nil {
		return refusal(http.StatusBadRequest, &chatError{Message: readErr.Error()})
	}
	p, cerr := parseChat(body)
	e.Kind, e.Model, e.Stream, e.IncludeUsage, e.Warnings = p.Kind, p.Model, p.Stream, p.IncludeUsage, p.Warnings
	e.Messages = max(len(p.Parts)-1, 0)
	st := s.kindStats(p.Kind)
	st.Requests++
	if cerr == nil && s.cfg.strict && len(p.Warnings) > 0 {
		cerr = refuse("messages", "%s", p.Warnings[0])
	}
	e.PromptTokens = (len(p.Rendered) + 3) / 4
	if cerr == nil && s.cfg.context > 0 && e.PromptTokens > s.cfg.context {
		cerr = &chatError{Param: "messages", Code: "context_length_exceeded",
			Message: fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", s.cfg.context, e.PromptTokens)}
	}
	if cerr != nil {
		st.Refused++
		return refusal(http.StatusBadRequest, cerr)
	}
	u := s.observe(e.Session+"/"+p.Kind, p, &e)
	st.count(u, e)
	a := s.answer(e.Session, p)
	u.Completion = len(a.Text)/4 + 1
	if len(a.Calls) > 0 {
		e.Answer = "call"
		for _, c := range a.Calls {
			e.Answer += " " + c.Name + " " + c.Arguments
			u.Completion += len(c.Arguments) / 4
		}
	} else {
		e.Answer = "text " + firstLine(a.Text)
	}
	e.Status = http.StatusOK
	id := fmt.Sprintf("chatcmpl-scripted-%d", s.n)
	return func(w http.ResponseWriter) { writeChat(w, p, a, u, id) }
}

// count adds an accepted request to the kind's sums.
func (st *kindStats) count(u usage, e entry) {
	if len(e.Warnings) > 0 {
		st.WarnedRequest++
	}
	st.PromptTokens += u.Prompt
	st.CachedTokens += u.Cached
	if e.HasPrev {
		st.WithPrevious++
		if e.ExtendsPrev {
			st.ExtendedPrev++
		}
	}
}

func (s *server) kindStats(kind string) *kindStats {
	if kind == "" {
		kind = "invalid"
	}
	st := s.stats[kind]
	if st == nil {
		st = &kindStats{}
		s.stats[kind] = st
	}
	return st
}

// observe computes p's usage against the stream's previous prompt (the
// prefix cache) and records p as the stream's latest.
func (s *server) observe(stream string, p prompt, e *entry) usage {
	u := usage{Prompt: (len(p.Rendered) + 3) / 4}
	if prev, ok := s.last[stream]; ok {
		n := lcp(prev.Rendered, p.Rendered)
		u.Cached = n / 4
		e.HasPrev = true
		e.ExtendsPrev = n == len(prev.Rendered)
		if !e.ExtendsPrev {
			e.DivergedPart = partAt(prev.Parts, n)
			e.PrevParts = len(prev.Parts)
		}
	}
	for _, r := range s.recent {
		e.BestCached = max(e.BestCached, lcp(r, p.Rendered)/4)
	}
	e.PromptTokens, e.CachedTokens = u.Prompt, u.Cached
	s.last[stream] = p
	s.recent = append(s.recent, p.Rendered)
	if len(s.recent) > 64 {
		s.recent = s.recent[1:]
	}
	return u
}

// answer runs the script for one accepted request.
func (s *server) answer(session string, p prompt) answer {
	switch p.Kind {
	case kindSummary:
		return answer{Text: summaryText(s.n)}
	case kindSide:
		return answer{Text: "Scripted side answer"}
	}
	ask := session + "|" + shortHash(p.LastUser)
	done := s.steps[ask]
	if done >= s.cfg.toolTurns || len(s.cfg.steps) == 0 {
		return answer{Text: s.cfg.reply}
	}
	var a answer
	for j, st := range s.cfg.steps[done%len(s.cfg.steps)] {
		id := fmt.Sprintf("call_%s_%d", shortHash(ask)[:8], done+1)
		if j > 0 {
			id += fmt.Sprintf("_%d", j)
		}
		if st.Follow {
			cmd, ok := followMarker(p.Rendered)
			if !ok {
				return answer{Text: "Scripted: no ctxpress marker with a file to follow"}
			}
			st = step{Arg: cmd}
		}
		call, err := callFor(st, p.Tools, s.cfg.workdir, id)
		if err != nil {
			return answer{Text: "Scripted: " + err.Error()}
		}
		a.Calls = append(a.Calls, *call)
	}
	s.steps[ask] = done + 1
	return a
}

func (s *server) write(e entry, body []byte) {
	b, _ := json.Marshal(e)
	log.Printf("%s", b)
	if s.index == nil {
		return
	}
	_ = os.WriteFile(filepath.Join(s.cfg.record, fmt.Sprintf("%04d.json", e.N)), body, 0o644)
	_, _ = s.index.Write(append(b, '\n'))
}

func firstLine(s string) string {
	if i := bytes.IndexByte([]byte(s), '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}
