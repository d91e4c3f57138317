package replay

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/ctxpress/ctxpress/internal/chatcheck"
	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/ctxpress/ctxpress/internal/messagestest"
	"github.com/ctxpress/ctxpress/internal/responsestest"
	"github.com/tidwall/gjson"
)

// AgentReply is what the simulated provider answers every agent turn
// with. The replay sends each turn's recorded history, not this reply, so
// its output tokens are the same on both legs and left out of the costs.
const AgentReply = "Done."

// DefaultSummaryTokens is the length of a simulated summary.
const DefaultSummaryTokens = 1000

// Sim is a simulated caching provider for one session: it speaks chat
// completions, Responses and Messages (under any base path), refuses
// what the real API refuses (the repository's strict validators), and
// reports as cached the tokens of the longest prefix a request shares
// with an earlier one (see prefixCache), and for Messages as written to
// the cache the tokens after that up to the request's last cache_control
// marker, which Anthropic bills above an input token. It answers agent
// turns with AgentReply and ctxpress's summary calls (IsSummaryCall) with
// a summary of SummaryTokens tokens, cut at the request's cap. It is safe
// for concurrent use.
type Sim struct {
	tokens        *Tokens
	summaryTokens int

	// clock, when set, times the answers (see Timing); nil answers at once.
	clock *clock

	mu    sync.Mutex
	cache *prefixCache // guarded by mu
	n     int          // answers so far, for their ids; guarded by mu
}

// NewSim returns a provider with an empty cache; summaryTokens <= 0 means
// DefaultSummaryTokens.
func NewSim(tokens *Tokens, summaryTokens int) *Sim {
	if summaryTokens <= 0 {
		summaryTokens = DefaultSummaryTokens
	}
	return &Sim{tokens: tokens, summaryTokens: summaryTokens, cache: newPrefixCache()}
}

// formatOf is the format of a request to path, false for a path that is
// none of the three.
func formatOf(path string) (Format, bool) {
	for _, f := range []Format{Chat, Responses, Messages} {
		if strings.HasSuffix(path, f.Path()) {
			return f, true
		}
	}
	return "", false
}

func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f, ok := formatOf(r.URL.Path)
	if !ok || r.Method != http.MethodPost {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write(errorBody(f, "not_found_error", fmt.Sprintf("Unknown request URL: %s %s", r.Method, r.URL.Path)))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	status, ctype, out := s.answer(f, body)
	w.Header().Set("Content-Type", ctype)
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// answer is the status, content type and body of the answer to body.
func (s *Sim) answer(f Format, body []byte) (int, string, []byte) {
	if status, refusal := validate(f, body); refusal != nil {
		return status, "application/json", refusal
	}
	p, err := s.tokens.prompt(f, body)
	if err != nil {
		return http.StatusBadRequest, "application/json", errorBody(f, "invalid_request_error", "The request is not a "+string(f)+" request.")
	}
	s.mu.Lock()
	cached := s.cache.serve(p.elements)
	s.n++
	a := answer{id: fmt.Sprintf("replay_%d", s.n), model: p.conv.Model, text: AgentReply,
		input: p.tokens, cached: cached, cacheWrite: max(p.marked-cached, 0)}
	s.mu.Unlock()
	summary := isSummaryConv(f, p.format, p.conv)
	if summary {
		n := s.summaryTokens
		if c := outputCap(f, body); c > 0 && c < n {
			n, a.truncated = c, true
		}
		a.text = s.tokens.summaryText(n)
	}
	a.output = s.tokens.Count(a.text)
	switch {
	case s.clock == nil:
	case summary:
		s.clock.summaryCall(a.output)
	default:
		s.clock.agentCall()
	}
	a.stream = gjson.GetBytes(body, "stream").Bool()
	a.streamUsage = f != Chat || gjson.GetBytes(body, "stream_options.include_usage").Bool()
	ctype, out := render(f, a)
	return http.StatusOK, ctype, out
}

// validate returns the status and error body the API refuses body with,
// or a nil body when it accepts it.
func validate(f Format, body []byte) (int, []byte) {
	switch f {
	case Responses:
		if _, e := responsestest.Check(body, responsestest.Options{}); e != nil {
			return e.Status, e.Body()
		}
	case Messages:
		if _, e := messagestest.Check(body, messagestest.Options{}); e != nil {
			return e.Status, e.Body()
		}
	default:
		if !jsonvalid.Valid(body) {
			return http.StatusBadRequest, errorBody(f, "invalid_request_error", "We could not parse the JSON body of your request.")
		}
		if m := gjson.GetBytes(body, "model"); m.Type != gjson.String || m.Str == "" {
			return http.StatusBadRequest, errorBody(f, "invalid_request_error", "you must provide a model parameter")
		}
		if err := chatcheck.ValidateChat(body); err != nil {
			return http.StatusBadRequest, errorBody(f, "invalid_request_error", err.Error())
		}
	}
	return 0, nil
}

// outputCap is the request's cap on output tokens, 0 when it sets none.
func outputCap(f Format, body []byte) int {
	paths := []string{"max_completion_tokens", "max_tokens"}
	switch f {
	case Responses:
		paths = []string{"max_output_tokens"}
	case Messages:
		paths = []string{"max_tokens"}
	}
	for _, p := range paths {
		if v := gjson.GetBytes(body, p); v.Exists() {
			return int(v.Int())
		}
	}
	return 0
}
