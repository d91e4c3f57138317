package compaction

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/ctxpress/ctxpress/compactor"
	"github.com/ctxpress/ctxpress/internal/envproxy"
	"github.com/ctxpress/ctxpress/internal/upstreamerr"
	"github.com/ctxpress/ctxpress/wire"
	"github.com/ctxpress/ctxpress/wire/chat"
	"github.com/ctxpress/ctxpress/wire/gemini"
	"github.com/ctxpress/ctxpress/wire/messages"
	"github.com/ctxpress/ctxpress/wire/responses"
)

// Summary call defaults.
const (
	// DefaultSummaryTimeout bounds one summary call when SummaryRequest.Timeout is 0.
	DefaultSummaryTimeout = 120 * time.Second
	// maxResponseBytes caps the summary response body; a summary is a few
	// KiB, so anything far larger is not one.
	maxResponseBytes = 16 << 20
	// maxParamRetries bounds the calls that follow a refused parameter: one
	// per thing that can change (the cap's name, temperature).
	maxParamRetries = 2
	// maxLearned bounds the (base URL, model) pairs whose refusals are
	// remembered; past it a refusal is still retried, just not remembered.
	maxLearned = 1024
)

// ErrTransport means the summary call did not complete (dial, reset, timeout, cancelled context).
var ErrTransport = errors.New("compactor: summary call failed")

// SummaryRequest is one summary call.
type SummaryRequest struct {
	BaseURL string // the API's base URL, e.g. https://api.openai.com/v1; the API's path is appended
	// API is the form of the call: "chat" (also "") posts a chat completion
	// to {BaseURL}/chat/completions, "responses" a Responses request to
	// {BaseURL}/responses, "messages" an Anthropic Messages request to
	// {BaseURL}/messages, "gemini" a generateContent request to
	// {BaseURL}/models/{Model}:generateContent, BaseURL Gemini's version's
	// (…/v1beta) (summaryForms).
	API           string
	Authorization string // sent as the Authorization header when not empty; never in an error
	// APIKey is sent as x-api-key when not empty (Anthropic's credential;
	// a Gemini call's x-goog-api-key); never in an error.
	APIKey string
	// AnthropicVersion and AnthropicBeta are a Messages call's
	// anthropic-version (messages.APIVersion when empty) and
	// anthropic-beta (left out when empty).
	AnthropicVersion, AnthropicBeta string
	Model                           string        // the summary model
	Reasoning                       *bool         // overrides the family table (wire.RulesFor) for Model; nil = the table
	Prompt                          string        // the one user message (compactor.Summary.Prompt), or with History the instruction (compactor.HistoryPrompt)
	MaxTokens                       int           // the summary's length cap (max_tokens, or max_completion_tokens with headroom); 0 = compactor.DefaultMaxTokens(0)
	Timeout                         time.Duration // per Summarize, retries included; 0 = DefaultSummaryTimeout
	// History is the conversation's request as forwarded, in API's form:
	// the call continues it with Prompt (wire.SummaryCall.History); nil
	// sends Prompt alone.
	History []byte
}

// SummaryResult is a summary and what it cost, as the upstream reported it.
type SummaryResult struct {
	wire.Summary
	Duration time.Duration // wall time of the call
	// Status is the last answer's HTTP status; 0 when none came.
	Status int
}

// Summarizer makes summary calls over a pooled fasthttp client. It is safe
// for concurrent use; the zero value is not usable, call NewSummarizer.
type Summarizer struct {
	client *fasthttp.Client

	mu      sync.Mutex                   // guards learned
	learned map[modelKey]wire.ParamRules // rules an upstream's refusal taught, for the life of the process
}

// modelKey is one model behind one summariser endpoint (base URL and path).
type modelKey struct{ endpoint, model string }

// summaryForm is a summary call in one API: where it is posted, how its
// body is built and how its answer is read.
type summaryForm struct {
	path string
	body func(wire.SummaryCall, wire.ParamRules) ([]byte, error)
	read func(status int, body []byte, auth string) (wire.Summary, error)
	// anthropic: the call carries anthropic-version (Anthropic refuses a
	// request without one).
	anthropic bool
	// modelPath, when set, is the path of a call to a model, for an API
	// that names the model in the path (Gemini's
	// /models/{model}:generateContent); path is then unused. Its key
	// (SummaryRequest.APIKey) goes as x-goog-api-key.
	modelPath func(model string) string
}

// pathOf is where a call to model is posted, under the base URL.
func (f summaryForm) pathOf(model string) string {
	if f.modelPath != nil {
		return f.modelPath(model)
	}
	return f.path
}

// The summary call's APIs (SummaryRequest.API), as the config names them.
const (
	APIChat      = "chat"
	APIResponses = "responses"
	APIMessages  = "messages"
	APIGemini    = "gemini"
)

// The headers a summary call sets besides Authorization.
const (
	headerAPIKey           = "X-Api-Key"
	headerGoogleAPIKey     = "X-Goog-Api-Key"
	headerAnthropicVersion = "Anthropic-Version"
	headerAnthropicBeta    = "Anthropic-Beta"
)

// summaryForms are the summary call's forms by API (SummaryRequest.API).
var summaryForms = map[string]summaryForm{
	"":           {"/chat/completions", chat.SummaryBody, chat.ReadSummary, false, nil},
	APIChat:      {"/chat/completions", chat.SummaryBody, chat.ReadSummary, false, nil},
	APIResponses: {"/responses", responses.SummaryBody, responses.ReadSummary, false, nil},
	APIMessages:  {"/messages", messages.SummaryBody, messages.ReadSummary, true, nil},
	// Gemini's base URL is its version's (…/v1beta).
	APIGemini: {"", gemini.SummaryBody, gemini.ReadSummary, false, gemini.SummaryPath},
}

// NewSummarizer returns a Summarizer with its own connection pool.
func NewSummarizer() *Summarizer {
	// The environment's outbound proxy, as for the upstream (a bad proxy
	// URL has already stopped the upstream client from starting).
	dial, _ := envproxy.Dial("", 10*time.Second)
	return &Summarizer{learned: map[modelKey]wire.ParamRules{}, client: &fasthttp.Client{
		Dial: dial,
		// fasthttp dials IPv4 only by default: an upstream at [::1] or a
		// localhost that resolves only to ::1 would be unreachable.
		DialDualStack:       true,
		Name:                "ctxpress-compactor",
		MaxIdleConnDuration: 90 * time.Second,
		MaxResponseBodySize: maxResponseBytes,
		ReadBufferSize:      16 << 10, // hosted providers send many large headers
		// A summary call is not idempotent (it costs tokens); the caller
		// decides whether to try again.
		MaxIdemponentCallAttempts: 1,
		DisablePathNormalizing:    true,
	}}
}

// Summarize posts req.Prompt as the one user message, in req.API's form
// (stream false, and for Responses store false; Messages: max_tokens
// always, and the anthropic-version header), and returns the
// assistant's text. With req.History it posts that conversation with
// req.Prompt as its next user text instead (wire.SummaryCall.History: all
// as sent but the stream, the cap and, in chat and Responses,
// tool_choice). The options follow the model's wire.ParamRules:
// max_tokens (Responses: max_output_tokens) and temperature 0.3, or for
// reasoning models max_completion_tokens (Responses: max_output_tokens),
// with room for the reasoning, and no temperature (with History, the
// temperature stays the client's). When the upstream answers
// 400 refusing one of them, the call is sent again without it (at most
// twice), and the (BaseURL, Model) pair keeps the rules that worked for the
// life of the Summarizer. The calls end at the earlier of ctx's deadline
// and now+Timeout; a context cancelled without a deadline is only seen
// before the call starts, since fasthttp cancels by deadline.
//
// Errors wrap ErrTransport (no answer: dial, reset, timeout, ctx) or one of
// the summary errors every format's ReadSummary returns (wire.ErrUpstream,
// wire.ErrEmptySummary, …).
func (s *Summarizer) Summarize(ctx context.Context, req SummaryRequest) (SummaryResult, error) {
	if err := ctx.Err(); err != nil {
		return SummaryResult{}, fmt.Errorf("%w: %w", ErrTransport, err)
	}
	form, ok := summaryForms[req.API]
	if !ok {
		return SummaryResult{}, fmt.Errorf("compactor: summary API %q: want chat, responses, messages or gemini", req.API)
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultSummaryTimeout
	}
	start := time.Now()
	deadline := start.Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}

	hreq := fasthttp.AcquireRequest()
	hresp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(hreq)
	defer fasthttp.ReleaseResponse(hresp)
	base := strings.TrimRight(req.BaseURL, "/")
	path := form.pathOf(req.Model)
	hreq.SetRequestURI(base + path)
	hreq.Header.SetMethod(fasthttp.MethodPost)
	hreq.Header.SetContentType("application/json")
	hreq.Header.Set(fasthttp.HeaderAccept, "application/json")
	secret := setSummaryHeaders(&hreq.Header, req, form)

	key := modelKey{base + path, req.Model}
	rules := s.rulesFor(key, req)
	resent := false
	for attempt := 0; ; attempt++ {
		body, err := form.body(req.call(), rules)
		if err != nil {
			return SummaryResult{}, err
		}
		hreq.SetBodyRaw(body)
		err = s.client.DoDeadline(hreq, hresp, deadline)
		if err != nil && !resent && upstreamerr.IsStaleConn(err) && ctx.Err() == nil {
			// A pooled connection the upstream had closed while idle
			// (llama-server closes them within seconds): the call was
			// never read, so it goes once more on a fresh one.
			resent = true
			err = s.client.DoDeadline(hreq, hresp, deadline)
		}
		res := SummaryResult{Duration: time.Since(start)}
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return res, fmt.Errorf("%w: %w (%w)", ErrTransport, cerr, err)
			}
			return res, fmt.Errorf("%w: %w", ErrTransport, err)
		}
		if next, refused := wire.RetryRules(rules, hresp.StatusCode(), hresp.Body()); refused && attempt < maxParamRetries {
			s.learn(key, next)
			rules = next
			continue
		}
		res.Status = hresp.StatusCode()
		res.Summary, err = form.read(res.Status, hresp.Body(), secret)
		return res, err
	}
}

// call is req's body as the formats build it, its cap the compactor's
// default when req sets none (the wire adapters have no default of their own).
func (req SummaryRequest) call() wire.SummaryCall {
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = compactor.DefaultMaxTokens(0)
	}
	return wire.SummaryCall{Model: req.Model, Prompt: req.Prompt, MaxTokens: maxTokens, History: req.History}
}

// AnswerCap is the room for the answer that req's body reserves under the
// rules the Summarizer would send it with: its max_tokens,
// max_completion_tokens or max_output_tokens. The error is the body's
// (wire.ErrNoHistoryForm: the history cannot take the prompt).
func (s *Summarizer) AnswerCap(req SummaryRequest) (int, error) {
	form, ok := summaryForms[req.API]
	if !ok {
		return 0, fmt.Errorf("compactor: summary API %q: want chat, responses, messages or gemini", req.API)
	}
	body, err := form.body(req.call(), s.rulesFor(modelKey{strings.TrimRight(req.BaseURL, "/") + form.pathOf(req.Model), req.Model}, req))
	if err != nil {
		return 0, err
	}
	for _, k := range []string{"max_completion_tokens", "max_tokens", "max_output_tokens"} {
		if v := gjson.GetBytes(body, k); v.Exists() {
			return int(v.Int()), nil
		}
	}
	return req.call().MaxTokens, nil
}

// setSummaryHeaders sets the credentials of req (and a Messages call's
// anthropic-version and anthropic-beta) on h, and returns the secret an
// error must not show.
func setSummaryHeaders(h *fasthttp.RequestHeader, req SummaryRequest, form summaryForm) (secret string) {
	secret = req.Authorization
	if req.Authorization != "" {
		h.Set(fasthttp.HeaderAuthorization, req.Authorization)
	}
	if req.APIKey != "" {
		name := headerAPIKey
		if form.modelPath != nil {
			name = headerGoogleAPIKey
		}
		h.Set(name, req.APIKey)
		secret = req.APIKey
	}
	if form.anthropic {
		version := req.AnthropicVersion
		if version == "" {
			version = messages.APIVersion
		}
		h.Set(headerAnthropicVersion, version)
		if req.AnthropicBeta != "" {
			h.Set(headerAnthropicBeta, req.AnthropicBeta)
		}
	}
	return secret
}

// rulesFor is what a refusal taught for key, else the family table with
// req's override.
func (s *Summarizer) rulesFor(key modelKey, req SummaryRequest) wire.ParamRules {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.learned[key]; ok {
		return r
	}
	return wire.RulesFor(req.Model, req.Reasoning)
}

// learn remembers the rules an upstream's refusal taught for key.
func (s *Summarizer) learn(key modelKey, r wire.ParamRules) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.learned[key]; ok || len(s.learned) < maxLearned {
		s.learned[key] = r
	}
}
