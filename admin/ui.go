package admin

import (
	"embed"
	"path"
	"strings"

	"github.com/valyala/fasthttp"
)

// UIConfig configures the dashboard. The yaml tags are the config file's
// ui: keys.
type UIConfig struct {
	// PricePerMillionTokens is deprecated: money is the bill at per-model
	// prices (Config.Cost), net of cache effects and summary calls, and
	// this flat input price no longer enters it. Negative still hides
	// money on the dashboard; 0 means DefaultPricePerMillionTokens, shown
	// in Stats for old readers.
	PricePerMillionTokens float64 `yaml:"price_per_million_tokens"`
	// Currency is the symbol shown before amounts; "" means DefaultCurrency.
	// Prices are in USD unless models: gives them in another currency.
	Currency string `yaml:"currency"`
}

// Defaults of UIConfig.
const (
	// DefaultPricePerMillionTokens is a typical hosted model's input price
	// in US dollars (gpt-4o's list price when this was written).
	DefaultPricePerMillionTokens = 2.5
	DefaultCurrency              = "$"
)

func (c UIConfig) price() float64 {
	if c.PricePerMillionTokens == 0 {
		return DefaultPricePerMillionTokens
	}
	return max(c.PricePerMillionTokens, 0)
}

func (c UIConfig) currency() string {
	if c.Currency == "" {
		return DefaultCurrency
	}
	return c.Currency
}

// uiFiles is the whole dashboard: plain HTML, CSS and JavaScript, no build
// step, nothing fetched from elsewhere.
//
//go:embed ui/index.html ui/app.js ui/style.css
var uiFiles embed.FS

const pathUI = adminPrefix + "ui"

// uiContentTypes by file extension.
var uiContentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

// uiCSP allows the page its own script, style and API only: summary text is
// untrusted (it is model output), and the page never inserts it as markup,
// but a policy without inline script makes a mistake there harmless.
const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// serveUI serves /ctxpress/ui (the page) and /ctxpress/ui/{app.js,style.css}.
func (a *Admin) serveUI(ctx *fasthttp.RequestCtx, rest string) {
	name := "index.html"
	if f := strings.TrimPrefix(rest, "ui/"); f != rest && f != "" {
		name = f
	}
	data, err := uiFiles.ReadFile("ui/" + name)
	if err != nil || strings.Contains(name, "/") {
		writeError(ctx, fasthttp.StatusNotFound, "not_found", "no such ctxpress endpoint")
		return
	}
	h := &ctx.Response.Header
	h.Set("Content-Type", uiContentTypes[path.Ext(name)])
	h.Set("Content-Security-Policy", uiCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	ctx.SetBody(data)
}
