package proxy

import (
	"bufio"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
	"github.com/valyala/fasthttp"
)

const adminPrefix = "/ctxpress/"

// handleAdmin serves ctxpress's own endpoints under /ctxpress/. Everything
// but healthz needs the admin token when one is configured, and a loopback
// peer when none is.
func (s *Server) handleAdmin(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	if path == pathHealthz {
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"status":"ok"}`)
		return
	}
	if !s.adminAllowed(ctx) {
		writeError(ctx, fasthttp.StatusUnauthorized, "admin_unauthorized",
			"admin endpoints need the admin token (Authorization: Bearer …), or a loopback client when none is set")
		return
	}
	rest := strings.TrimPrefix(path, adminPrefix)
	switch {
	case rest == "events" && ctx.IsGet():
		s.events.serveEvents(ctx)
	case strings.HasPrefix(rest, "conversations/") && strings.HasSuffix(rest, "/compact") && ctx.IsPost():
		id := strings.TrimSuffix(strings.TrimPrefix(rest, "conversations/"), "/compact")
		s.scheduleCompaction(ctx, id)
	default:
		writeError(ctx, fasthttp.StatusNotFound, "not_found", "no such ctxpress endpoint")
	}
}

func (s *Server) adminAllowed(ctx *fasthttp.RequestCtx) bool {
	if s.cfg.AdminToken != "" {
		got := strings.TrimPrefix(string(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)), "Bearer ")
		return subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.AdminToken)) == 1
	}
	addr, ok := ctx.RemoteAddr().(*net.TCPAddr)
	return ok && addr.IP.IsLoopback()
}

// scheduleCompaction marks every conversation with this id (in any
// namespace) to be compacted on its next request.
func (s *Server) scheduleCompaction(ctx *fasthttp.RequestCtx, id string) {
	if s.store == nil || id == "" {
		writeError(ctx, fasthttp.StatusNotFound, "not_found", "no such conversation")
		return
	}
	recs, err := s.store.List(state.ListOptions{ID: id})
	if err != nil {
		writeError(ctx, fasthttp.StatusInternalServerError, "store_error", "cannot read the conversation store")
		return
	}
	n := 0
	for _, r := range recs {
		if _, err := s.store.Update(r.Key, func(r *state.Record) error {
			r.Breaker.ForceNext = true
			return nil
		}); err == nil {
			n++
		}
	}
	if n == 0 {
		writeError(ctx, fasthttp.StatusNotFound, "not_found", "no such conversation")
		return
	}
	ctx.SetStatusCode(fasthttp.StatusAccepted)
	ctx.SetContentType("application/json")
	b, _ := json.Marshal(map[string]any{"conversation": id, "scheduled": n,
		"message": "the conversation is compacted on its next request"})
	ctx.SetBody(b)
}

// answerCompactCommand answers a "/compact" user message itself, in the
// client's stream mode, without a completion call.
func (s *Server) answerCompactCommand(ctx *fasthttp.RequestCtx, x *exchange, res rewrite.Result, o outcome) {
	var text string
	switch {
	case o.compacted:
		text = fmt.Sprintf("ctxpress compacted this conversation: %d earlier messages are now a summary; context %d → %d tokens.",
			o.event.Covered, o.event.TokensBefore, o.event.TokensAfter)
	case o.err != nil:
		text = "ctxpress did not compact this conversation: " + strings.TrimPrefix(o.err.Error(), errSkipped.Error()+": ")
	default:
		text = "ctxpress did not compact this conversation."
	}
	id := fmt.Sprintf("chatcmpl-ctxpress-%d", time.Now().UnixNano())
	created := time.Now().Unix()
	x.status = fasthttp.StatusOK
	ctx.Response.Header.Set(HeaderCompacted, fmt.Sprint(o.compacted))
	if !res.Stream {
		b, _ := json.Marshal(map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": res.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": text}}},
			"usage": map[string]int{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
		})
		ctx.SetContentType("application/json")
		ctx.SetBody(b)
		x.bytesOut = int64(len(b))
		s.logExchange(x)
		return
	}
	chunk := func(delta map[string]any, finish any) []byte {
		b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": res.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		return b
	}
	var sse []byte
	for _, c := range [][]byte{chunk(map[string]any{"role": "assistant", "content": text}, nil), chunk(map[string]any{}, "stop")} {
		sse = append(append(append(sse, "data: "...), c...), "\n\n"...)
	}
	sse = append(sse, "data: [DONE]\n\n"...)
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		_, _ = w.Write(sse)
		_ = w.Flush()
	})
	x.bytesOut = int64(len(sse))
	x.stream = true
	s.logExchange(x)
}
