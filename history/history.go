// Package history holds the values ctxpress keeps about a conversation's
// histories from one request to the next: what a line of history has
// learnt (Numbers: calibration, breaker, cache evidence, growth, window),
// the tool results its latest request sent deduplicated or pruned
// (DedupMark, PruneMark), and the summaries a request can resume from
// (Branch). Package rewrite decides with them and package state stores
// them; both import this one, so neither mirrors the other's types. It is
// plain values: the rules that change them live in rewrite, their encoding
// in state.
package history

import "time"

// Numbers are what a line of history has learnt, as decisions read them:
// its model, the calibration of tiktoken's counts to the upstream's for
// that model, and its breaker.
type Numbers struct {
	// Model is the model of the line's latest request; Calibration is for it.
	Model       string
	Calibration Calibration
	Breaker     Breaker
	// Turns counts the line's turns that reported usage; Cache is what
	// they said of the upstream's prompt cache. The cost model reads both.
	Turns int
	Cache CacheEvidence
	// Growth is how many tokens (the upstream's) a request of the line
	// adds to the one before, on average over its recent turns: how soon
	// it reaches its trigger. 0 when unknown.
	Growth int
	// Window is the context window, in the upstream's tokens, that the
	// upstream showed for Model by refusing a request of the line as too
	// long (0: none): smaller than the one configured or known for the
	// model, it is the one the line's requests are planned and cut by. A
	// later refusal can only lower it; a line whose model changes starts
	// without it.
	Window int
}

// Breaker is a line's compaction safety: the circuit breaker, which opens
// when compacting does not bring the upstream's count under the trigger,
// and the backoff after summariser failures. Its rules are rewrite's.
type Breaker struct {
	Tripped                bool
	ConsecutiveOverTrigger int
	FailureCount           int
	BackoffUntil           time.Time
	Reason                 string
}

// CacheEvidence is what a line's reported usages say of the upstream's
// prompt cache: Seen, some turn read from or wrote to it; Uncached, how
// many prompts large enough to cache reported neither, none ever having.
// What a usage adds to it, and when it is enough, is rewrite's to say.
type CacheEvidence struct {
	Seen     bool
	Uncached int
}

// DedupMark names a tool result a forwarded request sent as the dedup
// placeholder (rewrite's Result.Dedups, Options.PrevDedups), so the next
// request of the line sends it so again.
type DedupMark struct {
	// Index is the index of the result's message in the client's
	// `messages` as sent.
	Index int
	// Result is which of that message's tool results it is, 0 for the
	// first. A chat or Responses message carries one result, so every mark
	// written before results were deduped one by one names result 0.
	Result int
	// Digest is the sha256 of the message's canonical form, as the chain
	// hash hashes it: the same message sent again matches, an edited or a
	// different one does not. It is stable across restarts.
	Digest [32]byte
}

// PruneMark names a tool result a forwarded request sent as its pruned
// line (rewrite's Result.Prunes, Options.PrevPrunes).
type PruneMark struct {
	// Index, Result and Digest name the result as a DedupMark does: its
	// message's index in the client's messages, which of its results, and
	// the sha256 of the message's canonical form.
	Index, Result int
	Digest        [32]byte
	// Turn is the index of the user ask whose request decided the batch
	// that pruned the result. In a bound history the thinking between the
	// batch's first result and that ask was produced over the result as
	// it was, and is left out from then on.
	Turn int
}

// Branch is a summary a request can resume from, as the pipeline applies
// it: it replaces the first Covered messages (after the leading system
// messages) of a request whose messages hash to Hash. The stored branch
// (state.Branch) adds what keeping it needs: its parent, whether it is
// prepared, and its clocks.
type Branch struct {
	Summary string // the summary text (not the block)
	Covered int    // how many messages right after the leading system messages it replaces
	Hash    [32]byte
	// Since is how many client messages the request of the compaction that
	// made the branch had (0: unknown). The thinking blocks kept after the
	// summary that come from before it are bound to the history it
	// replaced; knowing where they end lets them be left out at a new user
	// turn (rewrite's Result.DropMismatched).
	Since int
	// Kept is where the messages the summary replaces are kept; its Note
	// is the line the summary block carries (zero: none, as for a branch
	// written before messages were kept).
	Kept Kept
}

// Kept is where the messages a summary replaced are kept for retrieval:
// the original (an expand.KindCompaction transcript of them) under Ref in
// the conversation's namespace, holding the client's messages First to
// Last (indexes into its messages as sent, inclusive). Note is the line
// the summary block says so in, fixed when the summary was written so the
// block is sent the same on every later request. The zero value is
// nothing kept.
type Kept struct {
	Ref         string
	First, Last int
	Note        string
}

// IsZero reports whether nothing is kept.
func (k Kept) IsZero() bool { return k == Kept{} }
