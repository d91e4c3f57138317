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
	// OriginalsMaxBytes caps the originals kept (PutOriginals); 0 means
	// DefaultOriginalsMaxBytes, a negative value no cap.
	OriginalsMaxBytes int64
}

// memStore is the Store in memory. Records are kept decoded, as the bolt
// store's record cache keeps them (normalized as a write to the file leaves
// them): a busy conversation's record (up to MaxTurns turns) was kept
// encoded, decoded on every read and write and encoded again, and the chat
// path on a memory store took 1.7x the CPU it takes on a bolt file.
// Readers get a copy (Record.clone) whose shared arrays are copied on
// write, as from the bolt store's cache.
type memStore struct {
	now     func() time.Time
	sweeper *sweeper // nil when disabled

	mu        sync.RWMutex         // guards records, originals and closed
	records   map[string]memRecord // storage key -> record
	originals *memOriginals
	closed    bool
}

// memRecord is a stored record, or, for bytes put raw that do not decode
// (a test's), the bytes and why.
type memRecord struct {
	rec Record
	raw []byte // set with err only
	err error
}

// decodedMemRecord is the memRecord of an encoding from elsewhere (a test's
// raw bytes).
func decodedMemRecord(key Key, data []byte) memRecord {
	rec, err := decodeRecord(key, data)
	if err != nil {
		return memRecord{raw: data, err: err}
	}
	return memRecord{rec: rec}
}

// stamp is when r was last written, as List and Sweep read it; false when
// it cannot be told.
func (r memRecord) stamp() (time.Time, bool) {
	if r.err != nil {
		return decodeStamp(r.raw)
	}
	return r.rec.UpdatedAt, true
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
	s := &memStore{now: rs.now, records: make(map[string]memRecord), originals: newMemOriginals(opts.OriginalsMaxBytes)}
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
	r, ok := s.records[string(key.encode())]
	if !ok {
		return Record{}, false, nil
	}
	if r.err != nil {
		return Record{}, false, fmt.Errorf("state: get: %w", r.err)
	}
	return r.rec.clone(), true, nil
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
	now := m.at(s.now())
	base := Record{Key: key, CreatedAt: now}
	if old, ok := s.records[k]; ok && old.err == nil { // an undecodable one starts afresh
		base = old.rec.clone()
	}
	rec, err := applyRecord(base, key, now, fn)
	var ue errUser
	if errors.As(err, &ue) {
		return Record{}, ue.err
	}
	if err != nil {
		return Record{}, fmt.Errorf("state: update: %w", err)
	}
	s.records[k] = memRecord{rec: rec}
	return rec.clone(), nil
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
		if at, ok := v.stamp(); ok {
			entries = append(entries, listEntry{key: []byte(k), updatedAt: at})
		}
	}
	var out []Record
	for _, e := range opts.page(entries) {
		if r := s.records[string(e.key)]; r.err == nil {
			out = append(out, r.rec.clone())
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
		if at, ok := v.stamp(); !ok || at.Before(olderThan) {
			delete(s.records, k)
			n++
		}
	}
	s.originals.sweep(olderThan)
	return n, nil
}

func (s *memStore) Close() error {
	s.sweeper.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.records, s.originals = nil, nil
	return nil
}
