package admin

import (
	"net/http/pprof"
	"strings"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// servePprof serves net/http/pprof's handlers for name ("pprof/",
// "pprof/heap", "pprof/profile", ...). They read their profile's name from
// a /debug/pprof/ path, so the request is given one.
func servePprof(ctx *fasthttp.RequestCtx, name string) {
	profile := strings.TrimPrefix(name, "pprof/")
	uri := "/debug/pprof/" + profile
	if q := ctx.QueryArgs().String(); q != "" {
		uri += "?" + q
	}
	ctx.Request.SetRequestURI(uri)
	var h fasthttp.RequestHandler
	switch profile {
	case "cmdline":
		h = fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Cmdline)
	case "profile":
		h = fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Profile)
	case "symbol":
		h = fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Symbol)
	case "trace":
		h = fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Trace)
	default: // the index and named profiles: heap, goroutine, allocs, ...
		h = fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Index)
	}
	h(ctx)
}
