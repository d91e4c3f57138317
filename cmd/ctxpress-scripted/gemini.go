package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/ctxpress/ctxpress/internal/geminitest"
)

// The Gemini API (POST {base}/v1beta/models/{model}:generateContent,
// :streamGenerateContent with or without alt=sse, :countTokens, and GET
// {base}/v1beta/models; the same under /v1/), for Gemini CLI and pi on
// Google's models: a key required (x-goog-api-key or ?key=), requests
// checked by internal/geminitest as strictly as Google checks them and
// refused in its error shape, thought signatures issued on every answer
// of a Gemini 3 model and verified byte for byte when sent back, implicit
// caching reported as cachedContentTokenCount, and with -context N
// Google's input-token-count refusal past N tokens.

// geminiRoute reports whether r is a Gemini API request: its path, and
// for the bare /v1/models list (which OpenAI clients ask too) a Google key.
func geminiRoute(r *http.Request) (geminitest.Route, bool) {
	rt, ok := geminitest.RouteOf(r.Method, r.URL.Path)
	if !ok || !rt.List || strings.Contains(r.URL.Path, "/v1beta/") {
		return rt, ok
	}
	return rt, r.Header.Get("X-Goog-Api-Key") != "" || r.URL.Query().Has("key")
}

func (s *server) gemini(w http.ResponseWriter, r *http.Request, rt geminitest.Route) {
	body, err := io.ReadAll(r.Body)
	reply := s.geminiTurn(r, rt, body, err)
	reply(w)
}

// geminiTurn checks and answers one Gemini request under the lock,
// recording it, and returns how to answer it.
func (s *server) geminiTurn(r *http.Request, rt geminitest.Route, body []byte, readErr error) func(http.ResponseWriter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	e := entry{N: s.n, At: time.Now(), Path: r.URL.Path, Session: s.session(r), UserAgent: r.UserAgent(),
		Model: rt.Model, Stream: rt.Method == "streamGenerateContent", Headers: headerNames(r.Header)}
	defer func() { s.write(e, body) }()
	refusal := func(err *geminitest.Error) func(http.ResponseWriter) {
		e.Status, e.Error = err.Code, err.Message
		s.kindStats(e.Kind).Refused++
		return err.Write
	}
	if _, kerr := geminitest.KeyOf(r); kerr != nil {
		return refusal(kerr)
	}
	if rt.List {
		e.Kind, e.Status = "models", http.StatusOK
		return func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json; charset=UTF-8")
			_, _ = w.Write(geminitest.ModelList("gemini-3-flash-preview", "gemini-3-pro-preview", "gemini-2.5-flash", "gemini-2.5-pro"))
		}
	}
	if readErr != nil {
		return refusal(&geminitest.Error{Code: http.StatusBadRequest, Status: "INVALID_ARGUMENT", Message: readErr.Error()})
	}
	count := rt.Method == "countTokens"
	signed := geminitest.RequiresSignatures(rt.Model)
	req, cerr := geminitest.Check(body, geminitest.Options{Signatures: signed, Ledger: s.geminiLedger,
		BindPrefix: s.cfg.geminiBindPrefix, CountTokens: count})
	if req != nil {
		e.Messages = req.Contents
		e.Kind = kindOf(askText(req.LastUser), len(req.Tools))
	}
	s.kindStats(e.Kind).Requests++
	if cerr != nil {
		return refusal(cerr)
	}
	total := tokens(len(req.Prompt))
	e.PromptTokens, e.Status = total, http.StatusOK
	if count {
		e.Kind, e.Answer = "count_tokens", fmt.Sprintf("totalTokens %d", total)
		return func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json; charset=UTF-8")
			_, _ = w.Write(geminitest.CountTokens(req))
		}
	}
	if s.cfg.context > 0 && total > s.cfg.context {
		return refusal(&geminitest.Error{Code: http.StatusBadRequest, Status: "INVALID_ARGUMENT",
			Message: fmt.Sprintf("The input token count (%d) exceeds the maximum number of tokens allowed (%d).", total, s.cfg.context)})
	}
	p := prompt{Model: rt.Model, Stream: e.Stream, LastUser: askText(req.LastUser), Kind: e.Kind, Rendered: req.Prompt, Parts: req.Parts}
	for _, t := range req.Tools {
		p.Tools = append(p.Tools, tool{Name: t.Name, Schema: t.Schema})
	}
	u := s.observe(e.Session+"/"+p.Kind, p, &e)
	s.kindStats(e.Kind).count(u, e)
	a := s.answer(e.Session, p)
	var calls []geminitest.Call
	for _, c := range a.Calls {
		calls = append(calls, geminitest.Call{ID: googleID(c.ID), Name: c.Name, Args: json.RawMessage(c.Arguments)})
		e.Answer += "call " + c.Name + " " + c.Arguments + "; "
	}
	if len(calls) == 0 {
		e.Answer = "text " + firstLine(a.Text)
	}
	var ledger *geminitest.Ledger
	if signed {
		ledger = s.geminiLedger
	}
	rep := geminitest.NewReply(ledger, req, rt.Model, fmt.Sprintf("scripted-%d", s.n), a.Text, calls)
	rep.Usage.Prompt, rep.Usage.Cached = u.Prompt, u.Cached
	sse := r.URL.Query().Get("alt") == "sse"
	return func(w http.ResponseWriter) { rep.Write(w, e.Stream, sse) }
}

// googleID is a call id as Gemini issues them: eight lower-case letters
// and digits.
func googleID(id string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	h := sha256.Sum256([]byte(id))
	b := make([]byte, 8)
	for i := range b {
		b[i] = alphabet[int(h[i])%len(alphabet)]
	}
	return string(b)
}

// headerNames lists the request's header names, to find what a client
// sends that names its session; values are left out (keys among them).
func headerNames(h http.Header) []string {
	var out []string
	for k := range h {
		out = append(out, strings.ToLower(k))
	}
	sort.Strings(out)
	return out
}
