package state

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Mapping is the memory the bolt file's map takes. bbolt reads the db
// through a read-only shared map of the whole file (its size rounded up,
// doubling to 1 GiB, then in 1 GiB steps), so the pages of the file a
// process has touched count in its RSS. They are page cache the kernel
// reclaims under pressure (never dirty: bbolt writes with pwrite), not
// heap, and they stay within the file's size.
type Mapping struct {
	Mapped   int64 // address space mapped
	Resident int64 // of it, pages resident in this process's RSS
}

// Mapper is implemented by stores that map a file (the bolt store).
type Mapper interface {
	Mapping() (Mapping, error)
}

var _ Mapper = (*boltStore)(nil)

// errNoMapping is returned where the platform does not say which pages of
// a map are resident (every system but Linux).
var errNoMapping = errors.New("state: the db's mapping is not readable on this system")

// Mapping reports the bolt file's map: its start is read inside a read
// transaction (bbolt remaps only between them), its size and resident
// pages from the system (/proc/self/smaps on Linux). A remap between the
// two is retried once.
func (s *boltStore) Mapping() (Mapping, error) {
	if s.closed.Load() {
		return Mapping{}, fmt.Errorf("state: mapping of %s: %w", s.path, ErrClosed)
	}
	var err error
	for range 2 {
		var addr uintptr
		if err = s.db.View(func(tx *bolt.Tx) error {
			addr = tx.DB().Info().Data
			return nil
		}); err != nil {
			return Mapping{}, fmt.Errorf("state: mapping of %s: %w", s.path, err)
		}
		var m Mapping
		var found bool
		if m, found, err = mappingAt(addr); err == nil && found {
			return m, nil
		}
	}
	if err == nil {
		err = errors.New("no such map (remapped twice)")
	}
	return Mapping{}, fmt.Errorf("state: mapping of %s: %w", s.path, err)
}
