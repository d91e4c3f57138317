package state

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// MemoryOptions configures NewMemoryWithOptions. The zero value is ready to
// use; the fields mean what they mean in BoltOptions.
type MemoryOptions struct {
	Retention     time.Duration // 0: DefaultRetention; <0: keep forever
	SweepInterval time.Duration // 0: DefaultSweepInterval; <0: no background sweep
	Now           func() time.Time
	OnSweep       func(removed int, err error)
}

// memStore is the Store in memory. Records are kept encoded, exactly as the
// bolt store keeps them, so both behave alike and no caller shares a slice
// with the store.
type memStore struct {
	now     func() time.Time
	sweeper *sweeper // nil when disabled

	mu      sync.RWMutex      // guards records and closed
	records map[string][]byte // storage key -> encoded record
	closed  bool
}

var _ Store = (*memStore)(nil)

// NewMemory returns an empty in-memory Store with the default retention and
// sweep interval. Close it to stop its background sweep.
func NewMemory() Store {
	return NewMemoryWithOptions(MemoryOptions{})
}

// NewMemoryWithOptions returns an empty in-memory Store configured by opts.
func NewMemoryWithOptions(opts MemoryOptions) Store {
	rs := resolveRetention(opts.Retention, opts.SweepInterval, opts.Now, opts.OnSweep)
	s := &memStore{now: rs.now, records: make(map[string][]byte)}
	s.sweeper = startSweeper(rs, s.Sweep)
	return s
}

func errClosed(op string) error { return fmt.Errorf("state: %s: %w", op, ErrClosed) }

func (s *memStore) Get(key Key) (Record, bool, error) {
	if err := key.Validate(); err != nil {
		return Record{}, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return Record{}, false, errClosed("get")
	}
	data, ok := s.records[string(key.encode())]
	if !ok {
		return Record{}, false, nil
	}
	rec, err := decodeRecord(key, data)
	if err != nil {
		return Record{}, false, fmt.Errorf("state: get: %w", err)
	}
	return rec, true, nil
}

func (s *memStore) Update(key Key, fn func(*Record) error) (Record, error) {
	return s.update(Mutation{Key: key, Fn: fn})
}

func (s *memStore) update(m Mutation) (Record, error) {
	key, fn := m.Key, m.Fn
	if err := key.Validate(); err != nil {
		return Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Record{}, errClosed("update")
	}
	k := string(key.encode())
	rec, data, err := applyUpdate(key, s.records[k], m.at(s.now()), fn)
	var ue errUser
	if errors.As(err, &ue) {
		return Record{}, ue.err
	}
	if err != nil {
		return Record{}, fmt.Errorf("state: update: %w", err)
	}
	s.records[k] = data
	return rec, nil
}

func (s *memStore) UpdateMany(muts []Mutation) ([]Record, []error, error) {
	recs, errs := make([]Record, len(muts)), make([]error, len(muts))
	for i, m := range muts {
		recs[i], errs[i] = s.update(m)
		if errors.Is(errs[i], ErrClosed) {
			return recs, errs, errs[i]
		}
	}
	return recs, errs, nil
}

func (s *memStore) Delete(key Key) (bool, error) {
	if err := key.Validate(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, errClosed("delete")
	}
	k := string(key.encode())
	_, ok := s.records[k]
	delete(s.records, k)
	return ok, nil
}

func (s *memStore) List(opts ListOptions) ([]Record, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, errClosed("list")
	}
	prefix := ""
	if opts.Namespace != "" {
		prefix = string(namespacePrefix(opts.Namespace))
	}
	var entries []listEntry
	for k, v := range s.records {
		if !strings.HasPrefix(k, prefix) || !opts.matches([]byte(k)) {
			continue
		}
		if at, ok := decodeStamp(v); ok {
			entries = append(entries, listEntry{key: []byte(k), updatedAt: at})
		}
	}
	var out []Record
	for _, e := range opts.page(entries) {
		key, _ := decodeKey(e.key)
		if rec, err := decodeRecord(key, s.records[string(e.key)]); err == nil {
			out = append(out, rec)
		}
	}
	return out, nil
}

func (s *memStore) Sweep(olderThan time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errClosed("sweep")
	}
	n := 0
	for k, v := range s.records {
		if at, ok := decodeStamp(v); !ok || at.Before(olderThan) {
			delete(s.records, k)
			n++
		}
	}
	return n, nil
}

func (s *memStore) Close() error {
	s.sweeper.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.records = nil
	return nil
}
