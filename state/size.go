package state

import (
	"fmt"
	"os"
)

// Sizer is implemented by stores kept in a file (the bolt store): Size
// returns the file's size in bytes, for monitoring. The memory store does
// not implement it.
type Sizer interface {
	Size() (int64, error)
}

var _ Sizer = (*boltStore)(nil)

// Size returns the size of the database file. bbolt grows the file in
// chunks and never shrinks it, so this is the disk the db takes, not the
// bytes of live records.
func (s *boltStore) Size() (int64, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0, fmt.Errorf("state: size of %s: %w", s.path, err)
	}
	return fi.Size(), nil
}
