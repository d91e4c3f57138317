package state

import (
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/ctxpress/ctxpress/history"
)

// Caps on the lists a Record keeps, so a record's size stays bounded however
// long a conversation runs.
const (
	// MaxBranches is how many summary branches a record keeps; PutBranch
	// drops the least recently used beyond it.
	MaxBranches = 8
	// MaxRecentSummaries is how many past summaries AddSummaryHistory keeps,
	// for inspection.
	MaxRecentSummaries = 5
	// MaxTurns is how many turns AddTurn keeps, the most recent.
	MaxTurns = 200
	// MaxLines is how many lines of history a record keeps; PutLine drops
	// the least recently used beyond it.
	MaxLines = 8
	// MaxTurnEdits is how many edits AddTurn keeps with a turn
	// (history.BoundEdits: the largest, and one for the rest), and
	// MaxEditName how many bytes of an edit's name.
	MaxTurnEdits = 6
	MaxEditName  = 32
	// MaxTitle is how many bytes of a conversation's Title and Agent a
	// record keeps.
	MaxTitle = 200
)

// Record is everything stored for one conversation. The zero value (with a
// Key) is the state of a conversation never seen before.
type Record struct {
	Key   Key
	Model string // the model of the last request
	// Title is what the user first asked (rewrite.Result.FirstAsk), and
	// Agent the client that sent the last request (from its User-Agent),
	// for people to tell conversations apart; "" when unknown. At most
	// MaxTitle bytes each.
	Title, Agent string

	// Counters since the record was created.
	Requests     int64 // requests seen
	TokensBefore int64 // sum of estimated input tokens before rewriting
	TokensAfter  int64 // sum of estimated input tokens after rewriting
	TokensSaved  int64 // sum of max(0, before-after) per request
	Compactions  int64 // requests that wrote a summary (Turn.Compacted)

	// What the upstream reported, summed since the record was created (not
	// from Turns, which keeps the last MaxTurns): Usage of the
	// conversation's forwarded requests, Summary of ctxpress's own summary
	// calls for it. Direct is the estimate of what the requests counted in
	// Usage would have used sent as the client wrote them
	// (rewrite.DirectUsage): Usage and Direct priced alike are the bill
	// through ctxpress and without it.
	Usage, Summary, Direct Usage
	// ServerCompaction is the part of Usage (and of Direct) that the
	// upstream's own compactions of the requests used (Anthropic's
	// usage.iterations), its Calls how many turns the upstream compacted.
	ServerCompaction Usage

	// Branches are the summaries this conversation can resume from; see
	// Branch. At most MaxBranches; order is not meaningful.
	Branches []Branch
	// Lines are the histories seen under this key, each with its own
	// numbers and breaker; see Line. At most MaxLines; order is not
	// meaningful.
	Lines []Line
	// ForceNext is a manual compaction requested for the conversation's
	// next request (the admin API's compact); it bypasses the threshold,
	// backoff and a tripped breaker, and is cleared when used.
	ForceNext bool

	// RecentSummaries are the last MaxRecentSummaries summaries written,
	// oldest first, for inspection.
	RecentSummaries []SummaryEntry
	// Turns are the last MaxTurns requests, oldest first, for the dashboard.
	// Copies of a Record (and the store's cache) share the array: read it,
	// or replace it, never write into it; AddTurn appends (see turnBuf).
	Turns []Turn
	// turns is the buffer Turns was last appended into by AddTurn, shared
	// by the copies of the record; nil: none.
	turns *turnBuf

	CreatedAt time.Time // set by the store when the record is first written
	UpdatedAt time.Time // set by the store on every Update; retention counts from it
}

// ChainHash identifies a run of messages: h_i = sha256(h_(i-1) ‖
// canonical(message_i)), computed by the rewrite package. Its text form (JSON,
// String) is lower-case hex.
type ChainHash [32]byte

// ParseChainHash parses the 64 hex digits written by ChainHash.String.
func ParseChainHash(s string) (ChainHash, error) {
	var h ChainHash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("state: chain hash: want %d hex digits, got %d", 2*len(h), len(s))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return ChainHash{}, fmt.Errorf("state: chain hash: %w", err)
	}
	return h, nil
}

// String returns h as 64 lower-case hex digits.
func (h ChainHash) String() string { return hex.EncodeToString(h[:]) }

// IsZero reports whether h is the zero hash (no messages).
func (h ChainHash) IsZero() bool { return h == ChainHash{} }

// MarshalText implements encoding.TextMarshaler.
func (h ChainHash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (h *ChainHash) UnmarshalText(b []byte) error {
	v, err := ParseChainHash(string(b))
	if err != nil {
		return err
	}
	*h = v
	return nil
}

// Branch is one summary a request can resume from (history.Branch: it
// replaces the first Covered messages, after the leading system messages,
// of a request whose messages hash to Hash), with what keeping it needs. A
// conversation keeps several, so a client that edits or rewinds its
// history never receives the summary of another history.
type Branch struct {
	history.Branch
	// Parent is the Hash of the branch this one extends (the summary the
	// compaction started from); zero for a first compaction.
	Parent ChainHash
	// Prepared marks a summary made ahead of the trigger (a
	// precompaction) that no request has sent yet: it is sent
	// (PromoteBranch) from the line's ApplyAt-th request, or from the
	// request that crosses the trigger if sooner, never when it happens
	// to land, so its timing does not change what is forwarded.
	Prepared bool
	ApplyAt  int
	// Observed marks the stand-in for a summary ctxpress would have
	// written in observe mode (no call was made): only observe mode's
	// would-be requests apply it, never a forwarded one.
	Observed  bool
	CreatedAt time.Time
	// UsedAt is when a request last stored or used the branch: the LRU clock.
	UsedAt time.Time
}

// SummaryEntry is one summary kept for inspection; Kept is where the
// messages it replaced are (zero: not kept).
type SummaryEntry struct {
	At              time.Time
	Summary         string
	CoveredMessages int
	TokensBefore    int
	TokensAfter     int
	Kept            history.Kept
}

// Usage sums what an upstream reported for calls: Calls is how many
// reported usage, Unreported how many were answered without (they are in
// no other count: a bill of them is unknown). Input is every prompt
// token, Cached and CacheWrite the parts of it read from and written to
// the prompt cache, Output the answers' tokens.
type Usage struct {
	Calls, Unreported                 int64
	Input, Cached, CacheWrite, Output int64
}

// Plus returns u with v added.
func (u Usage) Plus(v Usage) Usage {
	return Usage{Calls: u.Calls + v.Calls, Unreported: u.Unreported + v.Unreported, Input: u.Input + v.Input,
		Cached: u.Cached + v.Cached, CacheWrite: u.CacheWrite + v.CacheWrite, Output: u.Output + v.Output}
}

// Turn is one request of the conversation.
type Turn struct {
	// At is kept to the millisecond.
	At           time.Time
	TokensBefore int  // estimated input tokens before rewriting
	TokensAfter  int  // estimated input tokens after rewriting
	InputTokens  int  // upstream-reported input tokens; 0 when unknown
	Compacted    bool // this request wrote a new summary
	// CachedTokens and CacheWriteTokens are the part of InputTokens the
	// upstream reported read from its prompt cache and written to it
	// (Anthropic's cache_read_input_tokens, cache_creation_input_tokens);
	// 0 when not reported.
	CachedTokens, CacheWriteTokens int
	// ServerCompactionInput and ServerCompactionOutput are what the
	// upstream's own compaction of this request used, billed on top of
	// InputTokens (which then counts the context after it); 0 when the
	// upstream did not compact.
	ServerCompactionInput, ServerCompactionOutput int
	// Edits are what the request forwarded did to the client's messages
	// (rewrite.Result.Edits), at most MaxTurnEdits (AddTurn bounds them);
	// nil when nothing. Read-only: copies of the record share them.
	Edits []history.Edit
}

// sameTurn reports whether a and b are equal, Edits by value.
func sameTurn(a, b Turn) bool {
	return a.At == b.At && a.TokensBefore == b.TokensBefore && a.TokensAfter == b.TokensAfter &&
		a.InputTokens == b.InputTokens && a.Compacted == b.Compacted &&
		a.CachedTokens == b.CachedTokens && a.CacheWriteTokens == b.CacheWriteTokens &&
		a.ServerCompactionInput == b.ServerCompactionInput && a.ServerCompactionOutput == b.ServerCompactionOutput &&
		slices.Equal(a.Edits, b.Edits)
}

// PutBranch stores b as written by a compaction at now: it replaces the branch
// with the same Hash (the same messages summarised again), or else the branch
// b extends (Hash == b.Parent) unless b is Prepared (the parent is still
// what requests send until b is promoted), or else is added. Then, while there are more
// than MaxBranches, the least recently used branch is dropped. b.UsedAt is set
// to now, and b.CreatedAt too when zero.
func (r *Record) PutBranch(b Branch, now time.Time) {
	b.UsedAt = now
	if b.CreatedAt.IsZero() {
		b.CreatedAt = now
	}
	branches := slices.DeleteFunc(slices.Clone(r.Branches), func(o Branch) bool { return o.Hash == b.Hash })
	i := -1
	if !b.Parent.IsZero() && !b.Prepared {
		i = slices.IndexFunc(branches, func(o Branch) bool { return o.Hash == b.Parent })
	}
	if i >= 0 {
		branches[i] = b
	} else {
		branches = append(branches, b)
	}
	for len(branches) > MaxBranches {
		lru := 0
		for j, o := range branches {
			if o.UsedAt.Before(branches[lru].UsedAt) {
				lru = j
			}
		}
		branches = slices.Delete(branches, lru, lru+1)
	}
	r.Branches = branches
}

// PromoteBranch makes the prepared branch with hash h one that every
// request sends, as a compaction writing it at now would have (it replaces
// the branch it extends). It reports whether such a branch exists.
func (r *Record) PromoteBranch(h ChainHash, now time.Time) bool {
	i := slices.IndexFunc(r.Branches, func(b Branch) bool { return b.Hash == h && b.Prepared })
	if i < 0 {
		return false
	}
	b := r.Branches[i]
	b.Prepared, b.ApplyAt = false, 0
	r.Branches = slices.Delete(slices.Clone(r.Branches), i, i+1)
	r.PutBranch(b, now)
	return true
}

// TouchBranch marks the branch with hash h as used at now, so LRU eviction
// keeps the summaries that requests apply, not only those just written. It
// reports whether such a branch exists.
func (r *Record) TouchBranch(h ChainHash, now time.Time) bool {
	for i := range r.Branches {
		if r.Branches[i].Hash == h {
			r.Branches[i].UsedAt = now
			return true
		}
	}
	return false
}

// MatchBranch returns the branch covering the most messages whose Hash equals
// hashAt(Covered): the longest summary that applies to a request. hashAt
// returns the chain hash of the request's first n messages, and false when
// the request has fewer than n. It does not touch the branch.
func (r *Record) MatchBranch(hashAt func(n int) (ChainHash, bool)) (Branch, bool) {
	best := -1
	for i, b := range r.Branches {
		if best >= 0 && b.Covered <= r.Branches[best].Covered {
			continue
		}
		if h, ok := hashAt(b.Covered); ok && h == b.Hash {
			best = i
		}
	}
	if best < 0 {
		return Branch{}, false
	}
	return r.Branches[best], true
}

// AddSummaryHistory appends e to RecentSummaries and keeps the last
// MaxRecentSummaries.
func (r *Record) AddSummaryHistory(e SummaryEntry) {
	r.RecentSummaries = appendCapped(r.RecentSummaries, e, MaxRecentSummaries)
}

// AddTurn appends t to Turns, keeping the last MaxTurns, and adds it to the
// counters: Requests, TokensBefore, TokensAfter, TokensSaved (by
// max(0, before-after)), and Compactions when t.Compacted. It leaves the
// lines' numbers to the caller.
func (r *Record) AddTurn(t Turn) {
	if !t.At.IsZero() {
		// As stored, so normalize has no turn to fix and need not copy
		// the history (see normalTurns).
		t.At = time.UnixMilli(t.At.UnixMilli()).UTC()
	}
	t.Edits = normalEdits(history.BoundEdits(t.Edits, MaxTurnEdits))
	r.Turns, r.turns = r.turns.add(r.Turns, t)
	r.Requests++
	r.TokensBefore += int64(t.TokensBefore)
	r.TokensAfter += int64(t.TokensAfter)
	if saved := t.TokensBefore - t.TokensAfter; saved > 0 {
		r.TokensSaved += int64(saved)
	}
	if t.Compacted {
		r.Compactions++
	}
}

// Name sets r's Title, when it has none, and its Agent, each cut to
// MaxTitle bytes; "" leaves either as it is.
func (r *Record) Name(title, agent string) {
	if r.Title == "" && title != "" {
		r.Title = truncate(title, MaxTitle)
	}
	if agent != "" {
		r.Agent = truncate(agent, MaxTitle)
	}
}

// appendCapped returns s with v appended, keeping the last max elements. It
// never writes into s's backing array, so a copy of the Record is unaffected.
// (Turns use turnBuf instead: copying MaxTurns of them on every turn was a
// quarter of the bytes the chat path allocated.)
func appendCapped[T any](s []T, v T, max int) []T {
	if len(s) >= max {
		s = s[len(s)-max+1:]
	}
	out := make([]T, 0, len(s)+1)
	return append(append(out, s...), v)
}
