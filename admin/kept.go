package admin

import (
	"bytes"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxpress/ctxpress/history"
	"github.com/ctxpress/ctxpress/state"
	"github.com/ctxpress/ctxpress/wire"
)

// TurnDetail is what the turn view shows of an answered turn besides its
// record: every edit (the record keeps a bounded list) and the request as
// the client sent it and as forwarded. The turn hands it over as its
// answer ends (turn.Turn.Describe); Sent and Forwarded are the request's
// own bodies, valid only until it returns: Kept.Keep copies what it keeps.
type TurnDetail struct {
	Key                       state.Key
	TokensBefore, TokensAfter int
	Edits                     []history.Edit
	// Format reads Sent and Forwarded (the turn's wire format).
	Format          wire.Format
	Sent, Forwarded []byte
	// ForwardedOwned reports that Forwarded is the turn's own new body,
	// which nobody changes: it is kept without a copy. Otherwise it is
	// Sent itself (nothing changed), and kept once.
	ForwardedOwned bool
}

// Bounds of Kept: the bodies of the last KeptPerConversation turns of
// each conversation, KeptBytes in all; a turn whose bodies are more than a
// quarter of that is not kept.
const (
	KeptPerConversation = 4
	KeptBytes           = 64 << 20
)

// KeptWatch is how long after the admin API or the dashboard was last
// used bodies are still kept (Kept.Watch).
const KeptWatch = 30 * time.Minute

// Kept holds the bodies of the most recent turns in memory, bounded, so
// that the turn view can show a turn as sent beside as forwarded; they are
// gone on restart and never stored. Copying a request's body is most of
// what keeping it costs the request, so bodies are kept only while
// somebody looks: a dashboard open, or the admin API used lately (Watch).
// Its zero value is not usable: NewKept.
type Kept struct {
	perConv int
	max     int64
	// until is when keeping stops, in Unix nanoseconds, unless watched
	// again (Watch).
	until atomic.Int64
	mu    sync.Mutex
	// byKey holds each conversation's kept turns, oldest first, at most
	// perConv; order every kept turn, oldest first, some of them dropped
	// already (gone), for the byte cap. bytes is what the kept ones hold.
	// All guarded by mu.
	byKey map[state.Key][]*keptTurn
	order []*keptTurn
	bytes int64
}

// keptTurn is one turn's detail as kept: its bodies copied.
type keptTurn struct {
	key           state.Key
	at            time.Time
	before, after int
	edits         []history.Edit
	format        wire.Format
	sent          []byte
	forwarded     []byte // nil: as sent
	size          int64
	gone          bool
}

// NewKept keeps the bodies of the last perConv turns of each
// conversation, maxBytes in all.
func NewKept(perConv int, maxBytes int64) *Kept {
	return &Kept{perConv: max(perConv, 1), max: maxBytes, byKey: map[state.Key][]*keptTurn{}}
}

// Watch keeps the bodies of the turns answered until then. A nil Kept
// keeps nothing.
func (k *Kept) Watch(until time.Time) {
	if k == nil {
		return
	}
	for {
		old := k.until.Load()
		if old >= until.UnixNano() || k.until.CompareAndSwap(old, until.UnixNano()) {
			return
		}
	}
}

// watched reports whether bodies answered at now are kept (Watch).
func (k *Kept) watched(now time.Time) bool { return k != nil && now.UnixNano() < k.until.Load() }

// Keep keeps d, answered at at, dropping the oldest kept turns of its
// conversation and then of all beyond the bounds. A nil Kept keeps
// nothing.
func (k *Kept) Keep(d TurnDetail, at time.Time) {
	if k == nil || d.Key.ID == "" {
		return
	}
	size := int64(len(d.Sent))
	if d.ForwardedOwned {
		size += int64(len(d.Forwarded))
	}
	if size > k.max/4 {
		return
	}
	kt := &keptTurn{key: d.Key, at: at, before: d.TokensBefore, after: d.TokensAfter, edits: d.Edits, format: d.Format,
		sent: bytes.Clone(d.Sent), size: size}
	if d.ForwardedOwned {
		kt.forwarded = d.Forwarded
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	turns := append(k.byKey[d.Key], kt)
	for len(turns) > k.perConv {
		k.dropLocked(turns[0])
		turns = turns[1:]
	}
	k.byKey[d.Key] = turns
	k.order = append(k.order, kt)
	k.bytes += size
	for k.bytes > k.max && len(k.order) > 0 {
		old := k.order[0]
		k.order = k.order[1:]
		if old.gone {
			continue
		}
		k.dropLocked(old)
		rest := slices.DeleteFunc(k.byKey[old.key], func(t *keptTurn) bool { return t == old })
		if len(rest) == 0 {
			delete(k.byKey, old.key)
		} else {
			k.byKey[old.key] = rest
		}
	}
	if len(k.order) > 2*len(k.byKey)*k.perConv+16 { // the dropped ones piled up
		live := k.order[:0:0]
		for _, t := range k.order {
			if !t.gone {
				live = append(live, t)
			}
		}
		k.order = live
	}
}

// dropLocked forgets kt's bodies; the caller takes it out of byKey.
func (k *Kept) dropLocked(kt *keptTurn) {
	kt.gone = true
	k.bytes -= kt.size
	kt.sent, kt.forwarded = nil, nil
}

// find returns the kept turn that is key's recorded turn t, if kept
// (matchKept).
func (k *Kept) find(key state.Key, t state.Turn) (*keptTurn, bool) {
	if k == nil {
		return nil, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	turns := k.byKey[key]
	i := matchKept(t, turns)
	if i < 0 {
		return nil, false
	}
	return turns[i], true
}

// keptOf reports, for each of key's recorded turns, whether it is kept.
func (k *Kept) keptOf(key state.Key, turns []state.Turn) []bool {
	out := make([]bool, len(turns))
	if k == nil {
		return out
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	kept := k.byKey[key]
	if len(kept) == 0 {
		return out
	}
	for i, t := range turns {
		out[i] = matchKept(t, kept) >= 0
	}
	return out
}

// keptSlack is how far a kept turn's time may be from its recorded
// turn's: the turn is kept just before it is queued for the record, which
// stamps it then, to the millisecond.
const keptSlack = 2 * time.Second

// matchKept returns the index in kept of the recorded turn t: the one
// with t's tokens before and after kept nearest t's time, within
// keptSlack; -1 when none. The record knows a turn by its time and
// numbers only: the kept one is matched by them.
func matchKept(t state.Turn, kept []*keptTurn) int {
	best, bestGap := -1, keptSlack+1
	for i, kt := range kept {
		if kt.gone || kt.before != t.TokensBefore || kt.after != t.TokensAfter {
			continue
		}
		gap := t.At.Sub(kt.at)
		if gap < 0 {
			gap = -gap
		}
		if gap <= keptSlack && gap < bestGap {
			best, bestGap = i, gap
		}
	}
	return best
}
