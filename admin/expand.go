package admin

import (
	"bytes"
	"errors"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/state"
)

// PathExpand is where an agent gets back what ctxpress replaced: GET
// PathExpand+REF, with ?lines=A-B for some lines only. It answers under
// the credential of the agent's conversations (the proxy authenticates it
// and names its namespace: ServeExpand), not under the admin rule.
const PathExpand = Prefix + "expand/"

// pathOriginals is the operator's way to the same originals: GET
// pathOriginals+REF[?lines=A-B][&namespace=NS], any namespace unless one
// is named, under the admin rule (ctxpress expand asks it while a server
// holds the db).
const pathOriginals = adminPrefix + "originals/"

// Headers of an original's answer: the step that replaced it, the tool
// whose output it was (absent for a compaction's messages), and how many
// lines the whole original has, whatever lines were asked.
const (
	HeaderKind       = "X-Ctxpress-Kind"
	HeaderTool       = "X-Ctxpress-Tool"
	HeaderTotalLines = "X-Ctxpress-Total-Lines"
)

// Codes of the errors an original's endpoint answers.
const (
	CodeOriginalNotFound = "original_not_found"
	CodeInvalidRef       = "invalid_ref"
	CodeInvalidLines     = "invalid_lines"
)

// IsExpand reports whether path is an agent's retrieval of an original,
// which the proxy routes before the admin endpoints.
func IsExpand(path []byte) bool { return bytes.HasPrefix(path, []byte(PathExpand)) }

// ServeExpand answers an agent's GET PathExpand+REF from the originals of
// namespace ns, the one its credential names, and returns the status it
// answered. Another namespace's original is not found.
func (a *Admin) ServeExpand(ctx *fasthttp.RequestCtx, ns string) int {
	ref := strings.TrimPrefix(string(ctx.Path()), PathExpand)
	a.serveOriginal(ctx, ref, "for this client key", "http", func(st state.Store) (expand.Original, bool, error) {
		return st.GetOriginal(ns, ref)
	})
	return ctx.Response.StatusCode()
}

// serveOriginals answers the operator's GET pathOriginals+REF.
func (a *Admin) serveOriginals(ctx *fasthttp.RequestCtx) {
	ref := strings.TrimPrefix(string(ctx.Path()), pathOriginals)
	ns := string(ctx.QueryArgs().Peek("namespace"))
	where := "in any namespace"
	if ns != "" {
		where = "in namespace " + strconv.Quote(ns)
	}
	a.serveOriginal(ctx, ref, where, "cli", func(st state.Store) (expand.Original, bool, error) {
		if ns != "" {
			return st.GetOriginal(ns, ref)
		}
		if f, ok := st.(state.OriginalFinder); ok {
			return f.FindOriginal(ref)
		}
		return expand.Original{}, false, nil
	})
}

// serveOriginal answers with the original lookup finds under ref, or the
// lines the query asks of it: its bytes exactly, as text. where says,
// in a not-found answer, where it was looked for.
// A GET that finds it counts as a retrieval by way (Metrics.Retrieved):
// "http" for an agent's, "cli" for the operator's (ctxpress expand).
func (a *Admin) serveOriginal(ctx *fasthttp.RequestCtx, ref, where, way string, lookup func(state.Store) (expand.Original, bool, error)) {
	if !ctx.IsGet() && !ctx.IsHead() {
		writeError(ctx, fasthttp.StatusMethodNotAllowed, "method_not_allowed", "an original answers GET")
		ctx.Response.Header.Set(fasthttp.HeaderAllow, "GET, HEAD")
		return
	}
	if !expand.ValidRef(ref) {
		writeError(ctx, fasthttp.StatusBadRequest, CodeInvalidRef,
			strconv.Quote(ref)+" is not a reference: want the "+strconv.Itoa(expand.RefLen)+" lowercase hex digits a marker gives")
		return
	}
	lines, err := expand.ParseLines(string(ctx.QueryArgs().Peek("lines")))
	if err != nil {
		writeError(ctx, fasthttp.StatusBadRequest, CodeInvalidLines, err.Error())
		return
	}
	var o expand.Original
	found := false
	if st := a.deps.Store; st != nil {
		o, found, err = lookup(st)
	}
	switch {
	case errors.Is(err, state.ErrCorrupt):
		writeError(ctx, fasthttp.StatusInternalServerError, "store_error", "the original kept under "+ref+" is damaged and cannot be read")
		return
	case err != nil:
		a.storeError(ctx, "read", err)
		return
	case !found:
		writeError(ctx, fasthttp.StatusNotFound, CodeOriginalNotFound, "no original kept under "+ref+" "+where+
			": it was never kept, or was removed past the retention or the size cap (expand.max_bytes)")
		return
	}
	h := &ctx.Response.Header
	h.Set(HeaderKind, o.Kind)
	if o.Tool != "" {
		h.Set(HeaderTool, o.Tool)
	}
	h.Set(HeaderTotalLines, strconv.Itoa(expand.CountLines(o.Text)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString(expand.Slice(o.Text, lines))
	if a.metrics != nil && ctx.IsGet() {
		a.metrics.Retrieved(o.Kind, o.Tool, way)
	}
}
