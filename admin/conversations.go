package admin

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/state"
)

// ErrConversationNotFound is an id with no stored conversation (in the
// namespace asked, when one is).
var ErrConversationNotFound = errors.New("no such conversation")

// Conversations are the operations on stored conversations: list, show,
// forget, compact. The admin API and the `ctxpress conversations` CLI (on
// the db file) both go through them, so they answer alike.
//
// An id names a conversation within a namespace (a hash of the client's
// key), so one id may exist in several: the operations on an id act on every
// match unless namespace ("" for any) picks one.
type Conversations struct {
	// Store holds the conversations; nil means none are kept (every id is
	// unknown).
	Store state.Store
	// Compacting reports whether a summary of key is being written now;
	// nil means never (no server runs on this store).
	Compacting func(state.Key) bool
	// Pricing prices what the conversations used; the zero value is the
	// built-in list prices.
	Pricing Pricing
	// Kept has the bodies of recent turns (the server's); nil: none.
	Kept *Kept
}

// ConversationPage is one page of List, newest first.
type ConversationPage struct {
	Object  string             `json:"object"` // always "list"
	Data    []ConversationInfo `json:"data"`
	Offset  int                `json:"offset"`
	Limit   int                `json:"limit"`
	HasMore bool               `json:"has_more"`
}

// List returns the page of conversations after offset, most recently
// updated first, in namespace ("" for all). limit is clamped to
// [1, MaxListLimit].
func (c Conversations) List(namespace string, offset, limit int) (ConversationPage, error) {
	limit = min(max(limit, 1), MaxListLimit)
	offset = max(offset, 0)
	p := ConversationPage{Object: "list", Data: []ConversationInfo{}, Offset: offset, Limit: limit}
	if c.Store == nil {
		return p, nil
	}
	// One more than asked tells whether there is a next page without
	// counting every record.
	recs, err := c.Store.List(state.ListOptions{Namespace: namespace, Offset: offset, Limit: limit + 1})
	if err != nil {
		return ConversationPage{}, err
	}
	if len(recs) > limit {
		recs, p.HasMore = recs[:limit], true
	}
	for _, r := range recs {
		p.Data = append(p.Data, conversationInfoOf(r, c.compacting(r.Key), c.Pricing))
	}
	return p, nil
}

// Show returns every conversation with id (in namespace, "" for any), in
// full; none is an error wrapping ErrConversationNotFound.
func (c Conversations) Show(id, namespace string) ([]ConversationDetail, error) {
	recs, err := c.find(id, namespace)
	if err != nil {
		return nil, err
	}
	out := make([]ConversationDetail, 0, len(recs))
	for _, r := range recs {
		out = append(out, conversationDetailOf(r, c.compacting(r.Key), c.Pricing, c.Kept))
	}
	return out, nil
}

// Forget deletes every conversation with id (in namespace, "" for any) and
// returns the namespaces it deleted it from; none is an error wrapping
// ErrConversationNotFound. On a store failure the namespaces deleted so
// far come back with the error.
func (c Conversations) Forget(id, namespace string) ([]string, error) {
	recs, err := c.find(id, namespace)
	if err != nil {
		return nil, err
	}
	deleted := []string{}
	for _, r := range recs {
		found, err := c.Store.Delete(r.Key)
		if err != nil {
			return deleted, err
		}
		if found {
			deleted = append(deleted, r.Key.Namespace)
		}
	}
	if len(deleted) == 0 { // deleted by someone else in between
		return deleted, notFoundError(id)
	}
	return deleted, nil
}

// Compact marks every conversation with id (in namespace, "" for any) to be
// compacted on its next request and returns how many it marked; none is an
// error wrapping ErrConversationNotFound. A store failure is returned as
// such (not as "not found"), with the count marked before it.
func (c Conversations) Compact(id, namespace string) (int, error) {
	recs, err := c.find(id, namespace)
	if err != nil {
		return 0, err
	}
	for i, r := range recs {
		if _, err := c.Store.Update(r.Key, func(r *state.Record) error {
			r.ForceNext = true
			return nil
		}); err != nil {
			return i, err
		}
	}
	return len(recs), nil
}

// find returns the records with id in namespace ("" for any); none is an
// error wrapping ErrConversationNotFound.
func (c Conversations) find(id, namespace string) ([]state.Record, error) {
	if c.Store == nil {
		return nil, notFoundError(id)
	}
	recs, err := c.Store.List(state.ListOptions{ID: id, Namespace: namespace})
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, notFoundError(id)
	}
	return recs, nil
}

func (c Conversations) compacting(key state.Key) bool {
	return c.Compacting != nil && c.Compacting(key)
}

func notFoundError(id string) error { return fmt.Errorf("%w %q", ErrConversationNotFound, id) }

// Paging of the list: the default and the largest page.
const (
	defaultListLimit = 50
	MaxListLimit     = 500
)

// ConversationInfo is a conversation in a list: its counters and state.
type ConversationInfo struct {
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	// Title is what the user first asked, Agent the client of the latest
	// request (from its User-Agent): "" when not known (a conversation
	// recorded before they were kept, until its next request).
	Title               string    `json:"title,omitempty"`
	Agent               string    `json:"agent,omitempty"`
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
	// Usage is what the upstream reported for the conversation's
	// requests, summed since it began; SummaryUsage the same for
	// ctxpress's summary calls for it.
	Usage        UsageInfo `json:"usage"`
	SummaryUsage UsageInfo `json:"summary_usage"`
	// ServerCompactionUsage is the part of Usage the upstream's own
	// compactions of the requests used (Anthropic's usage.iterations),
	// its Calls how many requests the upstream compacted.
	ServerCompactionUsage UsageInfo `json:"server_compaction_usage"`
	// CachedShare is the part of Usage's input tokens read from the
	// prompt cache (0 without any).
	CachedShare float64 `json:"cached_share"`
	// Costs are the conversation's bill so far, through ctxpress and as
	// estimated without it.
	Costs
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

// BranchInfo is a summary branch as the admin API shows it; Summary is set
// on CurrentSummary only. It is the API's JSON contract, not another
// branch for logic: history.Branch is the one the pipeline applies,
// state.Branch it as stored, and this is rendered from state.Branch for
// reading.
type BranchInfo struct {
	Summary         string          `json:"summary,omitempty"`
	SummaryChars    int             `json:"summary_chars"`
	CoveredMessages int             `json:"covered_messages"`
	Hash            state.ChainHash `json:"hash"`
	Parent          string          `json:"parent,omitempty"`
	// Prepared: made ahead of the trigger, sent from the request that
	// crosses it.
	Prepared  bool      `json:"prepared,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UsedAt    time.Time `json:"used_at"`
	// Kept is where the messages the summary replaced are kept; absent
	// when they are not (a summary written before they were).
	Kept *KeptInfo `json:"kept,omitempty"`
}

// KeptInfo is where the messages a summary replaced are kept: the
// original under Ref (`ctxpress expand REF`, GET /ctxpress/expand/REF in
// the conversation's namespace), a transcript of the client's messages
// First to Last (indexes into its messages as sent).
type KeptInfo struct {
	Ref   string `json:"ref"`
	First int    `json:"first"`
	Last  int    `json:"last"`
}

// keptInfoOf is k as the API shows it; nil when nothing is kept.
func keptInfoOf(k history.Kept) *KeptInfo {
	if k.Ref == "" {
		return nil
	}
	return &KeptInfo{Ref: k.Ref, First: k.First, Last: k.Last}
}

// SummaryInfo is a past summary kept for inspection.
type SummaryInfo struct {
	At              time.Time `json:"at"`
	Summary         string    `json:"summary"`
	CoveredMessages int       `json:"covered_messages"`
	TokensBefore    int       `json:"tokens_before"`
	TokensAfter     int       `json:"tokens_after"`
	Kept            *KeptInfo `json:"kept,omitempty"`
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
	// Number is the request's place in the conversation, from 1 (the
	// record keeps the last state.MaxTurns): the {n} of its turn view.
	Number       int       `json:"number"`
	At           time.Time `json:"at"`
	TokensBefore int       `json:"tokens_before"`
	TokensAfter  int       `json:"tokens_after"`
	InputTokens  int       `json:"input_tokens"`
	// CachedTokens and CacheWriteTokens are the part of InputTokens the
	// upstream read from and wrote to its prompt cache, when it said.
	CachedTokens     int  `json:"cached_tokens,omitempty"`
	CacheWriteTokens int  `json:"cache_write_tokens,omitempty"`
	Compacted        bool `json:"compacted"`
	// ServerCompactionInputTokens and ServerCompactionOutputTokens are what
	// the upstream's own compaction of the request used, billed on top of
	// InputTokens, which then counts the context after it; absent when the
	// upstream did not compact.
	ServerCompactionInputTokens  int `json:"server_compaction_input_tokens,omitempty"`
	ServerCompactionOutputTokens int `json:"server_compaction_output_tokens,omitempty"`
	// Edits are what the forwarded request did to the client's messages
	// (the record keeps the largest state.MaxTurnEdits; the turn view
	// lists them all while the turn is kept); none for a turn recorded
	// before edits were kept.
	Edits []EditInfo `json:"edits"`
	// Compaction marks the turn where a compaction happened
	// (compactionMarks); nil elsewhere.
	Compaction *CompactionMark `json:"compaction,omitempty"`
	// Kept reports that ctxpress still holds the turn's bodies, as sent
	// and as forwarded, for its turn view.
	Kept bool `json:"kept"`
}

// Stats are the totals over every stored conversation.
type Stats struct {
	Conversations int   `json:"conversations"`
	Requests      int64 `json:"requests"`
	TokensBefore  int64 `json:"tokens_before"`
	TokensAfter   int64 `json:"tokens_after"`
	TokensSaved   int64 `json:"tokens_saved"`
	Compactions   int64 `json:"compactions"`
	Compacting    int   `json:"compacting"`
	// Retrievals is how many originals were brought back since this
	// server started (Metrics.Retrieved): each is a marker that hid
	// something needed.
	Retrievals int64 `json:"retrievals"`
	// Retrieved breaks Retrievals down by the step that replaced the
	// original, the tool whose output it was and the way it came back,
	// most retrieved first.
	Retrieved []Retrieval `json:"retrieved"`
	// Usage, SummaryUsage, ServerCompactionUsage and CachedShare are
	// ConversationInfo's, over every conversation.
	Usage                 UsageInfo `json:"usage"`
	SummaryUsage          UsageInfo `json:"summary_usage"`
	ServerCompactionUsage UsageInfo `json:"server_compaction_usage"`
	CachedShare           float64   `json:"cached_share"`
	// Costs are the sum of the conversations' (each at its model's
	// prices); MoneySaved is net of cache effects and summary calls. When
	// some are priced in money and some in prefill tokens (a local
	// server), Costs sums those in money and PrefillCosts the others.
	Costs
	PrefillCosts *Costs `json:"prefill_costs,omitempty"`
	// Saved is the dashboard's saved tile (savedTile).
	Saved Tile `json:"saved_tile"`
	// PricePerMillionTokens is ui.price_per_million_tokens, deprecated:
	// money is priced per model (models: prices). 0 (configured negative)
	// asks the dashboard to hide money.
	PricePerMillionTokens float64 `json:"price_per_million_tokens"`
	Currency              string  `json:"currency"`
	Persistent            bool    `json:"persistent"` // false: memory-only store, gone on restart
	// Mode is "observe" when requests are forwarded as sent and the
	// figures are what ctxpress would have done, else "normal".
	Mode string    `json:"mode"`
	Time time.Time `json:"time"`
}

// conversationInfoOf is r as the list shows it, its bill at p's prices;
// compacting says whether a summary of it is being written now. The
// numbers and breaker shown are the current line's: the history the
// conversation's latest request extended.
func conversationInfoOf(r state.Record, compacting bool, p Pricing) ConversationInfo {
	l := r.CurrentLine()
	return ConversationInfo{
		ID: r.Key.ID, Namespace: r.Key.Namespace, Title: r.Title, Agent: r.Agent, Model: r.Model,
		Requests: r.Requests, TokensBefore: r.TokensBefore, TokensAfter: r.TokensAfter,
		TokensSaved: r.TokensSaved, Compactions: r.Compactions,
		LastInputTokens: l.Calibration.LastInput, LastEstimate: l.Calibration.LastEstimate, Calibration: l.Calibration.Ratio,
		BranchCount: len(r.Branches), LineCount: len(r.Lines), BreakerTripped: l.Breaker.Tripped,
		CompactionScheduled: r.ForceNext, Compacting: compacting,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		Usage: UsageInfoOf(r.Usage), SummaryUsage: UsageInfoOf(r.Summary), CachedShare: cachedShare(r.Usage),
		ServerCompactionUsage: UsageInfoOf(r.ServerCompaction),
		Costs:                 p.Bill(r),
	}
}

// conversationDetailOf is r in full, as GET conversations/{id} shows it;
// kept says which of its turns' bodies are kept (nil: none).
func conversationDetailOf(r state.Record, compacting bool, p Pricing, kept *Kept) ConversationDetail {
	d := ConversationDetail{ConversationInfo: conversationInfoOf(r, compacting, p),
		Branches: []BranchInfo{}, RecentSummaries: []SummaryInfo{}, Turns: []TurnInfo{}}
	cur := -1
	for i, b := range r.Branches {
		bi := BranchInfo{SummaryChars: len([]rune(b.Summary)), CoveredMessages: b.Covered, Hash: b.Hash,
			Prepared: b.Prepared, CreatedAt: b.CreatedAt, UsedAt: b.UsedAt, Kept: keptInfoOf(b.Kept)}
		if !b.Parent.IsZero() {
			bi.Parent = b.Parent.String()
		}
		d.Branches = append(d.Branches, bi)
		if !b.Prepared && (cur < 0 || b.UsedAt.After(r.Branches[cur].UsedAt)) {
			cur = i
		}
	}
	// Most recently used first: the order a person reads them in.
	slices.SortStableFunc(d.Branches, func(a, b BranchInfo) int { return b.UsedAt.Compare(a.UsedAt) })
	if cur >= 0 {
		c := d.Branches[slices.IndexFunc(d.Branches, func(b BranchInfo) bool { return b.Hash == r.Branches[cur].Hash })]
		c.Summary = r.Branches[cur].Summary
		d.CurrentSummary = &c
	}
	for _, e := range r.RecentSummaries {
		d.RecentSummaries = append(d.RecentSummaries, SummaryInfo{At: e.At, Summary: e.Summary,
			CoveredMessages: e.CoveredMessages, TokensBefore: e.TokensBefore, TokensAfter: e.TokensAfter, Kept: keptInfoOf(e.Kept)})
	}
	b := r.CurrentLine().Breaker
	d.Breaker = BreakerInfo{ForceNext: r.ForceNext, Tripped: b.Tripped, ConsecutiveOverTrigger: b.ConsecutiveOverTrigger,
		FailureCount: b.FailureCount, Reason: b.Reason}
	if !b.BackoffUntil.IsZero() {
		d.Breaker.BackoffUntil = &b.BackoffUntil
	}
	marks, isKept := compactionMarks(r.Turns, r.RecentSummaries), kept.keptOf(r.Key, r.Turns)
	for i := range r.Turns {
		ti := turnInfoOf(r, i)
		ti.Compaction, ti.Kept = marks[i], isKept[i]
		d.Turns = append(d.Turns, ti)
	}
	return d
}

// turnInfoOf is r's turn i (of r.Turns) without its compaction mark.
func turnInfoOf(r state.Record, i int) TurnInfo {
	t := r.Turns[i]
	return TurnInfo{Number: turnNumber(r, i), At: t.At, TokensBefore: t.TokensBefore, TokensAfter: t.TokensAfter,
		InputTokens: t.InputTokens, CachedTokens: t.CachedTokens, CacheWriteTokens: t.CacheWriteTokens, Compacted: t.Compacted,
		ServerCompactionInputTokens: t.ServerCompactionInput, ServerCompactionOutputTokens: t.ServerCompactionOutput,
		Edits: editInfos(t.Edits)}
}

// turnNumber is the place in its conversation of r's turn i: AddTurn
// counts every turn in Requests and keeps the last MaxTurns.
func turnNumber(r state.Record, i int) int {
	return max(int(r.Requests)-len(r.Turns), 0) + i + 1
}
