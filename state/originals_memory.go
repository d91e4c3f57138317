package state

import (
	"container/list"
	"time"

	"github.com/ctxpress/ctxpress/expand"
)

// memOriginals are the originals of the memory store, guarded by the
// store's mu.
type memOriginals struct {
	byRef map[string]map[string]*list.Element // ref -> namespace -> its entry in order
	order *list.List                          // of *memOriginal, least recently put first
	bytes int64                               // originalSize of all of them
	cap   int64
}

// memOriginal is an original kept by the memory store, its namespace and
// when it was last put.
type memOriginal struct {
	ns string
	o  expand.Original
	at time.Time
}

func newMemOriginals(maxBytes int64) *memOriginals {
	return &memOriginals{byRef: make(map[string]map[string]*list.Element), order: list.New(), cap: originalsCap(maxBytes)}
}

func (m *memOriginals) put(ns string, o expand.Original, now time.Time) {
	if e := m.byRef[o.Ref][ns]; e != nil {
		if k := e.Value.(*memOriginal); now.Sub(k.at) >= renewEvery {
			k.at = now
			m.order.MoveToBack(e)
		}
		return
	}
	size := originalSize(ns, o)
	if size > m.cap {
		return // it would push out everything and still not fit
	}
	if m.byRef[o.Ref] == nil {
		m.byRef[o.Ref] = make(map[string]*list.Element, 1)
	}
	m.byRef[o.Ref][ns] = m.order.PushBack(&memOriginal{ns: ns, o: o, at: now})
	m.bytes += size
	for m.bytes > m.cap {
		m.remove(m.order.Front())
	}
}

func (m *memOriginals) remove(e *list.Element) {
	k := m.order.Remove(e).(*memOriginal)
	m.bytes -= originalSize(k.ns, k.o)
	delete(m.byRef[k.o.Ref], k.ns)
	if len(m.byRef[k.o.Ref]) == 0 {
		delete(m.byRef, k.o.Ref)
	}
}

// sweep removes the originals last put before olderThan.
func (m *memOriginals) sweep(olderThan time.Time) {
	for e := m.order.Front(); e != nil; {
		next := e.Next()
		if e.Value.(*memOriginal).at.Before(olderThan) {
			m.remove(e)
		}
		e = next
	}
}

func (s *memStore) PutOriginals(ns string, os []expand.Original) error {
	if err := checkOriginals(ns, os); err != nil {
		return err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed("put originals")
	}
	for _, o := range os {
		s.originals.put(ns, o, now)
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
	if e := s.originals.byRef[ref][ns]; e != nil {
		return e.Value.(*memOriginal).o, true, nil
	}
	return expand.Original{}, false, nil
}

func (s *memStore) FindOriginal(ref string) (expand.Original, bool, error) {
	if !expand.ValidRef(ref) {
		return expand.Original{}, false, ErrBadRef
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return expand.Original{}, false, errClosed("find original")
	}
	for _, e := range s.originals.byRef[ref] {
		return e.Value.(*memOriginal).o, true, nil
	}
	return expand.Original{}, false, nil
}
