package state

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// SchemaVersion is the version of the stored layout this code writes and
// reads in Redis. OpenBolt and OpenRedis refuse a database with a newer
// version.
const SchemaVersion = 1

// boltSchemaVersion is the bolt file's: 2 keeps the turns in their own
// bucket (see bucketTurns). Version 2 reads a version 1 file, whose records
// have their turns inside, and moves a record's turns when it next writes
// it; OpenBolt marks the file 2 at once, so an older binary, which would
// find no turns and leave the chunks behind when it deletes a record,
// refuses to open it (ErrSchemaTooNew) rather than losing them.
const boltSchemaVersion = 2

// Buckets and meta keys of the bolt file.
var (
	bucketMeta          = []byte("meta")
	bucketConversations = []byte("conversations")
	metaSchemaVersion   = []byte("schema_version") // decimal ASCII
	metaApp             = []byte("app")            // "ctxpress"
	// metaJournalThrough is the seq up to which the journal's changes are
	// written (uint64, little-endian), put in the transaction that wrote
	// them.
	metaJournalThrough = []byte("journal_through")
)

// fileMode is the permission of a database file OpenBolt creates.
const fileMode fs.FileMode = 0o600

// BoltOptions configures OpenBolt. The zero value is ready to use.
type BoltOptions struct {
	// Timeout is how long to wait for another process to release the file
	// lock; 0 means DefaultLockTimeout (1s), a negative value fails at once.
	// Beyond it, OpenBolt returns an error wrapping ErrLocked.
	Timeout time.Duration
	// ReadOnly opens an existing database with a shared lock, for inspection
	// while a daemon does not hold it; writes return ErrReadOnly and there is
	// no background sweep. A missing file is an error wrapping fs.ErrNotExist.
	ReadOnly bool
	// Retention is how long a record may go without an update before the
	// background sweep deletes it; 0 means DefaultRetention (720h), a
	// negative value keeps records forever.
	Retention time.Duration
	// SweepInterval is how often the background sweep runs (it also runs
	// once at open); 0 means DefaultSweepInterval (1h), a negative value
	// disables it (Sweep still works).
	SweepInterval time.Duration
	// Now is the clock for CreatedAt, UpdatedAt and the sweep; nil means
	// time.Now.
	Now func() time.Time
	// OnSweep, when set, is called after each background sweep with the
	// number of records deleted and the error, for logging.
	OnSweep func(removed int, err error)
	// MapResident bounds the bytes of the db file's map kept in RSS (see
	// trimMapping); 0 means DefaultMapResident (16 MiB), negative no bound.
	MapResident int64
	// JournalBytes is the size of the journal file beside the database
	// (its path with "-journal" added; see Journaled); 0 means
	// DefaultJournalBytes, a negative value keeps no journal. A read-only
	// store keeps none.
	JournalBytes int
	// OriginalsMaxBytes caps the originals kept (PutOriginals); 0 means
	// DefaultOriginalsMaxBytes, a negative value no cap. Beyond it the
	// least recently put go first.
	OriginalsMaxBytes int64
	// OnJournalError, when set, is told why the store keeps no journal
	// although asked to (the file cannot be made or mapped there: a full
	// disk, a file system without shared maps). The store works without
	// one: a crash loses the writer's last interval, as before journals.
	OnJournalError func(error)
}

// boltStore is the Store on a bbolt file.
type boltStore struct {
	db       *bolt.DB
	path     string
	readOnly bool
	now      func() time.Time
	sweeper  *sweeper    // nil when disabled
	trimmer  *mapTrimmer // nil when MapResident < 0

	originalsCap int64 // OriginalsMaxBytes, resolved

	records *recordCache // decoded records, so a busy conversation is not re-decoded every turn
	closed  atomic.Bool  // set by Close: the cache must not answer after it

	// broken holds the first error of a bbolt panic; see run.
	broken atomic.Pointer[error]

	// journal, when kept, holds the writer's changes until they are
	// written (Journaled); unjournaled are those recovered at open.
	journal     *journal
	unjournaled []JournalEntry
	through     uint64 // the mark at open, or the last recovered entry's seq

	closeOnce sync.Once
	closeErr  error // result of the first Close
}

var _ Store = (*boltStore)(nil)

// OpenBolt opens the database at path, creating it (mode 0600, and missing
// parent directories with mode 0700) unless opts.ReadOnly. It starts the
// background sweep unless disabled or read-only. Errors wrap ErrNotDatabase
// (a directory, garbage, a corrupt file, a bbolt file of another program),
// ErrSchemaTooNew, ErrLocked, or the operating system's error (for example
// fs.ErrPermission, or fs.ErrNotExist on a read-only open of a missing file).
func OpenBolt(path string, opts BoltOptions) (Store, error) {
	if path == "" {
		return nil, fmt.Errorf("state: open database: empty path: %w", fs.ErrInvalid)
	}
	fi, err := os.Stat(path)
	created := false
	switch {
	case err == nil && fi.IsDir():
		return nil, fmt.Errorf("state: open database %s: is a directory: %w", path, ErrNotDatabase)
	case err == nil && !fi.Mode().IsRegular():
		return nil, fmt.Errorf("state: open database %s: not a regular file: %w", path, ErrNotDatabase)
	case errors.Is(err, fs.ErrNotExist) && opts.ReadOnly:
		return nil, fmt.Errorf("state: open database read-only: %w", err)
	case errors.Is(err, fs.ErrNotExist):
		created = true
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("state: create database directory: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("state: open database: %w", err)
	}

	timeout := lockTimeout(opts.Timeout)
	if err := checkTruncated(path); err != nil {
		return nil, err
	}
	db, err := openBoltFile(path, &bolt.Options{Timeout: timeout, ReadOnly: opts.ReadOnly})
	if err != nil {
		return nil, classifyOpenError(path, err, timeout)
	}
	if err, panicked := guard(func() error { return checkSchema(db, opts.ReadOnly) }); err != nil {
		if panicked {
			return nil, fmt.Errorf("state: open database %s: %w (%w)", path, ErrNotDatabase, err)
		}
		_ = db.Close()
		return nil, fmt.Errorf("state: open database %s: %w", path, err)
	}

	rs := resolveRetention(opts.Retention, opts.SweepInterval, opts.Now, opts.OnSweep)
	s := &boltStore{db: db, path: path, readOnly: opts.ReadOnly, now: rs.now, records: newRecordCache(),
		originalsCap: originalsCap(opts.OriginalsMaxBytes)}
	if !opts.ReadOnly && opts.JournalBytes >= 0 {
		if err := s.openJournal(cmp.Or(opts.JournalBytes, DefaultJournalBytes), created); err != nil && opts.OnJournalError != nil {
			opts.OnJournalError(err)
		}
	}
	if !opts.ReadOnly {
		s.sweeper = startSweeper(rs, s.Sweep)
	}
	s.trimmer = startMapTrimmer(s, opts.MapResident)
	if s.journal != nil {
		return journaledBolt{s}, nil
	}
	return s, nil
}

// userPanic carries a panic of the caller's update function through guard,
// which re-raises it: only bbolt's own panics become errors.
type userPanic struct{ v any }

// guard runs f, a bbolt transaction, turning a panic or memory fault inside
// bbolt (a file corrupted or truncated while open) into an error wrapping
// ErrCorrupt, and reports whether that happened: bbolt may then hold its
// locks forever, so the caller must not use the DB again, not even to close
// it. The caller's panics (userPanic) pass through.
func guard(f func() error) (err error, panicked bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if up, ok := p.(userPanic); ok {
				panic(up.v)
			}
			err, panicked = fmt.Errorf("%w: bbolt panicked: %v", ErrCorrupt, p), true
		}
	}()
	return f(), false
}

// view runs fn in a read transaction; see run.
func (s *boltStore) view(op string, fn func(tx *bolt.Tx) error) error {
	return s.run(op, func() error { return s.db.View(fn) })
}

// update runs fn in a write transaction; see run.
func (s *boltStore) update(op string, fn func(tx *bolt.Tx) error) error {
	return s.run(op, func() error { return s.db.Update(fn) })
}

// run runs a transaction under guard. After bbolt panicked once, the store is
// broken: every later call returns that error at once.
func (s *boltStore) run(op string, tx func() error) error {
	if err := s.broken.Load(); err != nil {
		return fmt.Errorf("state: %s: %w", op, *err)
	}
	err, panicked := guard(tx)
	if panicked {
		s.broken.CompareAndSwap(nil, &err)
		return fmt.Errorf("state: %s: %w", op, err)
	}
	return wrap(op, err)
}

// wrap maps bbolt's errors to the package's; fn's errUser passes untouched.
func wrap(op string, err error) error {
	var ue errUser
	switch {
	case err == nil, errors.As(err, &ue), errors.Is(err, ErrCorrupt):
		return err
	case errors.Is(err, bolterrors.ErrDatabaseNotOpen):
		err = ErrClosed
	}
	return fmt.Errorf("state: %s: %w", op, err)
}

func (s *boltStore) Get(key Key) (Record, bool, error) {
	if err := key.Validate(); err != nil {
		return Record{}, false, err
	}
	k := key.encode()
	// A closed or broken store answers with its error, not from memory.
	if rec, ok := s.records.get(k); ok && !s.closed.Load() && s.broken.Load() == nil {
		return rec, true, nil
	}
	var (
		rec   Record
		turns *turnLayout
		ok    bool
		txid  uint64
	)
	err := s.view("get", func(tx *bolt.Tx) error {
		txid = uint64(tx.ID())
		b := tx.Bucket(bucketConversations)
		if b == nil {
			return nil
		}
		data := b.Get(k)
		if data == nil {
			return nil
		}
		var err error
		if rec, err = decodeRecord(key, data); err != nil {
			return err
		}
		turns, err = storedTurns(tx.Bucket(bucketTurns), k, data, &rec)
		ok = err == nil
		return err
	})
	if err != nil {
		return Record{}, false, err
	}
	if ok {
		s.records.add(k, rec, turns, txid)
	}
	return rec, ok, nil
}

func (s *boltStore) Update(key Key, fn func(*Record) error) (Record, error) {
	if err := key.Validate(); err != nil {
		return Record{}, err
	}
	if s.readOnly {
		return Record{}, fmt.Errorf("state: update: %w", ErrReadOnly)
	}
	// fn's panics are marked so guard re-raises them instead of reporting
	// a corrupt database.
	userFn := func(r *Record) error {
		defer func() {
			if p := recover(); p != nil {
				panic(userPanic{p})
			}
		}()
		return fn(r)
	}
	var out Record
	var w cacheWrite
	defer s.settle(&w)
	err := s.update("update", func(tx *bolt.Tx) error {
		w.txid = uint64(tx.ID())
		k := key.encode()
		rec, turns, err := s.apply(tx, key, k, s.now(), userFn)
		if err != nil {
			return err
		}
		out = rec
		w.put(s.records, k, rec, turns)
		return nil
	})
	w.committed = err == nil
	var ue errUser
	if errors.As(err, &ue) {
		return Record{}, ue.err
	}
	if err != nil {
		return Record{}, err
	}
	return out, nil
}

func (s *boltStore) UpdateMany(muts []Mutation) ([]Record, []error, error) {
	return s.updateMany(muts, nil)
}

// updateMany is UpdateMany that also puts the journal's mark through, when
// set, in its transaction.
func (s *boltStore) updateMany(muts []Mutation, through *uint64) ([]Record, []error, error) {
	recs, errs := make([]Record, len(muts)), make([]error, len(muts))
	if s.readOnly {
		return recs, errs, fmt.Errorf("state: update: %w", ErrReadOnly)
	}
	var w cacheWrite
	defer s.settle(&w)
	err := s.update("update", func(tx *bolt.Tx) error {
		w.txid = uint64(tx.ID())
		now := s.now()
		for i, m := range muts {
			recs[i], errs[i] = Record{}, nil // a retried transaction starts clean
			if err := m.Key.Validate(); err != nil {
				errs[i] = err
				continue
			}
			fn := m.Fn
			userFn := func(r *Record) error {
				defer func() {
					if p := recover(); p != nil {
						panic(userPanic{p})
					}
				}()
				return fn(r)
			}
			k := m.Key.encode()
			rec, turns, err := s.apply(tx, m.Key, k, m.at(now), userFn)
			var ue errUser
			if errors.As(err, &ue) {
				errs[i] = ue.err
				continue
			}
			if err != nil {
				return err
			}
			recs[i] = rec
			w.put(s.records, k, rec, turns)
		}
		if through != nil {
			return tx.Bucket(bucketMeta).Put(metaJournalThrough, binary.LittleEndian.AppendUint64(nil, *through))
		}
		return nil
	})
	w.committed = err == nil
	return recs, errs, err
}

// cacheWrite follows one write transaction for the record cache.
type cacheWrite struct {
	txid      uint64   // 0 until the transaction has begun
	keys      []string // what it put in the cache, pending
	committed bool
}

func (w *cacheWrite) put(c *recordCache, k []byte, rec Record, turns *turnLayout) {
	c.put(k, rec, turns, w.txid)
	w.keys = append(w.keys, string(k))
}

func (w *cacheWrite) remove(c *recordCache, k []byte) {
	c.remove(k, w.txid)
	w.keys = append(w.keys, string(k))
}

// settle shows readers what a committed write transaction put in the
// record cache, or clears the cache when the transaction failed or
// panicked after its writers put records it did not commit.
func (s *boltStore) settle(w *cacheWrite) {
	switch {
	case w.committed:
		s.records.commit(w.keys, w.txid)
	case w.txid != 0:
		s.records.clear(w.txid)
	}
}

func (s *boltStore) Delete(key Key) (bool, error) {
	if err := key.Validate(); err != nil {
		return false, err
	}
	if s.readOnly {
		return false, fmt.Errorf("state: delete: %w", ErrReadOnly)
	}
	var found bool
	var w cacheWrite
	defer s.settle(&w)
	err := s.update("delete", func(tx *bolt.Tx) error {
		w.txid = uint64(tx.ID())
		b := tx.Bucket(bucketConversations)
		k := key.encode()
		if b.Get(k) == nil {
			return nil
		}
		found = true
		w.remove(s.records, k)
		if err := deleteTurns(tx.Bucket(bucketTurns), k); err != nil {
			return err
		}
		return b.Delete(k)
	})
	w.committed = err == nil
	if err != nil {
		return false, err
	}
	return found, nil
}

func (s *boltStore) List(opts ListOptions) ([]Record, error) {
	var out []Record
	err := s.view("list", func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketConversations)
		if b == nil {
			return nil
		}
		var entries []listEntry
		c := b.Cursor()
		var prefix []byte
		if opts.Namespace != "" {
			prefix = namespacePrefix(opts.Namespace)
		}
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if !opts.matches(k) {
				continue
			}
			at, ok := decodeStamp(v)
			if !ok {
				continue
			}
			entries = append(entries, listEntry{key: k, updatedAt: at})
		}
		for _, e := range opts.page(entries) {
			key, _ := decodeKey(e.key)
			v := b.Get(e.key)
			rec, err := decodeRecord(key, v)
			if err != nil {
				continue
			}
			if _, err := storedTurns(tx.Bucket(bucketTurns), e.key, v, &rec); err != nil {
				continue
			}
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *boltStore) Sweep(olderThan time.Time) (int, error) {
	if s.readOnly {
		return 0, fmt.Errorf("state: sweep: %w", ErrReadOnly)
	}
	var n int
	var w cacheWrite
	defer s.settle(&w)
	err := s.update("sweep", func(tx *bolt.Tx) error {
		w.txid = uint64(tx.ID())
		b := tx.Bucket(bucketConversations)
		var doomed [][]byte
		err := b.ForEach(func(k, v []byte) error {
			if at, ok := decodeStamp(v); !ok || at.Before(olderThan) {
				doomed = append(doomed, append([]byte(nil), k...))
			}
			return nil
		})
		if err != nil {
			return err
		}
		tb := tx.Bucket(bucketTurns)
		for _, k := range doomed {
			w.remove(s.records, k)
			if err := deleteTurns(tb, k); err != nil {
				return err
			}
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		n = len(doomed)
		return sweepOriginals(tx, olderThan)
	})
	w.committed = err == nil
	if err != nil {
		return 0, err
	}
	return n, nil
}

func (s *boltStore) Close() error {
	s.closeOnce.Do(func() {
		s.sweeper.Stop()
		s.trimmer.Stop()
		s.closed.Store(true)
		s.records.clear(0)
		if err := s.broken.Load(); err != nil {
			// bbolt may hold its locks; leave the file to the process exit.
			s.closeErr = fmt.Errorf("state: close %s: not closed: %w", s.path, *err)
			return
		}
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("state: close %s: %w", s.path, err)
		}
		if s.journal != nil {
			if err := s.journal.close(); err != nil && s.closeErr == nil {
				s.closeErr = fmt.Errorf("state: close %s journal: %w", s.path, err)
			}
		}
	})
	return s.closeErr
}
