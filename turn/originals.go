package turn

import (
	"strings"
	"sync"
	"time"

	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/state"
)

// Keeper keeps the originals that forwarded bodies' markers point to: in
// the store, in the conversation's namespace, and as files for an agent
// on this machine. What this process kept is remembered, so an unchanged
// history costs a map lookup per marker, not a write; for renewAfter, so
// that an original a conversation still sends is kept again now and then
// (its age renewed against the retention, its file back if it was
// removed).
type Keeper struct {
	Store state.Originals      // nil: none
	Files *state.OriginalFiles // nil: no files
	// Failed reports a failure to keep (the request goes on: its markers
	// still name the reference, and the next turn tries again).
	Failed func(err error)

	// Retrieved counts a retrieval of an original of kind (expand.Kind*)
	// from tool's output, by way ("file", "http", "tool", "cli"): the
	// fidelity signal, live. Nil: not counted.
	Retrieved func(kind, tool, way string)

	// Now is the clock (nil: time.Now).
	Now func() time.Time

	mu    sync.Mutex
	known map[knownRef]time.Time // when each was kept
}

// knownRef is an original kept in a namespace: a key of two strings the
// request already holds, so a lookup per marker allocates nothing.
type knownRef struct{ ns, ref string }

// renewAfter is how long a kept original is taken as kept: well inside
// the shortest retention anyone sets, and rare enough to cost nothing.
const renewAfter = time.Hour

func (k *Keeper) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// maxKnown bounds the remembered references; past it the memory starts
// over, and a reference kept before is written again once (a no-op but
// for its age).
const maxKnown = 1 << 16

// keep starts keeping the originals of res not kept yet, read from
// parsed (the client's request) before this returns; the returned channel
// closes when they are kept (nil: nothing to keep).
func (k *Keeper) keep(ns string, parsed *rewrite.Parsed, res []rewrite.Original) <-chan struct{} {
	if k == nil || len(res) == 0 || (k.Store == nil && k.Files == nil) {
		return nil
	}
	var fresh []expand.Original
	now := k.now()
	k.mu.Lock()
	for _, o := range res {
		if at, ok := k.known[knownRef{ns, o.Ref}]; ok && now.Sub(at) < renewAfter || seen(fresh, o.Ref) {
			continue
		}
		o.Text = strings.Clone(parsed.OriginalText(o)) // the body is the request's, reused after it
		if o.Text != "" {
			fresh = append(fresh, o.Original)
		}
	}
	k.mu.Unlock()
	if len(fresh) == 0 {
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ok := true
		if k.Files != nil {
			if err := k.Files.Write(fresh); err != nil {
				ok = false
				k.failed(err)
			}
		}
		if k.Store != nil {
			if err := k.Store.PutOriginals(ns, fresh); err != nil {
				ok = false
				k.failed(err)
			}
		}
		if ok {
			k.remember(ns, fresh)
		}
	}()
	return done
}

// PutOriginals keeps originals of ns now, in the store and as files (a
// compaction's messages, kept as it ends): Keeper is the state.Originals
// of whatever keeps originals beside the turns.
func (k *Keeper) PutOriginals(ns string, os []expand.Original) error {
	var fileErr error
	if k.Files != nil {
		fileErr = k.Files.Write(os)
	}
	if err := k.Store.PutOriginals(ns, os); err != nil {
		k.failed(err)
		return err
	}
	k.remember(ns, os)
	if fileErr != nil {
		k.failed(fileErr)
	}
	return fileErr
}

// GetOriginal is the store's.
func (k *Keeper) GetOriginal(ns, ref string) (expand.Original, bool, error) {
	return k.Store.GetOriginal(ns, ref)
}

// countFileReads counts the originals' files the calls this request
// answers read (rewrite.Parsed.FileRetrievals).
func (k *Keeper) countFileReads(ns string, parsed *rewrite.Parsed) {
	if k == nil || k.Files == nil || k.Retrieved == nil {
		return
	}
	for _, ref := range parsed.FileRetrievals(k.Files.Dir) {
		kind, tool := expand.KindSquash, ""
		if k.Store != nil {
			if o, ok, err := k.Store.GetOriginal(ns, ref); err == nil && ok {
				kind, tool = o.Kind, o.Tool
			}
		}
		k.Retrieved(kind, tool, "file")
	}
}

func (k *Keeper) failed(err error) {
	if k.Failed != nil {
		k.Failed(err)
	}
}

func (k *Keeper) remember(ns string, kept []expand.Original) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.known == nil || len(k.known)+len(kept) > maxKnown {
		k.known = make(map[knownRef]time.Time, len(kept))
	}
	now := k.now()
	for _, o := range kept {
		k.known[knownRef{ns, o.Ref}] = now
	}
}

// seen reports whether ref is among os already.
func seen(os []expand.Original, ref string) bool {
	for _, o := range os {
		if o.Ref == ref {
			return true
		}
	}
	return false
}
