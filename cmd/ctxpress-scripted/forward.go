package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Forward mode (-forward URL): a recording pass-through in front of
// ctxpress, to see what the client itself sent (and so tell its own
// changes from ctxpress's) and the X-Ctxpress-* headers it got back. It
// neither validates nor scripts; answers stream through as they arrive.

// forwardEntry is one line of requests.jsonl in forward mode.
type forwardEntry struct {
	N            int               `json:"n"`
	At           time.Time         `json:"at"`
	Path         string            `json:"path"`
	Session      string            `json:"session,omitempty"`
	Kind         string            `json:"kind,omitempty"`
	Status       int               `json:"status"`
	PromptTokens int               `json:"prompt_tokens"` // the client's prompt, as the scripted upstream counts
	HasPrev      bool              `json:"has_prev"`
	ExtendsPrev  bool              `json:"extends_prev"` // the client's own prompt extends its previous one
	DivergedPart int               `json:"diverged_part,omitempty"`
	Warnings     []string          `json:"warnings,omitempty"` // what strict templates refuse, in the client's own body
	Headers      map[string]string `json:"headers,omitempty"`  // X-Ctxpress-* answer headers
	Error        string            `json:"error,omitempty"`
}

type forwarder struct {
	proxy *httputil.ReverseProxy
	s     *server // for the session headers, the recording and the streams
}

func newForwarder(target string, s *server) (*forwarder, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	f := &forwarder{s: s}
	f.proxy = &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = u.Host },
		FlushInterval: -1, // every SSE event as it arrives
	}
	return f, nil
}

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	// Recorded when the answer's status and headers are known, before its
	// body reaches the client (so a client that has its answer finds it
	// recorded), or at the end when no header was written; deferred, as
	// the reverse proxy panics (http.ErrAbortHandler) when the client
	// hangs up mid-answer, as codex does after its last event.
	rw := &headerCatcher{ResponseWriter: w}
	rw.onHeader = func() { f.record(r, body, rw) }
	defer rw.header()
	f.proxy.ServeHTTP(rw, r)
}

func (f *forwarder) record(r *http.Request, body []byte, rw *headerCatcher) {
	s := f.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	e := forwardEntry{N: s.n, At: time.Now(), Path: r.URL.Path, Session: s.session(r), Status: rw.status}
	if strings.HasSuffix(r.URL.Path, "/chat/completions") {
		p, cerr := parseChat(body)
		if cerr != nil {
			e.Error = cerr.Message
		} else {
			var ce entry
			u := s.observe(e.Session+"/"+p.Kind, p, &ce)
			e.Kind, e.PromptTokens, e.HasPrev, e.ExtendsPrev, e.DivergedPart = p.Kind, u.Prompt, ce.HasPrev, ce.ExtendsPrev, ce.DivergedPart
			e.Warnings = p.Warnings
		}
	}
	if strings.HasSuffix(r.URL.Path, "/responses") {
		if p, rerr := parseResponses(body, nil); rerr != nil {
			e.Error = rerr.Message
		} else {
			var ce entry
			u := s.observe(e.Session+"/"+p.Kind, p.prompt, &ce)
			e.Kind, e.PromptTokens, e.HasPrev, e.ExtendsPrev, e.DivergedPart = p.Kind, u.Prompt, ce.HasPrev, ce.ExtendsPrev, ce.DivergedPart
		}
	}
	for k, v := range rw.Header() {
		if strings.HasPrefix(strings.ToLower(k), "x-ctxpress-") {
			if e.Headers == nil {
				e.Headers = map[string]string{}
			}
			e.Headers[k] = strings.Join(v, ",")
		}
	}
	b, _ := json.Marshal(e)
	log.Printf("%s", b)
	if s.index != nil {
		_ = os.WriteFile(filepath.Join(s.cfg.record, fmt.Sprintf("%04d.json", e.N)), body, 0o644)
		_, _ = s.index.Write(append(b, '\n'))
	}
}

// headerCatcher notes the status written and calls onHeader once, before
// the header goes out; the headers are the writer's own.
type headerCatcher struct {
	http.ResponseWriter
	status   int
	onHeader func()
}

// header calls onHeader the first time.
func (h *headerCatcher) header() {
	if h.onHeader != nil {
		h.onHeader()
		h.onHeader = nil
	}
}

func (h *headerCatcher) WriteHeader(code int) {
	if h.status == 0 {
		h.status = code
	}
	h.header()
	h.ResponseWriter.WriteHeader(code)
}

func (h *headerCatcher) Write(b []byte) (int, error) {
	if h.status == 0 {
		h.WriteHeader(http.StatusOK)
	}
	return h.ResponseWriter.Write(b)
}

// Flush lets the reverse proxy flush each event through.
func (h *headerCatcher) Flush() {
	if f, ok := h.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
