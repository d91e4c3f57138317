package compactor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ctxpress/ctxpress/internal/envproxy"
	"github.com/ctxpress/ctxpress/internal/jsonvalid"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// Summary call defaults.
const (
	// DefaultTimeout bounds one summary call when SummaryRequest.Timeout is 0.
	DefaultTimeout = 120 * time.Second
	// summaryTemperature keeps summaries close to the transcript while
	// leaving the model room to phrase.
	summaryTemperature = 0.3
	// maxResponseBytes caps the summary response body; a summary is a few
	// KiB, so anything far larger is not one.
	maxResponseBytes = 16 << 20
	// maxErrorText caps how much of an upstream error body goes into an error.
	maxErrorText = 300
	// maxParamRetries bounds the calls that follow a refused parameter: one
	// per thing that can change (the cap's name, temperature).
	maxParamRetries = 2
	// maxLearned bounds the (base URL, model) pairs whose refusals are
	// remembered; past it a refusal is still retried, just not remembered.
	maxLearned = 1024
)

// SummaryRequest is one summary call.
type SummaryRequest struct {
	BaseURL       string        // OpenAI-compatible base URL, e.g. https://api.openai.com/v1; "/chat/completions" is appended
	Authorization string        // sent as the Authorization header when not empty; never in an error
	Model         string        // the summary model
	Reasoning     *bool         // overrides the family table (RulesFor) for Model; nil = the table
	Prompt        string        // the one user message (BuildPrompt)
	MaxTokens     int           // the summary's length cap (max_tokens, or max_completion_tokens with headroom); 0 = DefaultMaxTokens(0)
	Timeout       time.Duration // per Summarize, retries included; 0 = DefaultTimeout
}

// SummaryResult is a summary and what it cost, as the upstream reported it.
type SummaryResult struct {
	Summary          string        // the assistant text, trimmed, reasoning (<think>…</think>) removed
	PromptTokens     int           // usage.prompt_tokens (or input_tokens); 0 when not reported
	CompletionTokens int           // usage.completion_tokens (or output_tokens); 0 when not reported
	Duration         time.Duration // wall time of the call
	Truncated        bool          // finish_reason "length": the summary hit MaxTokens and may be cut short
}

// Summarizer makes summary calls over a pooled fasthttp client. It is safe
// for concurrent use; the zero value is not usable, call NewSummarizer.
type Summarizer struct {
	client *fasthttp.Client

	mu      sync.Mutex              // guards learned
	learned map[modelKey]ParamRules // rules an upstream's refusal taught, for the life of the process
}

// modelKey is one model behind one summariser base URL.
type modelKey struct{ base, model string }

// NewSummarizer returns a Summarizer with its own connection pool.
func NewSummarizer() *Summarizer {
	// The environment's outbound proxy, as for the upstream (a bad proxy
	// URL has already stopped the upstream client from starting).
	dial, _ := envproxy.Dial("", 10*time.Second)
	return &Summarizer{learned: map[modelKey]ParamRules{}, client: &fasthttp.Client{
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

// chatRequest is the summary call's body; field order is the wire order.
// ParamRules decide which of temperature, max_tokens and
// max_completion_tokens are present.
type chatRequest struct {
	Model               string        `json:"model"`
	Messages            []chatMessage `json:"messages"`
	Temperature         *float64      `json:"temperature,omitempty"`
	MaxTokens           int           `json:"max_tokens,omitempty"`
	MaxCompletionTokens int           `json:"max_completion_tokens,omitempty"`
	Stream              bool          `json:"stream"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Summarize posts req.Prompt as the one user message to
// {BaseURL}/chat/completions (stream false) and returns the assistant's
// text. The options follow the model's ParamRules: max_tokens and
// temperature 0.3, or for reasoning models max_completion_tokens (with
// room for the reasoning) and no temperature. When the upstream answers
// 400 refusing one of them, the call is sent again without it (at most
// twice), and the (BaseURL, Model) pair keeps the rules that worked for the
// life of the Summarizer. The calls end at the earlier of ctx's deadline
// and now+Timeout; a context cancelled without a deadline is only seen
// before the call starts, since fasthttp cancels by deadline.
//
// Errors wrap ErrTransport (no answer: dial, reset, timeout, ctx), ErrUpstream
// (non-2xx; the upstream's own error message included, secrets redacted;
// also ErrContextOverflow when IsContextOverflow), ErrBadResponse (not a
// chat completion) or ErrEmptySummary (no text, e.g. a reasoning model that
// spent its cap on reasoning_content).
func (s *Summarizer) Summarize(ctx context.Context, req SummaryRequest) (SummaryResult, error) {
	if err := ctx.Err(); err != nil {
		return SummaryResult{}, fmt.Errorf("%w: %w", ErrTransport, err)
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
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
	hreq.SetRequestURI(strings.TrimRight(req.BaseURL, "/") + "/chat/completions")
	hreq.Header.SetMethod(fasthttp.MethodPost)
	hreq.Header.SetContentType("application/json")
	hreq.Header.Set(fasthttp.HeaderAccept, "application/json")
	if req.Authorization != "" {
		hreq.Header.Set(fasthttp.HeaderAuthorization, req.Authorization)
	}

	key := modelKey{strings.TrimRight(req.BaseURL, "/"), req.Model}
	rules := s.rulesFor(key, req)
	for attempt := 0; ; attempt++ {
		body, err := summaryBody(req, rules)
		if err != nil {
			return SummaryResult{}, err
		}
		hreq.SetBodyRaw(body)
		err = s.client.DoDeadline(hreq, hresp, deadline)
		res := SummaryResult{Duration: time.Since(start)}
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return res, fmt.Errorf("%w: %w (%w)", ErrTransport, cerr, err)
			}
			return res, fmt.Errorf("%w: %w", ErrTransport, err)
		}
		if next, refused := retryRules(rules, hresp.StatusCode(), hresp.Body()); refused && attempt < maxParamRetries {
			s.learn(key, next)
			rules = next
			continue
		}
		return parseSummary(res, hresp.StatusCode(), hresp.Body(), req.Authorization)
	}
}

// rulesFor is what a refusal taught for key, else the family table with
// req's override.
func (s *Summarizer) rulesFor(key modelKey, req SummaryRequest) ParamRules {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.learned[key]; ok {
		return r
	}
	return RulesFor(req.Model, req.Reasoning)
}

// learn remembers the rules an upstream's refusal taught for key.
func (s *Summarizer) learn(key modelKey, r ParamRules) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.learned[key]; ok || len(s.learned) < maxLearned {
		s.learned[key] = r
	}
}

// summaryBody encodes the summary call for req under rules.
func summaryBody(req SummaryRequest, rules ParamRules) ([]byte, error) {
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens(0)
	}
	cr := chatRequest{Model: req.Model, Messages: []chatMessage{{Role: "user", Content: req.Prompt}}}
	if rules.MaxCompletionTokens {
		cr.MaxCompletionTokens = maxTokens + reasoningHeadroom
	} else {
		cr.MaxTokens = maxTokens
	}
	if !rules.NoTemperature {
		t := summaryTemperature
		cr.Temperature = &t
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false) // the prompt is full of <, > and &; keep it readable on the wire
	if err := enc.Encode(cr); err != nil {
		return nil, fmt.Errorf("compactor: encoding summary request: %w", err)
	}
	return body.Bytes(), nil
}

// parseSummary reads a chat completion answer into res.
func parseSummary(res SummaryResult, status int, body []byte, auth string) (SummaryResult, error) {
	if status < 200 || status > 299 {
		if IsContextOverflow(status, body) {
			return res, fmt.Errorf("%w: %w: status %d: %s", ErrContextOverflow, ErrUpstream, status, upstreamMessage(body, auth))
		}
		return res, fmt.Errorf("%w: status %d: %s", ErrUpstream, status, upstreamMessage(body, auth))
	}
	if !jsonvalid.Valid(body) {
		return res, fmt.Errorf("%w: body is not JSON: %s", ErrBadResponse, upstreamMessage(body, auth))
	}
	root := gjson.ParseBytes(body)
	if e := root.Get("error"); e.Exists() && e.Type != gjson.Null {
		// Some local servers answer errors with 200.
		return res, fmt.Errorf("%w: %s", ErrUpstream, upstreamMessage(body, auth))
	}
	choice := root.Get("choices.0")
	if !choice.Exists() {
		return res, fmt.Errorf("%w: no choices", ErrBadResponse)
	}
	res.PromptTokens = int(firstOf(root, "usage.prompt_tokens", "usage.input_tokens").Int())
	res.CompletionTokens = int(firstOf(root, "usage.completion_tokens", "usage.output_tokens").Int())
	res.Truncated = choice.Get("finish_reason").String() == "length"
	res.Summary = stripReasoning(contentText(choice.Get("message.content")))
	if res.Summary == "" {
		if choice.Get("message.reasoning_content").String() != "" || choice.Get("message.reasoning").String() != "" {
			return res, fmt.Errorf("%w: only reasoning came back (finish_reason %q); raise max_tokens or use a non-reasoning model",
				ErrEmptySummary, choice.Get("finish_reason").String())
		}
		return res, ErrEmptySummary
	}
	return res, nil
}

// firstOf returns the first of paths present in r.
func firstOf(r gjson.Result, paths ...string) gjson.Result {
	for _, p := range paths {
		if v := r.Get(p); v.Exists() {
			return v
		}
	}
	return gjson.Result{}
}

// contentText flattens message content: a string, or the text of a list of
// parts (some providers answer with parts).
func contentText(c gjson.Result) string {
	if c.IsArray() {
		var parts []string
		for _, p := range c.Array() {
			if t := p.Get("text"); t.Type == gjson.String {
				parts = append(parts, t.Str)
			}
		}
		return strings.Join(parts, "\n")
	}
	if c.Type == gjson.String {
		return c.Str
	}
	return ""
}

// stripReasoning removes a leading <think>…</think> block, which local
// reasoning models (Qwen, DeepSeek-R1 via llama.cpp or Ollama) put in the
// content itself, and trims the rest. An unclosed block is all reasoning.
func stripReasoning(s string) string {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "<think>"); ok {
		_, after, closed := strings.Cut(rest, "</think>")
		if !closed {
			return ""
		}
		s = strings.TrimSpace(after)
	}
	return s
}

// upstreamMessage extracts the upstream's error message from body (OpenAI
// shape {"error":{"message"}}, {"error":"…"} or {"message"}), else its
// first bytes, with secrets and the caller's own credential redacted.
func upstreamMessage(body []byte, auth string) string {
	msg := ""
	if jsonvalid.Valid(body) {
		msg = firstOf(gjson.ParseBytes(body), "error.message", "error", "message", "detail").String()
	}
	if msg == "" {
		msg = string(body)
	}
	// Redact before cutting, so a cut cannot leave a key too short to spot.
	if key := strings.TrimSpace(strings.TrimPrefix(auth, "Bearer ")); len(key) >= 8 {
		msg = strings.ReplaceAll(msg, key, redacted)
	}
	msg = strings.TrimSpace(Redact(msg))
	if len(msg) > maxErrorText {
		msg = msg[:runeFloor(msg, maxErrorText)] + "…"
	}
	if msg == "" {
		msg = "(empty body)"
	}
	return msg
}
