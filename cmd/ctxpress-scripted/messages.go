package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/ctxpress/ctxpress/internal/messagestest"
)

// The Anthropic Messages format (POST {base}/messages, query ignored, and
// {base}/messages/count_tokens), for Claude Code: requests checked by
// internal/messagestest as strictly as api.anthropic.com checks them and
// refused in its error shape; an x-api-key required; thinking blocks
// signed and verified (text and prefix) when sent back; prompt caching
// simulated on the cache_control markers; and with -context N, Anthropic's
// "prompt is too long" past N tokens.

// anthropicState is the Messages half of the server (under server.mu).
type anthropicState struct {
	ledger *messagestest.Ledger
	// cached holds the prefixes written at earlier requests' markers.
	cached map[[32]byte]bool
}

func (s *server) anthropic() *anthropicState {
	if s.anth == nil {
		s.anth = &anthropicState{ledger: messagestest.NewLedger(), cached: map[[32]byte]bool{}}
	}
	return s.anth
}

// anthropicUsage is what a Messages answer reports.
type anthropicUsage struct {
	Input         int `json:"input_tokens"`
	CacheCreation int `json:"cache_creation_input_tokens"`
	CacheRead     int `json:"cache_read_input_tokens"`
	Output        int `json:"output_tokens"`
}

// tokens is the scripted tokenizer: 4 bytes a token, rounded up.
func tokens(bytes int) int { return (bytes + 3) / 4 }

// apiKeyMissing is Anthropic's answer to a request without x-api-key.
var apiKeyMissing = &messagestest.Error{Status: http.StatusUnauthorized, Type: "authentication_error", Message: "x-api-key header is required"}

func (s *server) messages(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	reply := s.messagesTurn(r, body, err)
	reply(w)
}

// messagesTurn checks and answers one Messages or count_tokens request
// under the lock, recording it, and returns how to answer it.
func (s *server) messagesTurn(r *http.Request, body []byte, readErr error) func(http.ResponseWriter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	e := entry{N: s.n, At: time.Now(), Path: r.URL.Path, Session: s.session(r), UserAgent: r.UserAgent()}
	defer func() { s.write(e, body) }()
	refusal := func(err *messagestest.Error) func(http.ResponseWriter) {
		e.Status, e.Error = err.Status, err.Message
		s.kindStats(e.Kind).Refused++
		return err.Write
	}
	count := strings.HasSuffix(r.URL.Path, "/count_tokens")
	if r.Header.Get("X-Api-Key") == "" {
		return refusal(apiKeyMissing)
	}
	if readErr != nil {
		return refusal(&messagestest.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: readErr.Error()})
	}
	st := s.anthropic()
	req, cerr := messagestest.Check(body, messagestest.Options{Ledger: st.ledger, CountTokens: count, Header: r.Header})
	if req != nil {
		e.Model, e.Stream, e.Messages = req.Model, req.Stream, req.Messages
		e.Kind = kindOf(askText(req.LastUser), len(req.Tools))
	}
	s.kindStats(e.Kind).Requests++
	if cerr != nil {
		return refusal(cerr)
	}
	total := tokens(req.Prompt.Bytes(len(req.Prompt.Segments)))
	e.PromptTokens, e.Status = total, http.StatusOK
	if count {
		e.Kind, e.Answer = "count_tokens", fmt.Sprintf("input_tokens %d", total)
		return func(w http.ResponseWriter) { writeJSON(w, map[string]int{"input_tokens": total}) }
	}
	if s.cfg.context > 0 && total > s.cfg.context {
		e.Status = http.StatusBadRequest
		return refusal(&messagestest.Error{Status: http.StatusBadRequest, Type: "invalid_request_error",
			Message: fmt.Sprintf("prompt is too long: %d tokens > %d maximum", total, s.cfg.context)})
	}
	u := st.cache(req)
	e.CachedTokens = u.CacheRead
	s.kindStats(e.Kind).PromptTokens += total
	s.kindStats(e.Kind).CachedTokens += u.CacheRead
	// Rendered: the body itself, for a follow: step to read the markers.
	p := prompt{Model: req.Model, Stream: req.Stream, LastUser: askText(req.LastUser), Kind: e.Kind, Rendered: body}
	for _, t := range req.Tools {
		p.Tools = append(p.Tools, tool{Name: t.Name, Schema: t.Schema})
	}
	id := fmt.Sprintf("msg_scripted_%d", s.n)
	blocks := st.blocks(req, id, s.answer(e.Session, p))
	u.Output = outputTokens(blocks)
	e.Answer = describeBlocks(blocks)
	return func(w http.ResponseWriter) { writeMessage(w, req, id, blocks, u) }
}

// cache computes a request's usage as prompt caching reports it: the read
// part is the longest prefix (ending at a block) an earlier request wrote
// at one of its markers, up to this request's last marker; the part from
// there to the last marker is written; the rest is plain input. Then this
// request's marked prefixes are written.
func (st *anthropicState) cache(req *messagestest.Request) anthropicUsage {
	p := req.Prompt
	total := p.Bytes(len(p.Segments))
	last := p.LastMarker()
	read := 0
	for k := last; k > 0; k-- {
		if st.cached[p.Hash(k)] {
			read = p.Bytes(k)
			break
		}
	}
	for k, marked := range p.Marked {
		if marked {
			st.cached[p.Hash(k+1)] = true
		}
	}
	u := anthropicUsage{CacheRead: tokens(read)}
	if last > 0 {
		u.CacheCreation = tokens(p.Bytes(last)) - u.CacheRead
	}
	u.Input = tokens(total) - u.CacheRead - u.CacheCreation
	return u
}

// contentBlock is one block of an answer.
type contentBlock struct {
	Type      string          `json:"type"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	Text      *string         `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// blocks turns the script's answer into content: a signed thinking block
// when the request thinks (its text empty under display "omitted", as
// the API sends it), a text, and the tool calls.
func (st *anthropicState) blocks(req *messagestest.Request, id string, a answer) []contentBlock {
	var out []contentBlock
	if req.Thinking == "enabled" || req.Thinking == "adaptive" {
		text := "Scripted thinking about the next step."
		if req.ThinkingDisplay == "omitted" {
			text = ""
		}
		sig := st.ledger.Think(req, id, text)
		out = append(out, contentBlock{Type: "thinking", Thinking: &text, Signature: &sig})
	}
	text := a.Text
	if len(a.Calls) > 0 {
		text = "Running the next step."
	}
	out = append(out, contentBlock{Type: "text", Text: &text})
	for _, c := range a.Calls {
		callID := "toolu_" + strings.TrimPrefix(c.ID, "call_")
		st.ledger.ToolUse(id, callID)
		out = append(out, contentBlock{Type: "tool_use", ID: callID, Name: c.Name, Input: json.RawMessage(c.Arguments)})
	}
	return out
}

func stopReason(blocks []contentBlock) string {
	if blocks[len(blocks)-1].Type == "tool_use" {
		return "tool_use"
	}
	return "end_turn"
}

func outputTokens(blocks []contentBlock) int {
	n := 1
	for _, b := range blocks {
		b, _ := json.Marshal(b)
		n += tokens(len(b))
	}
	return n
}

func describeBlocks(blocks []contentBlock) string {
	var parts []string
	for _, b := range blocks {
		switch b.Type {
		case "tool_use":
			parts = append(parts, "call "+b.Name+" "+string(b.Input))
		case "text":
			parts = append(parts, "text "+firstLine(*b.Text))
		}
	}
	return strings.Join(parts, "; ")
}

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
