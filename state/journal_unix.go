//go:build unix

package state

import (
	"fmt"
	"os"
	"syscall"
)

// openJournal maps the journal file at path (size bytes, created or
// reformatted when it is not a journal of that size) and recovers its
// entries. fresh discards them: a new database has nothing to replay into.
func openJournal(path string, size int, fresh bool) (*journal, []JournalEntry, error) {
	size = max(size, minJournalBytes)
	size = (size + journalHeader - 1) &^ (journalHeader - 1)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return nil, nil, fmt.Errorf("state: open journal: %w", err)
	}
	defer f.Close() // the mapping keeps what it needs
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("state: open journal: %w", err)
	}
	if fi.Size() != int64(size) {
		fresh = true
		if err := allocate(f, size); err != nil {
			return nil, nil, fmt.Errorf("state: size journal: %w", err)
		}
	}
	buf, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("state: map journal: %w", err)
	}
	j := &journal{buf: buf, head: journalHeader, unmap: func() error { return syscall.Munmap(buf) }}
	var entries []JournalEntry
	if fresh || !validJournal(buf) {
		formatJournal(buf)
	} else {
		entries, j.live, j.head = recoverJournal(buf)
	}
	return j, entries, nil
}

// allocate makes f size bytes of zeros written out, not a sparse file: a
// store into a mapped hole needs a block, and on a full disk the kernel
// answers with SIGBUS, which would kill the process.
func allocate(f *os.File, size int) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	zeros := make([]byte, 64<<10)
	for off := 0; off < size; off += len(zeros) {
		if _, err := f.WriteAt(zeros[:min(len(zeros), size-off)], int64(off)); err != nil {
			return err
		}
	}
	return f.Sync()
}
