package proxy

import (
	"bufio"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/valyala/fasthttp"
)

const adminPrefix = "/ctxpress/"

// adminCookie carries the admin token for the dashboard: a browser cannot
// put it in an Authorization header on a page load or an EventSource.
const adminCookie = "ctxpress_admin"

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
	if path == pathUI && ctx.QueryArgs().Has("token") {
		s.uiLogin(ctx)
		return
	}
	if !s.adminAllowed(ctx) {
		writeError(ctx, fasthttp.StatusUnauthorized, "admin_unauthorized",
			"admin endpoints need the admin token (Authorization: Bearer …), or a loopback client when none is set")
		return
	}
	if !ctx.IsGet() && !ctx.IsHead() && crossSite(ctx) {
		writeError(ctx, fasthttp.StatusForbidden, "cross_site", "admin changes are not accepted from another site's page")
		return
	}
	rest := strings.TrimPrefix(path, adminPrefix)
	get := ctx.IsGet() || ctx.IsHead()
	switch {
	case rest == "events" && get:
		s.events.serveEvents(ctx)
	case (rest == "ui" || strings.HasPrefix(rest, "ui/")) && get:
		s.serveUI(ctx, rest)
	case rest == "stats" && get:
		s.serveStats(ctx)
	case rest == "conversations" && get:
		s.listConversations(ctx)
	case strings.HasPrefix(rest, "conversations/"):
		s.conversationEndpoint(ctx)
	case strings.HasPrefix(rest, "debug/pprof/") && s.cfg.Pprof:
		servePprof(ctx, strings.TrimPrefix(rest, "debug/"))
	default:
		writeError(ctx, fasthttp.StatusNotFound, "not_found", "no such ctxpress endpoint")
	}
}

// adminAllowed applies the admin rule: the admin token (Authorization:
// Bearer, or the dashboard's cookie) when one is set, else a loopback peer.
func (s *Server) adminAllowed(ctx *fasthttp.RequestCtx) bool {
	if s.cfg.AdminToken != "" {
		// Only "Bearer <token>" counts: a bare token in Authorization is
		// refused, as a strict API would.
		auth := string(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization))
		got, bearer := strings.CutPrefix(auth, "Bearer ")
		if !bearer {
			got = ""
		}
		if auth == "" {
			got = string(ctx.Request.Header.Cookie(adminCookie))
		}
		return subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.AdminToken)) == 1
	}
	addr, ok := ctx.RemoteAddr().(*net.TCPAddr)
	return ok && addr.IP.IsLoopback()
}

// uiLogin turns /ctxpress/ui?token=… into the dashboard's cookie and
// redirects to the page without the token, so it stays out of the address
// bar and history. The cookie is HttpOnly and SameSite=Strict: another
// site's page can neither read it nor send it.
func (s *Server) uiLogin(ctx *fasthttp.RequestCtx) {
	token := ctx.QueryArgs().Peek("token")
	if s.cfg.AdminToken == "" || subtle.ConstantTimeCompare(token, []byte(s.cfg.AdminToken)) != 1 {
		writeError(ctx, fasthttp.StatusUnauthorized, "admin_unauthorized", "wrong admin token")
		return
	}
	c := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(c)
	c.SetKey(adminCookie)
	c.SetValue(s.cfg.AdminToken)
	c.SetPath(adminPrefix)
	c.SetHTTPOnly(true)
	c.SetSameSite(fasthttp.CookieSameSiteStrictMode)
	ctx.Response.Header.SetCookie(c)
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.Redirect(pathUI, fasthttp.StatusSeeOther)
}

// crossSite reports whether a browser says the request comes from another
// site's page. A page anywhere can POST a form to 127.0.0.1 with no CORS
// check, so changes need the browser's word that they come from ctxpress's
// own page; clients that are not browsers send neither header.
func crossSite(ctx *fasthttp.RequestCtx) bool {
	if site := string(ctx.Request.Header.Peek("Sec-Fetch-Site")); site != "" {
		return site != "same-origin" && site != "none"
	}
	origin := string(ctx.Request.Header.Peek("Origin"))
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err != nil || u.Host != string(ctx.Host())
}

// answerCompactCommand answers a "/compact" user message itself, in the
// client's stream mode, without a completion call. The reply starts with
// rewrite.CompactReplyPrefix: that is how later requests, which carry the
// command and this reply, leave both out of what they forward.
func (s *Server) answerCompactCommand(ctx *fasthttp.RequestCtx, x *exchange, res rewrite.Result, o outcome) {
	var text string
	switch {
	case o.compacted:
		text = fmt.Sprintf("compacted this conversation: %d earlier messages are now a summary; context %d → %d tokens.",
			o.event.Covered, o.event.TokensBefore, o.event.TokensAfter)
	case o.err != nil:
		text = "did not compact this conversation: " + strings.TrimPrefix(o.err.Error(), errSkipped.Error()+": ")
	default:
		text = "did not compact this conversation."
	}
	text = rewrite.CompactReplyPrefix + " " + text
	id := fmt.Sprintf("chatcmpl-ctxpress-%d", time.Now().UnixNano())
	created := time.Now().Unix()
	x.status = fasthttp.StatusOK
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
		s.finish(x)
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
	s.finish(x)
}
