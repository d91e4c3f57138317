package state

import (
	"bytes"
	"cmp"
	"slices"
	"sync"
	"time"
)

// Defaults for the zero values of BoltOptions and MemoryOptions.
const (
	DefaultRetention     = 720 * time.Hour // 30 days
	DefaultSweepInterval = time.Hour
	DefaultLockTimeout   = time.Second
)

// Store persists conversation records. Implementations are safe for
// concurrent use. Every method returns an error wrapping ErrClosed after
// Close, and one wrapping ErrInvalidKey for a key that fails Key.Validate.
// It keeps the originals of what ctxpress replaced too (Originals), bound
// by the same retention and by a size cap of their own.
type Store interface {
	Originals

	// Get returns the record for key; ok is false when there is none. A record
	// of another namespace is never returned. A stored record that cannot be
	// decoded is an error wrapping ErrCorrupt.
	Get(key Key) (rec Record, ok bool, err error)

	// Update runs fn on the current record for key (a zero Record with Key
	// set and CreatedAt = now when there is none, or when the stored one
	// cannot be decoded) inside one write transaction, sets UpdatedAt = now,
	// persists the result and returns it as stored. If fn returns an error,
	// nothing is written and Update returns that error as is. Concurrent
	// Updates are serialised, so none loses another's change. fn must not
	// call the Store, and changes it makes to Key are ignored. A store
	// shared between processes (Redis) may run fn more than once, each time
	// on a fresh copy of the newer record, so fn must only change the
	// record (what it sets outside is overwritten by its last run).
	Update(key Key, fn func(*Record) error) (Record, error)

	// UpdateMany applies several updates in one write transaction: one disk
	// sync for all of them, for a writer that would fall behind at one sync
	// per update. They run in order with Update's semantics each; one whose
	// key is invalid or whose Fn returns an error is left out and its error
	// put in errs[i], the others are written and returned in recs. err is a
	// failure of the transaction itself (nothing written).
	UpdateMany(muts []Mutation) (recs []Record, errs []error, err error)

	// Delete removes the record for key and reports whether there was one.
	Delete(key Key) (bool, error)

	// List returns records, most recently updated first (ties by namespace,
	// then id), after the filters and paging of opts. Records that cannot be
	// decoded are skipped.
	List(opts ListOptions) ([]Record, error)

	// Sweep deletes the records last updated before olderThan, and those that
	// cannot be decoded, and returns how many it deleted. It also deletes
	// the originals last put before olderThan, without counting them.
	Sweep(olderThan time.Time) (int, error)

	// Close stops the background sweep, waits for it, and releases the store.
	// Calling it again returns nil.
	Close() error
}

// ListOptions selects and pages records for Store.List. The zero value lists
// every record.
type ListOptions struct {
	// Namespace, when set, lists only the records of that namespace.
	Namespace string
	// ID, when set, lists only the records with that conversation id (one per
	// namespace at most), for looking up an id whose namespace is unknown.
	ID string
	// Offset skips that many records of the ordered result.
	Offset int
	// Limit caps the number returned; 0 or less means no cap.
	Limit int
}

// matches reports whether the storage key k passes the filters of o.
func (o ListOptions) matches(k []byte) bool {
	key, ok := decodeKey(k)
	if !ok {
		return false
	}
	return (o.Namespace == "" || key.Namespace == o.Namespace) && (o.ID == "" || key.ID == o.ID)
}

// listEntry is a candidate of List: its storage key and UpdatedAt.
type listEntry struct {
	key       []byte
	updatedAt time.Time
}

// page sorts entries newest first (ties by key, so namespace then id) and
// returns the window of o.
func (o ListOptions) page(entries []listEntry) []listEntry {
	slices.SortFunc(entries, func(a, b listEntry) int {
		if c := b.updatedAt.Compare(a.updatedAt); c != 0 {
			return c
		}
		return bytes.Compare(a.key, b.key)
	})
	off := min(max(o.Offset, 0), len(entries))
	entries = entries[off:]
	if o.Limit > 0 && o.Limit < len(entries) {
		entries = entries[:o.Limit]
	}
	return entries
}

// errUser carries fn's error out of the transaction untouched.
type errUser struct{ err error }

func (e errUser) Error() string { return e.err.Error() }

// applyUpdate is the read-modify-write shared by the stores: it decodes old
// (nil: absent), runs fn, stamps the times and returns the record as stored
// and its bytes. fn's error comes back as errUser.
func applyUpdate(key Key, old []byte, now time.Time, fn func(*Record) error) (Record, []byte, error) {
	rec := Record{Key: key, CreatedAt: now}
	if old != nil {
		if r, err := decodeRecord(key, old); err == nil {
			rec = r
		}
	}
	// The decoded turns are this update's alone: AddTurn may append
	// into their spare capacity instead of copying them.
	adopted := adoptTurns(&rec)
	rec, data, err := applyTo(rec, key, now, fn)
	if rec.turns == adopted {
		rec.turns = nil // the record as decoded has none (a copy is always safe)
	}
	return rec, data, err
}

// applyTo is applyUpdate on an already decoded record (a store's own
// copy: fn may change it).
func applyTo(rec Record, key Key, now time.Time, fn func(*Record) error) (Record, []byte, error) {
	rec, err := applyRecord(rec, key, now, fn)
	if err != nil {
		return Record{}, nil, err
	}
	data, err := encodeRecord(&rec)
	if err != nil {
		return Record{}, nil, err
	}
	return rec, data, nil
}

// applyRecord runs fn on rec and stamps the result as stored, without
// encoding it. fn's error comes back as errUser.
func applyRecord(rec Record, key Key, now time.Time, fn func(*Record) error) (Record, error) {
	if err := fn(&rec); err != nil {
		return Record{}, errUser{err}
	}
	rec.Key = key
	rec.UpdatedAt = now
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = now
	}
	normalize(&rec)
	return rec, nil
}

// retentionSettings resolves the shared retention options.
type retentionSettings struct {
	retention time.Duration // <0: never expire
	interval  time.Duration // <0: no background sweep
	now       func() time.Time
	onSweep   func(removed int, err error)
}

func resolveRetention(retention, interval time.Duration, now func() time.Time, onSweep func(int, error)) retentionSettings {
	if now == nil {
		now = time.Now
	}
	return retentionSettings{
		retention: cmp.Or(retention, DefaultRetention),
		interval:  cmp.Or(interval, DefaultSweepInterval),
		now:       now,
		onSweep:   onSweep,
	}
}

// sweeper runs sweep(now - retention) at start and then every interval, until
// stop. A nil *sweeper is a disabled one.
type sweeper struct {
	stopOnce sync.Once
	stop     chan struct{} // closed to ask the goroutine to return
	done     chan struct{} // closed by the goroutine when it returns
}

func startSweeper(rs retentionSettings, sweep func(olderThan time.Time) (int, error)) *sweeper {
	if rs.retention < 0 || rs.interval < 0 {
		return nil
	}
	s := &sweeper{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(rs.interval)
		defer t.Stop()
		for {
			n, err := sweep(rs.now().Add(-rs.retention))
			if rs.onSweep != nil {
				rs.onSweep(n, err)
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop asks the goroutine to return and waits for it. Safe to call twice and
// on nil.
func (s *sweeper) Stop() {
	if s == nil {
		return
	}
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
}

// Mutation is one update of UpdateMany.
type Mutation struct {
	Key Key
	Fn  func(*Record) error
	// At, when set, is when the change happened: the record's UpdatedAt
	// (and CreatedAt when it is new) instead of the store's clock, so a
	// writer that gathers changes keeps their order (List is newest first).
	At time.Time
}

// at is the time the mutation stamps on its record: At, or now.
func (m Mutation) at(now time.Time) time.Time {
	if m.At.IsZero() {
		return now
	}
	return m.At
}
