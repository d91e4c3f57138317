package geminitest

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Call is a function call an answer makes.
type Call struct {
	ID, Name string
	Args     json.RawMessage // a JSON object
}

// Usage is an answer's usageMetadata, in tokens.
type Usage struct {
	Prompt, Cached, Candidates, Thoughts int
}

// metadata is Usage as the API spells it: cachedContentTokenCount only
// when something was cached, totalTokenCount the sum.
func (u Usage) metadata(final bool) map[string]any {
	m := map[string]any{"promptTokenCount": u.Prompt,
		"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": u.Prompt}}}
	if u.Cached > 0 {
		m["cachedContentTokenCount"] = u.Cached
		m["cacheTokensDetails"] = []any{map[string]any{"modality": "TEXT", "tokenCount": u.Cached}}
	}
	if !final {
		m["totalTokenCount"] = u.Prompt
		return m
	}
	m["candidatesTokenCount"] = u.Candidates
	m["totalTokenCount"] = u.Prompt + u.Candidates + u.Thoughts
	if u.Thoughts > 0 {
		m["thoughtsTokenCount"] = u.Thoughts
	}
	return m
}

// Reply is one answer, built as Gemini 3 answers: a thought summary part
// when thoughts are included, then the text or the function calls; the
// first functionCall part of the answer (only the first of a parallel
// set) or else the last text part carries a thought signature issued by
// the ledger.
type Reply struct {
	Model, ResponseID string
	Thought           string // the thought summary, "" for none
	Parts             []map[string]any
	Usage             Usage
}

// NewReply builds the answer to req of text or calls and issues its
// signature in l (nil: unsigned, as a Gemini 2 model answers).
func NewReply(l *Ledger, req *Request, model, responseID, text string, calls []Call) Reply {
	r := Reply{Model: model, ResponseID: responseID}
	if req.IncludeThoughts {
		r.Thought = "**Choosing the next step**\n\nThe scripted plan says what to run next."
	}
	for i, c := range calls {
		fc := map[string]any{"name": c.Name, "args": c.Args}
		if c.ID != "" {
			fc["id"] = c.ID
		}
		p := map[string]any{"functionCall": fc}
		if i == 0 && l != nil {
			p["thoughtSignature"] = l.Call(req, c.Name, c.Args)
		}
		r.Parts = append(r.Parts, p)
	}
	if len(calls) == 0 {
		p := map[string]any{"text": text}
		if l != nil {
			p["thoughtSignature"] = l.Text(req)
		}
		r.Parts = append(r.Parts, p)
	}
	b, _ := json.Marshal(r.Parts)
	r.Usage.Candidates = tokens(len(b))
	r.Usage.Thoughts = tokens(len(r.Thought)) + 8
	return r
}

func tokens(n int) int { return (n + 3) / 4 }

// chunk is one GenerateContentResponse holding parts.
func (r Reply) chunk(parts []map[string]any, final bool) map[string]any {
	cand := map[string]any{"content": map[string]any{"parts": parts, "role": "model"}, "index": 0}
	if final {
		cand["finishReason"] = "STOP"
	}
	return map[string]any{"candidates": []any{cand}, "usageMetadata": r.Usage.metadata(final),
		"modelVersion": r.Model, "responseId": r.ResponseID}
}

func (r Reply) thoughtPart() []map[string]any {
	if r.Thought == "" {
		return nil
	}
	return []map[string]any{{"text": r.Thought, "thought": true}}
}

// Whole is the non-streamed answer.
func (r Reply) Whole() []byte {
	b, _ := json.Marshal(r.chunk(append(r.thoughtPart(), r.Parts...), true))
	return b
}

// Chunks are the streamed answer: the thought, then a text in two
// pieces and its signature on an empty text part of its own (as Gemini 3
// streams it), or the calls in one chunk; every chunk carries
// usageMetadata, the last the full one with finishReason.
func (r Reply) Chunks() [][]byte {
	var out []map[string]any
	if t := r.thoughtPart(); t != nil {
		out = append(out, r.chunk(t, false))
	}
	last := r.Parts
	if text, ok := r.Parts[0]["text"].(string); ok && len(r.Parts) == 1 {
		i := strings.IndexByte(text, ' ') + 1
		for _, piece := range []string{text[:i], text[i:]} {
			if piece != "" {
				out = append(out, r.chunk([]map[string]any{{"text": piece}}, false))
			}
		}
		last = []map[string]any{{"text": ""}}
		if sig, ok := r.Parts[0]["thoughtSignature"]; ok {
			last[0]["thoughtSignature"] = sig
		}
	}
	out = append(out, r.chunk(last, true))
	bs := make([][]byte, len(out))
	for i, c := range out {
		bs[i], _ = json.Marshal(c)
	}
	return bs
}

// Write answers w with r: whole JSON, SSE events (alt=sse; data lines
// ended by CRLF pairs as Google sends them) or a JSON array streamed
// element by element.
func (r Reply) Write(w http.ResponseWriter, stream, sse bool) {
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	switch {
	case !stream:
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = w.Write(r.Whole())
	case sse:
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range r.Chunks() {
			_, _ = w.Write([]byte("data: " + string(c) + "\r\n\r\n"))
			flush()
		}
	default:
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		for i, c := range r.Chunks() {
			sep := ",\r\n"
			if i == 0 {
				sep = "["
			}
			_, _ = w.Write([]byte(sep + string(c)))
			flush()
		}
		_, _ = w.Write([]byte("]"))
	}
}

// Route is what a request's path asks: the model and the method
// (generateContent, streamGenerateContent, countTokens), or List for the
// model list.
type Route struct {
	Model, Method string
	List          bool
}

// RouteOf reads a Gemini API path, /v1beta/models/… or /v1/models/…
// from the root as Google serves them: anything before the version (a
// proxy's /v1/v1beta/…) is Google's 404, and ok is false.
func RouteOf(method, path string) (Route, bool) {
	rest, ok := strings.CutPrefix(path, "/v1beta/models")
	if !ok {
		if rest, ok = strings.CutPrefix(path, "/v1/models"); !ok {
			return Route{}, false
		}
	}
	if rest == "" || rest == "/" {
		return Route{List: true}, method == http.MethodGet
	}
	model, m, ok := strings.Cut(strings.TrimPrefix(rest, "/"), ":")
	if !ok || rest[0] != '/' || model == "" || strings.Contains(model, "/") || method != http.MethodPost {
		return Route{}, false
	}
	switch m {
	case "generateContent", "streamGenerateContent", "countTokens":
		return Route{Model: model, Method: m}, true
	}
	return Route{}, false
}

// KeyOf returns the request's API key (x-goog-api-key, else ?key=), or
// the error Google answers a request without one with.
func KeyOf(r *http.Request) (string, *Error) {
	if k := r.Header.Get("X-Goog-Api-Key"); k != "" {
		return k, nil
	}
	if k := r.URL.Query().Get("key"); k != "" {
		return k, nil
	}
	if strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		// An OAuth token this fake cannot check.
		return "", &Error{Code: http.StatusUnauthorized, Status: "UNAUTHENTICATED",
			Message: "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."}
	}
	return "", &Error{Code: http.StatusForbidden, Status: "PERMISSION_DENIED",
		Message: "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."}
}

// ModelList is GET /v1beta/models for the given models.
func ModelList(models ...string) []byte {
	var ms []any
	for _, m := range models {
		ms = append(ms, map[string]any{"name": "models/" + m, "version": "3.0", "displayName": m,
			"inputTokenLimit": 1048576, "outputTokenLimit": 65536,
			"supportedGenerationMethods": []string{"generateContent", "countTokens"}, "thinking": true})
	}
	b, _ := json.Marshal(map[string]any{"models": ms})
	return b
}

// CountTokens is the countTokens answer for r.
func CountTokens(r *Request) []byte {
	n := tokens(len(r.Prompt))
	b, _ := json.Marshal(map[string]any{"totalTokens": n,
		"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": n}}})
	return b
}
