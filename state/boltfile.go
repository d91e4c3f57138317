package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// bbolt's on-disk meta page, read by checkTruncated before bbolt maps the
// file. bbolt writes it in the machine's byte order: a page header of 16
// bytes, then magic, version, page size, flags (uint32 each), the root bucket
// (two uint64), the freelist page, the high-water mark page id, the txid, and
// an FNV-64a checksum of everything from magic to txid.
const (
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	boltMetaOffset  = 16 // the page header
	boltMetaSumLen  = 56 // bytes of meta covered by the checksum
	boltMetaPgidOff = 40 // high-water mark, from the start of meta
	boltMinPageSize = 512
)

// checkTruncated returns an error wrapping ErrNotDatabase when a valid bbolt
// meta page of the file at path claims more pages than the file holds. bbolt
// would map the missing pages and die of SIGBUS reading them, and even with
// the fault recovered its mapping keeps the file locked until the process
// exits. A file too short or malformed to tell passes: bbolt reports it.
func checkTruncated(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // bbolt reports it with its own context
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	size := fi.Size()
	metaAt := func(off int64) (pageSize uint32, pages uint64, ok bool) {
		var b [boltMetaOffset + boltMetaSumLen + 8]byte
		if _, err := f.ReadAt(b[:], off); err != nil && err != io.EOF {
			return 0, 0, false
		}
		m := b[boltMetaOffset:]
		ne := binary.NativeEndian
		h := fnv.New64a()
		_, _ = h.Write(m[:boltMetaSumLen])
		if ne.Uint32(m[0:]) != boltMagic || ne.Uint32(m[4:]) != boltVersion ||
			ne.Uint64(m[boltMetaSumLen:]) != h.Sum64() {
			return 0, 0, false
		}
		return ne.Uint32(m[8:]), ne.Uint64(m[boltMetaPgidOff:]), true
	}
	pageSize, pages, ok := metaAt(0)
	if !ok || pageSize < boltMinPageSize {
		return nil
	}
	check := func(ps uint32, n uint64) error {
		if need := uint64(ps) * n; need > uint64(size) {
			return fmt.Errorf("state: open database %s: %w (truncated: %d bytes, its meta page claims %d)",
				path, ErrNotDatabase, size, need)
		}
		return nil
	}
	if err := check(pageSize, pages); err != nil {
		return err
	}
	if ps1, pages1, ok := metaAt(int64(pageSize)); ok {
		return check(ps1, pages1)
	}
	return nil
}

// lockTimeout is bbolt's wait for the file lock for BoltOptions.Timeout.
func lockTimeout(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultLockTimeout
	case d < 0:
		return time.Nanosecond // bbolt: 0 would wait forever
	}
	return d
}

// openBoltFile is bolt.Open that turns a panic or a memory fault on a corrupt
// file (bbolt reads the file through mmap, so a page past the end of a
// truncated file is a SIGBUS) into an error. It closes the file, but when the
// fault happens after bbolt mapped it, the mapping keeps the file (and its
// lock) open until the process exits; checkTruncated catches the common case
// first.
func openBoltFile(path string, o *bolt.Options) (db *bolt.DB, err error) {
	var file *os.File
	o.OpenFile = func(name string, flag int, perm fs.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		file = f
		return f, err
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if file != nil {
				_ = file.Close()
			}
			db, err = nil, fmt.Errorf("%w: %v", bolterrors.ErrInvalid, p)
		}
	}()
	return bolt.Open(path, fileMode, o)
}

// classifyOpenError wraps an error of bolt.Open in the package's sentinels.
func classifyOpenError(path string, err error, timeout time.Duration) error {
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return fmt.Errorf("state: open database %s: no lock after %v: %w", path, timeout, ErrLocked)
	case errors.Is(err, bolterrors.ErrInvalid),
		errors.Is(err, bolterrors.ErrChecksum),
		errors.Is(err, bolterrors.ErrVersionMismatch),
		errors.Is(err, bolterrors.ErrInvalidMapping):
		return fmt.Errorf("state: open database %s: %w (%v)", path, ErrNotDatabase, err)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("state: open database: %w", err)
	default:
		// bbolt reports other malformed files with plain errors ("file size
		// too small", mmap failures).
		return fmt.Errorf("state: open database %s: %w (%w)", path, ErrNotDatabase, err)
	}
}

// checkSchema verifies (and on a new file writes) the meta bucket.
func checkSchema(db *bolt.DB, readOnly bool) error {
	check := func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			empty := true
			_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
			if !empty {
				return fmt.Errorf("%w: a bbolt file without ctxpress metadata (written by another program?)", ErrNotDatabase)
			}
			if readOnly {
				return nil // an empty bbolt file: nothing to read
			}
			var err error
			if meta, err = tx.CreateBucket(bucketMeta); err != nil {
				return err
			}
			if err := meta.Put(metaApp, []byte("ctxpress")); err != nil {
				return err
			}
			if err := meta.Put(metaSchemaVersion, []byte(strconv.Itoa(boltSchemaVersion))); err != nil {
				return err
			}
		}
		raw := meta.Get(metaSchemaVersion)
		v, err := strconv.Atoi(string(raw))
		if err != nil || v < 1 {
			return fmt.Errorf("%w: bad schema version %q", ErrNotDatabase, raw)
		}
		if v > boltSchemaVersion {
			return fmt.Errorf("%w: schema version %d, this ctxpress reads up to %d", ErrSchemaTooNew, v, boltSchemaVersion)
		}
		if readOnly {
			return nil
		}
		if v < boltSchemaVersion {
			// 1 to 2: records move their turns when next written.
			if err := meta.Put(metaSchemaVersion, []byte(strconv.Itoa(boltSchemaVersion))); err != nil {
				return err
			}
		}
		if _, err := tx.CreateBucketIfNotExists(bucketTurns); err != nil {
			return err
		}
		if _, _, err := originalBuckets(tx); err != nil {
			return err
		}
		_, err = tx.CreateBucketIfNotExists(bucketConversations)
		return err
	}
	if readOnly {
		return db.View(check)
	}
	return db.Update(check)
}
