package state

import (
	"errors"

	"github.com/ctxpress/ctxpress/expand"
)

// Originals keeps what ctxpress replaced (a squashed, pruned or deduped
// tool output, the messages a summary covers) under its reference, per
// namespace, for as long as the store's retention and within its size cap.
// A reference looked up in another namespace is not found, whatever the
// first holds. Every Store implements it.
type Originals interface {
	// PutOriginals keeps each original of ns under its Ref. One already
	// kept is kept once (its age renewed).
	PutOriginals(ns string, o []expand.Original) error
	// GetOriginal returns the original kept under ref in ns; ok is false
	// when there is none (never kept, swept, evicted, or another
	// namespace's).
	GetOriginal(ns, ref string) (o expand.Original, ok bool, err error)
}

// ErrBadRef is the error of a reference that is not one (expand.ValidRef)
// or of a namespace that fails Key.Validate.
var ErrBadRef = errors.New("state: invalid original reference")

// checkOriginal validates ns and ref as the stores take them.
func checkOriginal(ns, ref string) error {
	if !expand.ValidRef(ref) || (Key{Namespace: ns, ID: "x"}).Validate() != nil {
		return ErrBadRef
	}
	return nil
}
