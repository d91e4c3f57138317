package admin

import (
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/ctxpress/ctxpress/state"
	"github.com/valyala/fasthttp"
)

// The conversations API: GET /ctxpress/conversations (paged, newest
// first), GET and DELETE /ctxpress/conversations/{id}, POST
// /ctxpress/conversations/{id}/compact, GET
// /ctxpress/conversations/{id}/turns/{n} (one turn: turnview.go), and GET
// /ctxpress/stats. The handlers below only speak HTTP: the operations are
// Conversations'.
//
// One id may exist in several namespaces: the {id} endpoints act on every
// match and answer them all in "data", unless ?namespace= picks one. An id
// with a slash is sent percent-encoded (%2F).

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
func (a *Admin) storeError(ctx *fasthttp.RequestCtx, verb string, err error) {
	op := "write"
	if verb == "read" {
		op = "read"
	}
	if a.deps.StoreFailed != nil {
		a.deps.StoreFailed(op, "admin API: cannot "+verb+" the conversation store", err)
	}
	writeError(ctx, fasthttp.StatusInternalServerError, "store_error", "cannot "+verb+" the conversation store")
}

// serveStats answers GET /ctxpress/stats: totals over every record. It
// reads every record, so it costs in proportion to the db; the dashboard
// asks at most once a second.
func (a *Admin) serveStats(ctx *fasthttp.RequestCtx) {
	pricing := a.deps.Pricing
	st := Stats{PricePerMillionTokens: a.cfg.UI.price(), Currency: a.cfg.UI.currency(),
		Time: a.cfg.Clock().UTC(), Costs: Costs{CostUnit: pricing.Unit()}, Mode: a.cfg.Mode}
	if st.Mode == "" {
		st.Mode = "normal"
	}
	if a.deps.Running != nil {
		st.Compacting = a.deps.Running()
	}
	if a.metrics != nil {
		st.Retrievals = a.metrics.retrievals.Load()
		st.Retrieved = a.metrics.retrievedRows()
	}
	var usage, summary, server state.Usage
	var money, prefill *Costs // the bills summed by unit; nil: none in it
	var assumed []string
	if a.deps.Store != nil {
		_, st.Persistent = a.deps.Store.(state.Sizer)
		recs, err := a.deps.Store.List(state.ListOptions{})
		if err != nil {
			a.storeError(ctx, "read", err)
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
			bill := pricing.Bill(r)
			if bill.CostUnit == CostPrefill {
				prefill = addBill(prefill, bill)
			} else {
				money = addBill(money, bill)
			}
			if bill.PriceBasis == BasisAssumed && !slices.Contains(assumed, r.Model) {
				assumed = append(assumed, r.Model)
			}
		}
	}
	switch {
	case money != nil:
		st.Costs, st.PrefillCosts = *money, prefill
	case prefill != nil:
		st.Costs = *prefill
	}
	st.Usage, st.SummaryUsage, st.CachedShare = UsageInfoOf(usage), UsageInfoOf(summary), cachedShare(usage)
	st.ServerCompactionUsage = UsageInfoOf(server)
	st.Saved = savedTile(savedFacts{Money: money, Prefill: prefill, SummaryCalls: summary.Calls, AssumedModels: assumed,
		Currency: st.Currency})
	writeJSON(ctx, fasthttp.StatusOK, st)
}

// addBill adds c to sum (nil: none yet) and returns the sum.
func addBill(sum *Costs, c Costs) *Costs {
	if sum == nil {
		sum = &Costs{CostUnit: c.CostUnit}
	}
	*sum = sum.plus(c)
	return sum
}

// listConversations answers GET /ctxpress/conversations?offset=&limit=&namespace=,
// most recently updated first.
func (a *Admin) listConversations(ctx *fasthttp.RequestCtx) {
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
	page, err := a.conversations().List(string(args.Peek("namespace")), offset, limit)
	if err != nil {
		a.storeError(ctx, "read", err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, page)
}

// conversationEndpoint routes /ctxpress/conversations/{id}[/compact|/turns/{n}].
func (a *Admin) conversationEndpoint(ctx *fasthttp.RequestCtx) {
	id, action, ok := conversationPath(string(ctx.URI().PathOriginal()))
	turn, isTurn := strings.CutPrefix(action, "turns/")
	switch {
	case !ok:
		writeError(ctx, fasthttp.StatusNotFound, "not_found", "no such ctxpress endpoint")
	case isTurn && (ctx.IsGet() || ctx.IsHead()):
		a.showTurn(ctx, id, turn)
	case isTurn:
		writeError(ctx, fasthttp.StatusMethodNotAllowed, "method_not_allowed", "conversations/{id}/turns/{n} answers GET")
	case action == "compact" && ctx.IsPost():
		a.scheduleCompaction(ctx, id)
	case action == "" && (ctx.IsGet() || ctx.IsHead()):
		a.showConversation(ctx, id)
	case action == "" && ctx.IsDelete():
		a.deleteConversation(ctx, id)
	case action == "" || action == "compact":
		writeError(ctx, fasthttp.StatusMethodNotAllowed, "method_not_allowed",
			"conversations/{id} answers GET and DELETE; conversations/{id}/compact answers POST")
	default:
		writeError(ctx, fasthttp.StatusNotFound, "not_found", "no such ctxpress endpoint")
	}
}

// conversationPath splits the escaped request path into the conversation
// id (unescaped) and the action after it ("", "compact" or "turns/{n}").
// The escaped form is read so that an id holding an encoded slash stays
// one id.
func conversationPath(escaped string) (id, action string, ok bool) {
	rest, found := strings.CutPrefix(escaped, adminPrefix+"conversations/")
	if !found {
		return "", "", false
	}
	raw, action, _ := strings.Cut(rest, "/")
	if n, isTurn := strings.CutPrefix(action, "turns/"); isTurn && (n == "" || strings.Contains(n, "/")) ||
		!isTurn && strings.Contains(action, "/") {
		return "", "", false
	}
	id, err := url.PathUnescape(raw)
	if err != nil || id == "" {
		return "", "", false
	}
	return id, action, true
}

// conversations are the conversation operations on a's store.
func (a *Admin) conversations() Conversations {
	return Conversations{Store: a.deps.Store, Compacting: a.deps.Compacting, Pricing: a.deps.Pricing, Kept: a.kept}
}

// conversationError answers an error of a Conversations operation: 404 for
// an unknown id, else a store failure.
func (a *Admin) conversationError(ctx *fasthttp.RequestCtx, verb string, err error) {
	if errors.Is(err, ErrConversationNotFound) {
		writeError(ctx, fasthttp.StatusNotFound, "conversation_not_found", "no such conversation")
		return
	}
	a.storeError(ctx, verb, err)
}

func (a *Admin) showConversation(ctx *fasthttp.RequestCtx, id string) {
	details, err := a.conversations().Show(id, string(ctx.QueryArgs().Peek("namespace")))
	if err != nil {
		a.conversationError(ctx, "read", err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, struct {
		Object string               `json:"object"`
		ID     string               `json:"id"`
		Data   []ConversationDetail `json:"data"`
	}{Object: "list", ID: id, Data: details})
}

func (a *Admin) deleteConversation(ctx *fasthttp.RequestCtx, id string) {
	deleted, err := a.conversations().Forget(id, string(ctx.QueryArgs().Peek("namespace")))
	if err != nil {
		a.conversationError(ctx, "update", err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"id": id, "deleted": len(deleted), "namespaces": deleted})
}

// scheduleCompaction marks every conversation with this id (in the
// namespace asked, else in any) to be compacted on its next request.
func (a *Admin) scheduleCompaction(ctx *fasthttp.RequestCtx, id string) {
	n, err := a.conversations().Compact(id, string(ctx.QueryArgs().Peek("namespace")))
	if err != nil {
		a.conversationError(ctx, "update", err)
		return
	}
	writeJSON(ctx, fasthttp.StatusAccepted, map[string]any{"conversation": id, "scheduled": n,
		"message": "the conversation is compacted on its next request"})
}
