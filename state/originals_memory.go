package state

import (
	"time"

	"github.com/ctxpress/ctxpress/expand"
)

// memOriginal is an original kept by the memory store, and when it was
// last put.
type memOriginal struct {
	o  expand.Original
	at time.Time
}

func (s *memStore) PutOriginals(ns string, os []expand.Original) error {
	for _, o := range os {
		if err := checkOriginal(ns, o.Ref); err != nil {
			return err
		}
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed("put originals")
	}
	if s.originals == nil {
		s.originals = make(map[string]memOriginal)
	}
	for _, o := range os {
		s.originals[ns+"\x00"+o.Ref] = memOriginal{o: o, at: now}
	}
	return nil
}

func (s *memStore) GetOriginal(ns, ref string) (expand.Original, bool, error) {
	if err := checkOriginal(ns, ref); err != nil {
		return expand.Original{}, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return expand.Original{}, false, errClosed("get original")
	}
	m, ok := s.originals[ns+"\x00"+ref]
	return m.o, ok, nil
}
