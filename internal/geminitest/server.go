package geminitest

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Server is a fake Gemini API for tests: every request checked by Check
// (signatures required for Gemini 3 models, verified against its ledger),
// refusals in Google's shape, answers from Script in the form the path
// and alt=sse ask for, usage with implicit caching (the longest prefix an
// earlier prompt shared).
type Server struct {
	// Script answers an accepted request with a text or function calls;
	// nil answers "OK".
	Script func(model string, r *Request) (text string, calls []Call)
	// Models are listed by GET /v1beta/models, and any other is Google's
	// 404; nil lists gemini-3-flash-preview and takes any model.
	Models []string
	Ledger *Ledger
	// BindPrefix: see Options.BindPrefix.
	BindPrefix bool

	mu      sync.Mutex // guards all below
	prompts [][]byte
	entries []Entry
}

// Entry is one request the server answered.
type Entry struct {
	Route  Route
	Stream bool // streamGenerateContent; SSE with alt=sse
	SSE    bool
	Status int
	Error  string
	Usage  Usage
	Signed int // signatures sent back and accepted
}

// NewServer returns a server with an empty ledger.
func NewServer() *Server { return &Server{Ledger: NewLedger()} }

// Entries returns what the server answered so far, in order.
func (s *Server) Entries() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.entries...)
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, ok := RouteOf(r.Method, r.URL.Path)
	e := Entry{Route: rt, Stream: rt.Method == "streamGenerateContent", SSE: r.URL.Query().Get("alt") == "sse"}
	refuse := func(err *Error) {
		e.Status, e.Error = err.Code, err.Message
		s.record(e)
		err.Write(w)
	}
	if !ok {
		refuse(&Error{Code: http.StatusNotFound, Status: "NOT_FOUND", Message: fmt.Sprintf("Method not found: %s %s", r.Method, r.URL.Path)})
		return
	}
	if _, err := KeyOf(r); err != nil {
		refuse(err)
		return
	}
	if rt.List {
		models := s.Models
		if models == nil {
			models = []string{"gemini-3-flash-preview"}
		}
		e.Status = http.StatusOK
		s.record(e)
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = w.Write(ModelList(models...))
		return
	}
	if s.Models != nil && !slices.Contains(s.Models, rt.Model) {
		refuse(&Error{Code: http.StatusNotFound, Status: "NOT_FOUND", Message: fmt.Sprintf("models/%s is not found for API version %s, or is not supported for %s. Call ListModels to see the list of available models and their supported methods.", rt.Model, version(r.URL.Path), rt.Method)})
		return
	}
	body, rerr := io.ReadAll(r.Body)
	if rerr != nil {
		refuse(invalid("%v", rerr))
		return
	}
	count := rt.Method == "countTokens"
	req, cerr := Check(body, Options{Signatures: RequiresSignatures(rt.Model), Ledger: s.Ledger,
		BindPrefix: s.BindPrefix, CountTokens: count})
	if cerr != nil {
		refuse(cerr)
		return
	}
	e.Status, e.Signed = http.StatusOK, req.Signed
	if count {
		s.record(e)
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = w.Write(CountTokens(req))
		return
	}
	text, calls := "OK", []Call(nil)
	if s.Script != nil {
		text, calls = s.Script(rt.Model, req)
	}
	var l *Ledger
	if RequiresSignatures(rt.Model) {
		l = s.Ledger
	}
	rep := NewReply(l, req, rt.Model, fmt.Sprintf("resp-%d", len(s.Entries())+1), text, calls)
	rep.Usage.Prompt = tokens(len(req.Prompt))
	rep.Usage.Cached = s.cached(req.Prompt) / 4
	e.Usage = rep.Usage
	s.record(e)
	rep.Write(w, e.Stream, e.SSE)
}

func (s *Server) record(e Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries = append(s.entries, e)
}

// cached is the longest prefix, in bytes, prompt shares with an earlier
// one; prompt is remembered.
func (s *Server) cached(prompt []byte) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	best := 0
	for _, p := range s.prompts {
		best = max(best, CommonPrefix(p, prompt))
	}
	s.prompts = append(s.prompts, prompt)
	return best
}

// CommonPrefix is the length of the longest common prefix of a and b.
func CommonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// version is the API version a path names.
func version(path string) string {
	if strings.HasPrefix(path, "/v1beta/") {
		return "v1beta"
	}
	return "v1"
}
