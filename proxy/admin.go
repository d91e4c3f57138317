package proxy

import (
	"crypto/subtle"
	"net"
	"net/url"
	"strings"

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
