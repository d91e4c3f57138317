package proxy

import (
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/ctxpress/ctxpress/state"
	"github.com/valyala/fasthttp"
)

// The conversations API: GET /ctxpress/conversations (paged, newest
// first), GET and DELETE /ctxpress/conversations/{id}, POST
// /ctxpress/conversations/{id}/compact, and GET /ctxpress/stats. The
// handlers below only speak HTTP: the operations are Conversations'.
//
// One id may exist in several namespaces: the {id} endpoints act on every
// match and answer them all in "data", unless ?namespace= picks one. An id
// with a slash is sent percent-encoded (%2F).

// isCompacting reports whether a summary of key is being written now.
func (c *compactions) isCompacting(key state.Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.inflight {
		if k.key == key {
			return true
		}
	}
	return false
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(ctx, fasthttp.StatusInternalServerError, "internal_error", "cannot encode the answer")
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(b)
}

// storeError answers a failure to verb ("read", "update") the store.
func (s *Server) storeError(ctx *fasthttp.RequestCtx, verb string, err error) {
	op := "write"
	if verb == "read" {
		op = "read"
	}
	s.storeFailed(op, "admin API: cannot "+verb+" the conversation store", err)
	writeError(ctx, fasthttp.StatusInternalServerError, "store_error", "cannot "+verb+" the conversation store")
}

// serveStats answers GET /ctxpress/stats: totals over every record. It
// reads every record, so it costs in proportion to the db; the dashboard
// asks at most once a second.
func (s *Server) serveStats(ctx *fasthttp.RequestCtx) {
	pricing := s.pricing()
	st := Stats{PricePerMillionTokens: s.cfg.UI.price(), Currency: s.cfg.UI.currency(),
		Compacting: s.comp.running(), Time: s.cfg.Clock().UTC(), Costs: Costs{CostUnit: pricing.unit()}}
	var usage, summary, server state.Usage
	if s.store != nil {
		_, st.Persistent = s.store.(state.Sizer)
		recs, err := s.store.List(state.ListOptions{})
		if err != nil {
			s.storeError(ctx, "read", err)
			return
		}
		for _, r := range recs {
			st.Conversations++
			st.Requests += r.Requests
			st.TokensBefore += r.TokensBefore
			st.TokensAfter += r.TokensAfter
			st.TokensSaved += r.TokensSaved
			st.Compactions += r.Compactions
			usage, summary, server = usage.Plus(r.Usage), summary.Plus(r.Summary), server.Plus(r.ServerCompaction)
			st.Costs = st.Costs.plus(pricing.costs(r))
		}
	}
	st.Usage, st.SummaryUsage, st.CachedShare = usageInfoOf(usage), usageInfoOf(summary), cachedShare(usage)
	st.ServerCompactionUsage = usageInfoOf(server)
	writeJSON(ctx, fasthttp.StatusOK, st)
}

// listConversations answers GET /ctxpress/conversations?offset=&limit=&namespace=,
// most recently updated first.
func (s *Server) listConversations(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	offset, limit := 0, defaultListLimit
	for name, dst := range map[string]*int{"offset": &offset, "limit": &limit} {
		if v := args.Peek(name); len(v) > 0 {
			n, err := strconv.Atoi(string(v))
			if err != nil || n < 0 {
				writeError(ctx, fasthttp.StatusBadRequest, "bad_request", name+" must be a non-negative integer")
				return
			}
			*dst = n
		}
	}
	page, err := s.conversations().List(string(args.Peek("namespace")), offset, limit)
	if err != nil {
		s.storeError(ctx, "read", err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, page)
}

// conversationEndpoint routes /ctxpress/conversations/{id}[/compact].
func (s *Server) conversationEndpoint(ctx *fasthttp.RequestCtx) {
	id, action, ok := conversationPath(string(ctx.URI().PathOriginal()))
	switch {
	case !ok:
		writeError(ctx, fasthttp.StatusNotFound, "not_found", "no such ctxpress endpoint")
	case action == "compact" && ctx.IsPost():
		s.scheduleCompaction(ctx, id)
	case action == "" && (ctx.IsGet() || ctx.IsHead()):
		s.showConversation(ctx, id)
	case action == "" && ctx.IsDelete():
		s.deleteConversation(ctx, id)
	case action == "" || action == "compact":
		writeError(ctx, fasthttp.StatusMethodNotAllowed, "method_not_allowed",
			"conversations/{id} answers GET and DELETE; conversations/{id}/compact answers POST")
	default:
		writeError(ctx, fasthttp.StatusNotFound, "not_found", "no such ctxpress endpoint")
	}
}

// conversationPath splits the escaped request path into the conversation
// id (unescaped) and the action after it ("" or "compact"). The escaped
// form is read so that an id holding an encoded slash stays one id.
func conversationPath(escaped string) (id, action string, ok bool) {
	rest, found := strings.CutPrefix(escaped, adminPrefix+"conversations/")
	if !found {
		return "", "", false
	}
	raw, action, _ := strings.Cut(rest, "/")
	if strings.Contains(action, "/") {
		return "", "", false
	}
	id, err := url.PathUnescape(raw)
	if err != nil || id == "" {
		return "", "", false
	}
	return id, action, true
}

// conversations are the conversation operations on s's store.
func (s *Server) conversations() Conversations {
	return Conversations{Store: s.store, Compacting: s.comp.isCompacting, Pricing: s.pricing()}
}

// conversationError answers an error of a Conversations operation: 404 for
// an unknown id, else a store failure.
func (s *Server) conversationError(ctx *fasthttp.RequestCtx, verb string, err error) {
	if errors.Is(err, ErrConversationNotFound) {
		writeError(ctx, fasthttp.StatusNotFound, "conversation_not_found", "no such conversation")
		return
	}
	s.storeError(ctx, verb, err)
}

func (s *Server) showConversation(ctx *fasthttp.RequestCtx, id string) {
	details, err := s.conversations().Show(id, string(ctx.QueryArgs().Peek("namespace")))
	if err != nil {
		s.conversationError(ctx, "read", err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, struct {
		Object string               `json:"object"`
		ID     string               `json:"id"`
		Data   []ConversationDetail `json:"data"`
	}{Object: "list", ID: id, Data: details})
}

func (s *Server) deleteConversation(ctx *fasthttp.RequestCtx, id string) {
	deleted, err := s.conversations().Forget(id, string(ctx.QueryArgs().Peek("namespace")))
	if err != nil {
		s.conversationError(ctx, "update", err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"id": id, "deleted": len(deleted), "namespaces": deleted})
}

// scheduleCompaction marks every conversation with this id (in the
// namespace asked, else in any) to be compacted on its next request.
func (s *Server) scheduleCompaction(ctx *fasthttp.RequestCtx, id string) {
	n, err := s.conversations().Compact(id, string(ctx.QueryArgs().Peek("namespace")))
	if err != nil {
		s.conversationError(ctx, "update", err)
		return
	}
	writeJSON(ctx, fasthttp.StatusAccepted, map[string]any{"conversation": id, "scheduled": n,
		"message": "the conversation is compacted on its next request"})
}
