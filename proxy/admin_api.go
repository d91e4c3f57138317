package proxy

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ctxpress/ctxpress/state"
	"github.com/valyala/fasthttp"
)

// The conversations API: GET /ctxpress/conversations (paged, newest
// first), GET and DELETE /ctxpress/conversations/{id}, POST
// /ctxpress/conversations/{id}/compact, and GET /ctxpress/stats.
//
// An id names a conversation within a namespace (a hash of the client's
// key), so one id may exist in several namespaces: the {id} endpoints act on
// every match and answer them all in "data", unless ?namespace= picks one.
// An id with a slash is sent percent-encoded (%2F).

// Paging of the list: the default and the largest page.
const (
	defaultListLimit = 50
	maxListLimit     = 500
)

// ConversationInfo is a conversation in a list: its counters and state.
type ConversationInfo struct {
	ID                  string    `json:"id"`
	Namespace           string    `json:"namespace"`
	Model               string    `json:"model"`
	Requests            int64     `json:"requests"`
	TokensBefore        int64     `json:"tokens_before"`
	TokensAfter         int64     `json:"tokens_after"`
	TokensSaved         int64     `json:"tokens_saved"`
	Compactions         int64     `json:"compactions"`
	LastInputTokens     int       `json:"last_input_tokens"`
	LastEstimate        int       `json:"last_estimate"`
	Calibration         float64   `json:"calibration"`
	BranchCount         int       `json:"branch_count"`
	LineCount           int       `json:"line_count"` // histories seen under this id (see state.Line)
	BreakerTripped      bool      `json:"breaker_tripped"`
	CompactionScheduled bool      `json:"compaction_scheduled"`
	Compacting          bool      `json:"compacting"` // a summary is being written now
	CreatedAt           time.Time `json:"created_at"`
	UpdatedAt           time.Time `json:"updated_at"`
}

// ConversationDetail is one conversation in full.
type ConversationDetail struct {
	ConversationInfo
	// CurrentSummary is the most recently used branch, with its text: what
	// the conversation's next request most likely resumes from. nil when
	// the conversation was never compacted.
	CurrentSummary  *BranchInfo   `json:"current_summary"`
	Branches        []BranchInfo  `json:"branches"`
	RecentSummaries []SummaryInfo `json:"recent_summaries"`
	Breaker         BreakerInfo   `json:"breaker"`
	Turns           []TurnInfo    `json:"turns"`
}

// BranchInfo is a summary branch; Summary is set on CurrentSummary only.
type BranchInfo struct {
	Summary         string          `json:"summary,omitempty"`
	SummaryChars    int             `json:"summary_chars"`
	CoveredMessages int             `json:"covered_messages"`
	Hash            state.ChainHash `json:"hash"`
	Parent          string          `json:"parent,omitempty"`
	CreatedAt       time.Time       `json:"created_at"`
	UsedAt          time.Time       `json:"used_at"`
}

// SummaryInfo is a past summary kept for inspection.
type SummaryInfo struct {
	At              time.Time `json:"at"`
	Summary         string    `json:"summary"`
	CoveredMessages int       `json:"covered_messages"`
	TokensBefore    int       `json:"tokens_before"`
	TokensAfter     int       `json:"tokens_after"`
}

// BreakerInfo is the compaction circuit breaker.
type BreakerInfo struct {
	ForceNext              bool       `json:"force_next"`
	Tripped                bool       `json:"tripped"`
	ConsecutiveOverTrigger int        `json:"consecutive_over_trigger"`
	FailureCount           int        `json:"failure_count"`
	BackoffUntil           *time.Time `json:"backoff_until,omitempty"`
	Reason                 string     `json:"reason,omitempty"`
}

// TurnInfo is one recorded request.
type TurnInfo struct {
	At           time.Time `json:"at"`
	TokensBefore int       `json:"tokens_before"`
	TokensAfter  int       `json:"tokens_after"`
	InputTokens  int       `json:"input_tokens"`
	Compacted    bool      `json:"compacted"`
}

// Stats are the totals over every stored conversation.
type Stats struct {
	Conversations         int       `json:"conversations"`
	Requests              int64     `json:"requests"`
	TokensBefore          int64     `json:"tokens_before"`
	TokensAfter           int64     `json:"tokens_after"`
	TokensSaved           int64     `json:"tokens_saved"`
	Compactions           int64     `json:"compactions"`
	Compacting            int       `json:"compacting"`
	PricePerMillionTokens float64   `json:"price_per_million_tokens"`
	Currency              string    `json:"currency"`
	MoneySaved            float64   `json:"money_saved"`
	Persistent            bool      `json:"persistent"` // false: memory-only store, gone on restart
	Time                  time.Time `json:"time"`
}

// ConversationInfoOf is r as the list shows it; compacting says whether a
// summary of it is being written now.
// The numbers and breaker shown are the current line's: the history the
// conversation's latest request extended.
func ConversationInfoOf(r state.Record, compacting bool) ConversationInfo {
	l := r.CurrentLine()
	return ConversationInfo{
		ID: r.Key.ID, Namespace: r.Key.Namespace, Model: r.Model,
		Requests: r.Requests, TokensBefore: r.TokensBefore, TokensAfter: r.TokensAfter,
		TokensSaved: r.TokensSaved, Compactions: r.Compactions,
		LastInputTokens: l.LastInputTokens, LastEstimate: l.LastEstimate, Calibration: l.Calibration,
		BranchCount: len(r.Branches), LineCount: len(r.Lines), BreakerTripped: l.Breaker.Tripped,
		CompactionScheduled: r.ForceNext, Compacting: compacting,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

// ConversationDetailOf is r in full, as GET conversations/{id} shows it.
func ConversationDetailOf(r state.Record, compacting bool) ConversationDetail {
	d := ConversationDetail{ConversationInfo: ConversationInfoOf(r, compacting),
		Branches: []BranchInfo{}, RecentSummaries: []SummaryInfo{}, Turns: []TurnInfo{}}
	cur := -1
	for i, b := range r.Branches {
		bi := BranchInfo{SummaryChars: len([]rune(b.Summary)), CoveredMessages: b.Covered, Hash: b.Hash,
			CreatedAt: b.CreatedAt, UsedAt: b.UsedAt}
		if !b.Parent.IsZero() {
			bi.Parent = b.Parent.String()
		}
		d.Branches = append(d.Branches, bi)
		if cur < 0 || b.UsedAt.After(r.Branches[cur].UsedAt) {
			cur = i
		}
	}
	// Most recently used first: the order a person reads them in.
	slices.SortStableFunc(d.Branches, func(a, b BranchInfo) int { return b.UsedAt.Compare(a.UsedAt) })
	if cur >= 0 {
		c := d.Branches[0]
		c.Summary = r.Branches[cur].Summary
		d.CurrentSummary = &c
	}
	for _, e := range r.RecentSummaries {
		d.RecentSummaries = append(d.RecentSummaries, SummaryInfo{At: e.At, Summary: e.Summary,
			CoveredMessages: e.CoveredMessages, TokensBefore: e.TokensBefore, TokensAfter: e.TokensAfter})
	}
	b := r.CurrentLine().Breaker
	d.Breaker = BreakerInfo{ForceNext: r.ForceNext, Tripped: b.Tripped, ConsecutiveOverTrigger: b.ConsecutiveOverTrigger,
		FailureCount: b.FailureCount, Reason: b.Reason}
	if !b.BackoffUntil.IsZero() {
		d.Breaker.BackoffUntil = &b.BackoffUntil
	}
	for _, t := range r.Turns {
		d.Turns = append(d.Turns, TurnInfo{At: t.At, TokensBefore: t.TokensBefore, TokensAfter: t.TokensAfter,
			InputTokens: t.InputTokens, Compacted: t.Compacted})
	}
	return d
}

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

func (s *Server) storeError(ctx *fasthttp.RequestCtx, err error) {
	s.storeFailed("admin API: cannot read the conversation store", err)
	writeError(ctx, fasthttp.StatusInternalServerError, "store_error", "cannot read the conversation store")
}

// serveStats answers GET /ctxpress/stats: totals over every record. It
// reads every record, so it costs in proportion to the db; the dashboard
// asks at most once a second.
func (s *Server) serveStats(ctx *fasthttp.RequestCtx) {
	st := Stats{PricePerMillionTokens: s.cfg.UI.price(), Currency: s.cfg.UI.currency(),
		Compacting: s.comp.running(), Time: s.cfg.Clock().UTC()}
	if s.store != nil {
		_, st.Persistent = s.store.(state.Sizer)
		recs, err := s.store.List(state.ListOptions{})
		if err != nil {
			s.storeError(ctx, err)
			return
		}
		for _, r := range recs {
			st.Conversations++
			st.Requests += r.Requests
			st.TokensBefore += r.TokensBefore
			st.TokensAfter += r.TokensAfter
			st.TokensSaved += r.TokensSaved
			st.Compactions += r.Compactions
		}
	}
	st.MoneySaved = float64(st.TokensSaved) * st.PricePerMillionTokens / 1e6
	writeJSON(ctx, fasthttp.StatusOK, st)
}

// listConversations answers GET /ctxpress/conversations?offset=&limit=,
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
	limit = min(max(limit, 1), maxListLimit)
	out := struct {
		Object  string             `json:"object"`
		Data    []ConversationInfo `json:"data"`
		Offset  int                `json:"offset"`
		Limit   int                `json:"limit"`
		HasMore bool               `json:"has_more"`
	}{Object: "list", Data: []ConversationInfo{}, Offset: offset, Limit: limit}
	if s.store != nil {
		// One more than asked tells whether there is a next page without
		// counting every record.
		recs, err := s.store.List(state.ListOptions{Namespace: string(args.Peek("namespace")), Offset: offset, Limit: limit + 1})
		if err != nil {
			s.storeError(ctx, err)
			return
		}
		if len(recs) > limit {
			recs, out.HasMore = recs[:limit], true
		}
		for _, r := range recs {
			out.Data = append(out.Data, ConversationInfoOf(r, s.comp.isCompacting(r.Key)))
		}
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
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

// matches returns the records with id, in the namespace the query names or
// in all; a store failure has been answered when ok is false.
func (s *Server) matches(ctx *fasthttp.RequestCtx, id string) (recs []state.Record, ok bool) {
	if s.store == nil {
		return nil, true
	}
	recs, err := s.store.List(state.ListOptions{ID: id, Namespace: string(ctx.QueryArgs().Peek("namespace"))})
	if err != nil {
		s.storeError(ctx, err)
		return nil, false
	}
	return recs, true
}

func notFound(ctx *fasthttp.RequestCtx) {
	writeError(ctx, fasthttp.StatusNotFound, "conversation_not_found", "no such conversation")
}

func (s *Server) showConversation(ctx *fasthttp.RequestCtx, id string) {
	recs, ok := s.matches(ctx, id)
	if !ok {
		return
	}
	if len(recs) == 0 {
		notFound(ctx)
		return
	}
	out := struct {
		Object string               `json:"object"`
		ID     string               `json:"id"`
		Data   []ConversationDetail `json:"data"`
	}{Object: "list", ID: id}
	for _, r := range recs {
		out.Data = append(out.Data, ConversationDetailOf(r, s.comp.isCompacting(r.Key)))
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

func (s *Server) deleteConversation(ctx *fasthttp.RequestCtx, id string) {
	recs, ok := s.matches(ctx, id)
	if !ok {
		return
	}
	deleted := []string{}
	for _, r := range recs {
		found, err := s.store.Delete(r.Key)
		if err != nil {
			s.storeError(ctx, err)
			return
		}
		if found {
			deleted = append(deleted, r.Key.Namespace)
		}
	}
	if len(deleted) == 0 {
		notFound(ctx)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"id": id, "deleted": len(deleted), "namespaces": deleted})
}

// scheduleCompaction marks every conversation with this id (in the
// namespace asked, else in any) to be compacted on its next request.
func (s *Server) scheduleCompaction(ctx *fasthttp.RequestCtx, id string) {
	recs, ok := s.matches(ctx, id)
	if !ok {
		return
	}
	n := 0
	for _, r := range recs {
		if _, err := s.store.Update(r.Key, func(r *state.Record) error {
			r.ForceNext = true
			return nil
		}); err == nil {
			n++
		}
	}
	if n == 0 {
		notFound(ctx)
		return
	}
	writeJSON(ctx, fasthttp.StatusAccepted, map[string]any{"conversation": id, "scheduled": n,
		"message": "the conversation is compacted on its next request"})
}
