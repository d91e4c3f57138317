package admin

import (
	"encoding/json"
	"time"

	"crypto/subtle"
	"github.com/ctxpress/ctxpress/state"
	"net"
	"net/url"
	"strings"

	"github.com/valyala/fasthttp"
)

// Prefix is where ctxpress's own endpoints live.
const Prefix = "/ctxpress/"

// adminPrefix is Prefix, as this package's paths read it.
const adminPrefix = Prefix

// pathHealthz answers without the admin rule.
const pathHealthz = adminPrefix + "healthz"

// Config is the admin side's settings.
type Config struct {
	// Token is the admin token; "" means loopback clients only.
	Token string
	// MetricsPublic serves /metrics to anyone.
	MetricsPublic bool
	// Pprof serves /ctxpress/debug/pprof/.
	Pprof bool
	UI    UIConfig
	// Clock is the time the stats are stamped with.
	Clock func() time.Time
	// Mode is the proxy's mode ("normal" or "observe"): in observe mode the
	// figures are what ctxpress would have done.
	Mode string
}

// Deps are what the admin side reads: the store (nil: none), the prices
// of its bills, the server's compactions (Compacting: of one
// conversation; Running: how many now), its events and metrics, and how a
// store failure is reported (StoreFailed: counted and logged once per
// interval by the server).
type Deps struct {
	Store       state.Store
	Pricing     Pricing
	Compacting  func(state.Key) bool
	Running     func() int
	Events      *Bus
	Metrics     *Metrics
	StoreFailed func(op, msg string, err error)
}

// Admin serves /ctxpress/ and /metrics: the admin rule, the conversations
// API, stats, events, the dashboard and pprof.
type Admin struct {
	cfg     Config
	deps    Deps
	events  *Bus
	metrics *Metrics
	kept    *Kept // the bodies of recent turns, for their turn view
}

// New is the admin side of a server configured as cfg.
func New(cfg Config, deps Deps) *Admin {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Admin{cfg: cfg, deps: deps, events: deps.Events, metrics: deps.Metrics,
		kept: NewKept(KeptPerConversation, KeptBytes)}
}

// Keep keeps an answered turn's bodies for its turn view (Kept.Keep),
// stamped now, while somebody looks: a dashboard following turns, or the
// admin API used within KeptWatch. Call it as the turn is queued for its
// record.
func (a *Admin) Keep(d TurnDetail) {
	watched := a.events.watched()
	if !watched && a.kept.until.Load() == 0 { // never watched: not even a clock reading
		return
	}
	if now := a.cfg.Clock(); watched || a.kept.watched(now) {
		a.kept.Keep(d, now)
	}
}

// Cookie carries the admin token for the dashboard: a browser cannot
// put it in an Authorization header on a page load or an EventSource.
const Cookie = "ctxpress_admin"

// Serve serves ctxpress's own endpoints under /ctxpress/. Everything but
// healthz needs the admin token when one is configured, and a loopback
// peer when none is.
func (a *Admin) Serve(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	if path == pathHealthz {
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"status":"ok"}`)
		return
	}
	if path == pathUI && ctx.QueryArgs().Has("token") {
		a.uiLogin(ctx)
		return
	}
	if !a.Allowed(ctx) {
		writeError(ctx, fasthttp.StatusUnauthorized, "admin_unauthorized",
			"admin endpoints need the admin token (Authorization: Bearer …), or a loopback client when none is set (admin_token, env CTXPRESS_ADMIN_TOKEN)")
		return
	}
	// Somebody looks: the turns answered from now on keep their bodies
	// for the turn view a while.
	a.kept.Watch(a.cfg.Clock().Add(KeptWatch))
	if !ctx.IsGet() && !ctx.IsHead() && crossSite(ctx) {
		writeError(ctx, fasthttp.StatusForbidden, "cross_site", "admin changes are not accepted from another site's page")
		return
	}
	rest := strings.TrimPrefix(path, adminPrefix)
	get := ctx.IsGet() || ctx.IsHead()
	switch {
	case rest == "events" && get:
		a.events.serveEvents(ctx)
	case (rest == "ui" || strings.HasPrefix(rest, "ui/")) && get:
		a.serveUI(ctx, rest)
	case rest == "stats" && get:
		a.serveStats(ctx)
	case rest == "conversations" && get:
		a.listConversations(ctx)
	case strings.HasPrefix(rest, "conversations/"):
		a.conversationEndpoint(ctx)
	case strings.HasPrefix(path, pathOriginals):
		a.serveOriginals(ctx)
	case strings.HasPrefix(rest, "debug/pprof/") && a.cfg.Pprof:
		servePprof(ctx, strings.TrimPrefix(rest, "debug/"))
	default:
		writeError(ctx, fasthttp.StatusNotFound, "not_found", "no such ctxpress endpoint")
	}
}

// Allowed applies the admin rule: the admin token (Authorization:
// Bearer, or the dashboard's cookie) when one is set, else a loopback peer.
func (a *Admin) Allowed(ctx *fasthttp.RequestCtx) bool {
	if a.cfg.Token != "" {
		// Only "Bearer <token>" counts: a bare token in Authorization is
		// refused, as a strict API would.
		auth := string(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization))
		got, bearer := strings.CutPrefix(auth, "Bearer ")
		if !bearer {
			got = ""
		}
		if auth == "" {
			got = string(ctx.Request.Header.Cookie(Cookie))
		}
		return subtle.ConstantTimeCompare([]byte(got), []byte(a.cfg.Token)) == 1
	}
	addr, ok := ctx.RemoteAddr().(*net.TCPAddr)
	return ok && addr.IP.IsLoopback()
}

// uiLogin turns /ctxpress/ui?token=… into the dashboard's cookie and
// redirects to the page without the token, so it stays out of the address
// bar and history. The cookie is HttpOnly and SameSite=Strict: another
// site's page can neither read it nor send it.
func (a *Admin) uiLogin(ctx *fasthttp.RequestCtx) {
	token := ctx.QueryArgs().Peek("token")
	if a.cfg.Token == "" || subtle.ConstantTimeCompare(token, []byte(a.cfg.Token)) != 1 {
		writeError(ctx, fasthttp.StatusUnauthorized, "admin_unauthorized", "wrong admin token")
		return
	}
	c := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(c)
	c.SetKey(Cookie)
	c.SetValue(a.cfg.Token)
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

// writeError answers one of ctxpress's own errors in OpenAI's shape, the
// one its admin clients read.
func writeError(ctx *fasthttp.RequestCtx, status int, code, message string) {
	type detail struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	}
	b, _ := json.Marshal(struct {
		Error detail `json:"error"`
	}{detail{"ctxpress: " + message, "ctxpress_error", code}})
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}
